"""PA432 clean twin: mixed_bfloat16 with the plain optimizer."""
import keras
from keras import mixed_precision

mixed_precision.set_global_policy(mixed_precision.Policy("mixed_bfloat16"))


def build():
    model = keras.applications.ResNet50(weights=None)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return model
