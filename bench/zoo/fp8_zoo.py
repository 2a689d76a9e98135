"""Real-width Hugging Face architectures for the FP8 bench (``bench/fp8_bench.py``).

Each model has its published hidden, MLP and vocabulary sizes (what decides FP8 eligibility)
but only two layers, so that it builds and scans in seconds on a CPU; the bench scales the
per-layer FLOPs to the published depth (``DEPTH``). Random weights, no hub.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_zoo import _lm_inputs, _transformers  # noqa: E402

import torch  # noqa: E402

#: name -> (config class, real-width kwargs with 2 layers, vocabulary, model class, published depth)
MODELS = {
    "gpt2": ("GPT2Config", dict(n_layer=2, n_embd=768, n_head=12), 50257, "GPT2LMHeadModel", 12),
    "opt_125m": ("OPTConfig", dict(num_hidden_layers=2, hidden_size=768, num_attention_heads=12, ffn_dim=3072,
                                   word_embed_proj_dim=768), 50272, "OPTForCausalLM", 12),
    "pythia_160m": ("GPTNeoXConfig", dict(num_hidden_layers=2, hidden_size=768, num_attention_heads=12,
                                          intermediate_size=3072), 50304, "GPTNeoXForCausalLM", 12),
    "smollm_135m": ("LlamaConfig", dict(num_hidden_layers=2, hidden_size=576, num_attention_heads=9,
                                        num_key_value_heads=3, intermediate_size=1536, tie_word_embeddings=True),
                    49152, "LlamaForCausalLM", 30),
    "qwen2_0_5b": ("Qwen2Config", dict(num_hidden_layers=2, hidden_size=896, num_attention_heads=14,
                                       num_key_value_heads=2, intermediate_size=4864, tie_word_embeddings=True),
                   151936, "Qwen2ForCausalLM", 24),
    "bert_base": ("BertConfig", dict(num_hidden_layers=2, hidden_size=768, num_attention_heads=12,
                                     intermediate_size=3072), 30522, "BertForMaskedLM", 12),
    "vit_base": ("ViTConfig", dict(num_hidden_layers=2, hidden_size=768, num_attention_heads=12,
                                   intermediate_size=3072, image_size=224, patch_size=16, num_labels=1000),
                 None, "ViTForImageClassification", 12),
}
DEPTH = {name: spec[4] for name, spec in MODELS.items()}

for _name, (_cfg, _kw, _vocab, _cls, _) in MODELS.items():
    _kwargs = dict(_kw, vocab_size=_vocab) if _vocab else _kw
    globals()[f"get_{_name}"] = _transformers(_cfg, _kwargs, _cls)
    globals()[f"inputs_{_name}"] = (_lm_inputs(_vocab) if _vocab
                                    else (lambda: {"pixel_values": torch.randn(2, 3, 224, 224)}))
