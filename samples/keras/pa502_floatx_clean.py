"""PA502 clean twin: the custom layer casts to its own compute dtype, and a second one upcasts
a softmax to float32 on purpose and casts it back before returning.

precisionaudit scan samples/keras/pa502_floatx_clean.py
"""
import keras
import numpy as np


class FeatureScale(keras.layers.Layer):
    """Scales features by a learned per-feature gain."""

    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="gain")

    def call(self, x):
        x = keras.ops.cast(x, self.compute_dtype)  # the policy's dtype
        return x * self.gain


class StableGate(keras.layers.Layer):
    """A softmax gate computed in float32 and returned in the layer's compute dtype."""

    def call(self, x):
        weights = keras.ops.softmax(keras.ops.cast(x, "float32"), axis=-1)
        return x * keras.ops.cast(weights, self.compute_dtype)


def get_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input((32,))
    x = keras.layers.Dense(64, activation="relu", name="hidden")(inputs)
    x = FeatureScale(name="scale")(x)
    x = StableGate(name="gate")(x)
    x = keras.layers.Dense(10, name="classifier")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs)


def get_example_inputs():
    return (np.zeros((8, 32), "float32"),)
