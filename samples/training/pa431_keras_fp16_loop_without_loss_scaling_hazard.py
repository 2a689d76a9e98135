"""PA431 hazard: a custom tf.GradientTape loop under mixed_float16 with a plain optimizer."""
import tensorflow as tf
from tensorflow import keras

keras.mixed_precision.set_global_policy("mixed_float16")


def train(dataset):
    model = keras.Sequential([keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, dtype="float32")])
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for x, y in dataset:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
