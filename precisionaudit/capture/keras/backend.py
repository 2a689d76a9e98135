"""Keras 3 on its torch backend: selected before anything imports keras.

Keras reads ``KERAS_BACKEND`` once, when it is first imported; a model file that does
``import keras`` at its top must therefore find it already set. On the torch backend each
layer is a ``torch.nn.Module`` and every cast its dtype policy makes is a torch op, so the
PyTorch capture sees what the policy really computes in.
"""
from __future__ import annotations

import os

from ...core.errors import CaptureError, UsageError

BACKEND = "torch"
INSTALL_HINT = "pip install 'precisionaudit[keras]'"


def import_keras():
    """keras, imported on its torch backend; a UsageError (exit 2) when keras is missing or
    was imported on another backend already."""
    os.environ.setdefault("KERAS_BACKEND", BACKEND)
    if os.environ["KERAS_BACKEND"] != BACKEND:
        raise UsageError(f"KERAS_BACKEND is {os.environ['KERAS_BACKEND']!r}; precisionaudit runs Keras "
                         f"models on the {BACKEND} backend (unset it)")
    try:
        import keras
    except ImportError as exc:
        raise UsageError(f"Keras models need the keras package ({INSTALL_HINT}): {exc}") from None
    if keras.backend.backend() != BACKEND:
        raise UsageError(f"keras was imported on the {keras.backend.backend()} backend; precisionaudit runs "
                         f"Keras models on the {BACKEND} backend")
    return keras


def require_torch_backend(path: str) -> None:
    """A CaptureError when the model file asked for another backend (it set
    ``KERAS_BACKEND`` or called ``keras.config.set_backend``): its model would not be the
    one Keras builds on the torch backend."""
    import keras

    wanted = os.environ.get("KERAS_BACKEND", BACKEND)
    running = keras.backend.backend()
    if wanted != BACKEND or running != BACKEND:
        other = wanted if wanted != BACKEND else running
        os.environ["KERAS_BACKEND"] = BACKEND
        raise CaptureError(f"{path}: the model file asks for the {other} backend; precisionaudit runs Keras "
                           f"models on the {BACKEND} backend (leave KERAS_BACKEND to precisionaudit)")
