"""Tiny Hugging Face ViT (2 layers, d=64, 32x32 images in 8x8 patches), random weights.

For bench/gpu_truth.py's dtype table (issue 28): get_model is transformers' default attention
(SDPA), get_eager_model eager attention (matmul, softmax, matmul).
"""
import torch
from transformers import ViTConfig, ViTForImageClassification


def _build(**overrides):
    torch.manual_seed(0)
    config = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                       image_size=32, patch_size=8, num_labels=10, **overrides)
    return ViTForImageClassification(config).eval()


def get_model():
    return _build()


def get_eager_model():
    return _build(attn_implementation="eager")


def get_example_inputs():
    return {"pixel_values": torch.randn(2, 3, 32, 32)}
