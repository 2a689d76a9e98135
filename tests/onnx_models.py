"""Export sample models to ONNX inside the tests (no .onnx files are committed)."""
import os
import warnings

import torch
from conftest import sample

from precisionaudit.runtime.pytorch.model_file import import_model_file


def export(name: str, directory: str, dynamo: bool, dynamic: bool = False) -> str:
    """sample_models/<name> (or the model file at a path) exported by the dynamo
    (torch.export) or the legacy TorchScript exporter; ``dynamic``: with dynamic axes
    (``dynamic_axes``)."""
    module = import_model_file(name if os.sep in name else sample(name))
    model, inputs = module.get_model().eval(), module.get_example_inputs()
    path = os.path.join(directory, export_name(os.path.basename(name)[:-3], dynamo, dynamic))
    if not os.path.exists(path):
        onnx_export(model, tuple(inputs), path, dynamo, dynamic=dynamic)
    return path


def export_name(stem: str, dynamo: bool, dynamic: bool) -> str:
    return f"{stem}_{'dynamo' if dynamo else 'legacy'}{'_dynamic' if dynamic else ''}.onnx"


def dynamic_axes(inputs) -> list[dict]:
    """The axes a real export leaves symbolic: every input's batch (dim 0), and the sequence
    (dim 1) of token ids and masks (2-D integer inputs)."""
    return [{0: "batch", 1: "sequence"} if t.dim() == 2 and not t.is_floating_point() else {0: "batch"}
            for t in inputs]


def onnx_export(model, inputs: tuple, path: str, dynamo: bool, names=None, dynamic: bool = False):
    """``torch.onnx.export`` by either exporter; ``dynamic``: with ``dynamic_axes`` (the legacy
    exporter's names) or the same axes as ``Dim.AUTO`` (torch.export's ``dynamic_shapes``)."""
    import inspect

    kwargs = {"input_names": names} if names else {}
    if dynamic:
        axes = dynamic_axes(inputs)
        if dynamo:
            from torch.export import Dim

            specs = tuple({axis: Dim.AUTO for axis in a} for a in axes)
            varargs = any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(model.forward).parameters.values())
            kwargs["dynamic_shapes"] = (specs,) if varargs else specs
        else:
            names = names or [f"input_{i}" for i in range(len(inputs))]
            kwargs.update(input_names=names, dynamic_axes=dict(zip(names, axes)))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, path, dynamo=dynamo, verbose=False, **kwargs)
    save_inputs(path, inputs)


def inputs_file(path: str) -> str:
    """Where an export's example inputs are kept: an .npz that ``--data`` takes."""
    return path[:-len(".onnx")] + "_inputs.npz"


def save_inputs(path: str, inputs: tuple):
    """The example inputs of the export at ``path``, by the graph's input names (what the
    checks of a dynamic export run on, and a comparison's calibration data)."""
    import numpy as np
    import onnx

    from precisionaudit.runtime.onnx.inputs import graph_inputs

    names = [i.name for i in graph_inputs(onnx.load(path, load_external_data=False))]
    np.savez(inputs_file(path), **{n: t.numpy() for n, t in zip(names, inputs)})


#: tiny Hugging Face encoders (2 layers, width 64, random weights, no hub): name → (config
#: class, config kwargs, model class). BERT and RoBERTa have a pooler, whose Gather reads
#: the graph output last_hidden_state; DistilBERT has none.
ENCODERS = {
    "bert": ("BertConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                intermediate_size=128, max_position_embeddings=128), "BertModel"),
    "roberta": ("RobertaConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=130), "RobertaModel"),
    "distilbert": ("DistilBertConfig", dict(n_layers=2, dim=64, n_heads=4, hidden_dim=128),
                   "DistilBertModel"),
}


class _TupleOutputs(torch.nn.Module):
    """An HF encoder returning its outputs as a tuple (last_hidden_state[, pooler_output])."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return tuple(self.model(input_ids=input_ids, attention_mask=attention_mask).values())


def encoder_inputs(seed: int = 0):
    """(input_ids, attention_mask) of 2 x 16 tokens, the second row padded after 10."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 1000, (2, 16), generator=generator)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    return ids, mask


def export_encoder(name: str, directory: str, dynamo: bool, dynamic: bool = False) -> str:
    """ENCODERS[name] with seed-0 weights, exported by the dynamo or the legacy exporter."""
    import transformers

    path = os.path.join(directory, export_name(name, dynamo, dynamic))
    if not os.path.exists(path):
        config_class, kwargs, model_class = ENCODERS[name]
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**kwargs))
        onnx_export(_TupleOutputs(model.eval()).eval(), encoder_inputs(), path, dynamo,
                    names=["input_ids", "attention_mask"], dynamic=dynamic)
    return path
