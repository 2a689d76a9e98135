"""The scalar loss a backward runs from when the model returns none: what check --grad, check
--train and the FP4 range pass (the Wgrad GEMMs' error) back-propagate from alike."""
from __future__ import annotations

import torch
from torch.utils import _pytree as pytree


def scalar_loss(outputs, seed: int):
    """A function outputs → scalar loss, fixed for all variants (weights drawn once)."""
    leaves = [t for t in pytree.tree_leaves(outputs)
              if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if leaves and leaves[0].numel() == 1:
        return lambda out: floats(out)[0].float().reshape(())
    gen = torch.Generator().manual_seed(seed)
    weights = [torch.randn(t.shape, generator=gen).to(t.device) for t in leaves]

    def loss(out):
        terms = [(o.float() * w).mean() for o, w in zip(floats(out), weights)]
        return sum(terms) if terms else None
    return loss


def floats(out):
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
