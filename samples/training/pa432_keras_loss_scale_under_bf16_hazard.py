"""PA432 hazard: loss scaling for a mixed_bfloat16 model."""
import keras
from keras import mixed_precision

mixed_precision.set_global_policy(mixed_precision.Policy("mixed_bfloat16"))


def build():
    model = keras.applications.ResNet50(weights=None)
    optimizer = mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    return model
