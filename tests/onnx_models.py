"""Export sample models to ONNX inside the tests (no .onnx files are committed)."""
import os
import warnings

import torch
from conftest import sample

from precisionaudit.runtime.pytorch.model_file import import_model_file


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


def export_encoder(name: str, directory: str, dynamo: bool) -> str:
    """ENCODERS[name] with seed-0 weights, exported by the dynamo or the legacy exporter."""
    import transformers

    path = os.path.join(directory, f"{name}_{'dynamo' if dynamo else 'legacy'}.onnx")
    if not os.path.exists(path):
        config_class, kwargs, model_class = ENCODERS[name]
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**kwargs))
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_TupleOutputs(model.eval()).eval(), encoder_inputs(), path, dynamo=dynamo,
                              input_names=["input_ids", "attention_mask"], verbose=False)
    return path
