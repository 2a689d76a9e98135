"""Export sample models to ONNX inside the tests (no .onnx files are committed)."""
import os
import warnings

import torch
from conftest import sample

from precisionaudit.capture.pytorch.model_file import import_model_file


def export(name: str, directory: str, dynamo: bool) -> str:
    """sample_models/<name> (or the model file at a path) exported by the dynamo
    (torch.export) or the legacy TorchScript exporter."""
    module = import_model_file(name if os.sep in name else sample(name))
    model, inputs = module.get_model().eval(), module.get_example_inputs()
    stem = os.path.basename(name)[:-3]
    path = os.path.join(directory, f"{stem}_{'dynamo' if dynamo else 'legacy'}.onnx")
    if not os.path.exists(path):
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(inputs), path, dynamo=dynamo, verbose=False)
    return path
