"""A small Keras text classifier under mixed_float16 whose softmax output is float16.

precisionaudit scan samples/keras/keras_mixed_classifier.py
"""
import keras
import numpy as np


def get_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    tokens = keras.Input((32,), dtype="int32")
    x = keras.layers.Embedding(1000, 64)(tokens)
    x = keras.layers.GlobalAveragePooling1D()(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    out = keras.layers.Dense(8, activation="softmax")(x)
    return keras.Model(tokens, out)


def get_example_inputs():
    return (np.random.default_rng(0).integers(0, 1000, (4, 32)).astype("int32"),)
