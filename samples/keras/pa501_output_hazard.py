"""PA501 hazard: under mixed_float16 the last Dense's softmax computes in float16, so the model
outputs float16 probabilities.

precisionaudit scan samples/keras/pa501_output_hazard.py
"""
import keras
import numpy as np


def get_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input((32,))
    x = keras.layers.Dense(64, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(10, activation="softmax", name="classifier")(x)
    return keras.Model(inputs, outputs)


def get_example_inputs():
    return (np.zeros((8, 32), "float32"),)
