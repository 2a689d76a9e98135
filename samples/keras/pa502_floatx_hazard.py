"""PA502 hazard: a custom layer casts to keras.backend.floatx() (float32) in its call, so under
mixed_float16 its ops run in float32 and it hands float32 to the next layer.

precisionaudit scan samples/keras/pa502_floatx_hazard.py
"""
import keras
import numpy as np


class FeatureScale(keras.layers.Layer):
    """Scales features by a learned per-feature gain."""

    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="gain")

    def call(self, x):
        x = keras.ops.cast(x, keras.backend.floatx())  # float32, whatever the policy says
        return x * self.gain


def get_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input((32,))
    x = keras.layers.Dense(64, activation="relu", name="hidden")(inputs)
    x = FeatureScale(name="scale")(x)
    x = keras.layers.Dense(10, name="classifier")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs)


def get_example_inputs():
    return (np.zeros((8, 32), "float32"),)
