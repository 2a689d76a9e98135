"""tensorflow #49368 (keras-io PR #524): the "Customizing what happens in fit" GAN overrides
``compile()`` to keep its own optimizers and calls ``super().compile()`` with none; under the
``mixed_float16`` policy those optimizers are never wrapped in a ``LossScaleOptimizer``, and the
``train_step`` that applies gradients with them scales no loss.

Sources (read):
  https://github.com/tensorflow/tensorflow/issues/49368 ("When using Keras mixed-precision API and
  overriding `tf.keras.Model.compile` function like the above guide, training loss cannot
  converge easily, because the optimizers are not wrapped in `LossScaleOptimizer`")
  https://github.com/keras-team/keras-io/pull/524 (the guide's note)
  keras 3.15.1 keras/src/trainers/trainer.py ``Trainer.compile`` (wraps only the optimizer it
  receives, under mixed_float16)

The guide's end-to-end GAN, with the reporter's global policy.
"""
import tensorflow as tf
from tensorflow import keras

keras.mixed_precision.set_global_policy("mixed_float16")


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    def train_step(self, real_images):
        batch_size = tf.shape(real_images)[0]
        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        generated_images = self.generator(random_latent_vectors)
        combined_images = tf.concat([generated_images, real_images], axis=0)
        labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * tf.random.uniform(tf.shape(labels))
        with tf.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)  # expect: PA431
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        misleading_labels = tf.zeros((batch_size, 1))
        with tf.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)  # expect: PA431
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        return {"d_loss": d_loss, "g_loss": g_loss}
