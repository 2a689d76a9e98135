"""PA501 clean twin: the same model with the softmax in its own float32 layer, as the Keras
mixed-precision guide builds it.

precisionaudit scan samples/keras/pa501_output_clean.py
"""
import keras
import numpy as np


def get_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input((32,))
    x = keras.layers.Dense(64, activation="relu", name="hidden")(inputs)
    x = keras.layers.Dense(10, name="classifier")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs)


def get_example_inputs():
    return (np.zeros((8, 32), "float32"),)
