"""PA431 clean twin: the optimizer is a LossScaleOptimizer, the loss is scaled before the
gradient and apply() unscales the gradients (Keras 3)."""
import tensorflow as tf
from tensorflow import keras

keras.mixed_precision.set_global_policy("mixed_float16")


def train(dataset):
    model = keras.Sequential([keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, dtype="float32")])
    optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam(1e-3))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for x, y in dataset:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            scaled_loss = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled_loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
