"""PA433 hazard: the model is built before the policy is set, so it stays float32."""
import tensorflow as tf


def main():
    model = tf.keras.applications.ResNet50(weights=None)
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model
