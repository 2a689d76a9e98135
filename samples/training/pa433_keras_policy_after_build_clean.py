"""PA433 clean twin: the policy first, then the model."""
import tensorflow as tf


def main():
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    model = tf.keras.applications.ResNet50(weights=None)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model
