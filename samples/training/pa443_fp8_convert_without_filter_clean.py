"""PA443 clean twin: the head and the layers the FP8 GEMM cannot take stay in bf16."""
import torch
from torchao.float8 import convert_to_float8_training


def module_filter_fn(mod, fqn):
    if fqn == "lm_head":
        return False
    return mod.in_features % 16 == 0 and mod.out_features % 16 == 0


def prepare(model):
    convert_to_float8_training(model, module_filter_fn=module_filter_fn)
    return torch.compile(model)
