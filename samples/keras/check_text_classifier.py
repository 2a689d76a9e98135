"""A Keras text classifier under mixed_float16 that returns log-probabilities: its softmax runs
in float16, confident predictions' small probabilities round to 0 there, and their log is -inf.

precisionaudit scan samples/keras/check_text_classifier.py
precisionaudit plan samples/keras/check_text_classifier.py -o amp_plan.yaml
precisionaudit check samples/keras/check_text_classifier.py --plan amp_plan.yaml
"""
import keras
import numpy as np


class LogProbabilities(keras.layers.Layer):
    """log(p) of a softmax's probabilities (what a perplexity or a beam search reads)."""

    def call(self, probabilities):
        return keras.ops.log(probabilities)


def get_model():
    keras.mixed_precision.set_global_policy("mixed_float16")
    tokens = keras.Input((64,), dtype="int32")
    x = keras.layers.Embedding(2000, 32, name="embed",
                               embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0, seed=0))(tokens)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    x = keras.layers.Dense(64, activation="relu", name="hidden")(x)
    # a confident classifier: logits tens apart, as trained ones often are
    x = keras.layers.Dense(16, name="logits",
                           kernel_initializer=keras.initializers.RandomNormal(stddev=6.0, seed=0))(x)
    x = keras.layers.Activation("softmax", name="probs")(x)
    return keras.Model(tokens, LogProbabilities(name="log_probs")(x))


def get_example_inputs():
    return (np.random.default_rng(0).integers(0, 2000, (8, 64)).astype("int32"),)
