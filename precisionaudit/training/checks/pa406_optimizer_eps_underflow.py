"""PA406 optimizer-eps-underflow: an Adam-family optimizer whose ``eps`` rounds to 0 in the
dtype of the parameters it updates.

torch 2.13 keeps the optimizer state in the parameter's dtype (``torch.zeros_like(p)`` in
each ``_init_group``) and adds ``eps`` to the square root of that state in that dtype,
on the single-tensor path (``exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)``,
torch/optim/adam.py ``_single_tensor_adam``) and on the foreach path
(``torch._foreach_add_(exp_avg_sq_sqrt, eps)``, ``_multi_tensor_adam``). Where the state is
0 the sum is ``eps`` rounded to the parameter's dtype: 0 in fp16 for eps below 2^-25.
The fused kernels (``fused=True``) compute in fp32 and are not reported.
"""
from __future__ import annotations

import ast

from ..guards import Possible, conjoin, words
from ..lookup import bound_values, numbers
from ..params import mentions_an_optimizer, optimizer_sites, unfused_paths
from ..registry import TrainingHit, training_check
from ..syntax import LOW_DTYPES, argument

#: class -> (eps default in torch 2.13, eps's position in the signature, the denominator)
EPS = {
    "Adam": (1e-8, 3, "sqrt(exp_avg_sq) + eps"),
    "AdamW": (1e-8, 3, "sqrt(exp_avg_sq) + eps"),
    "RMSprop": (1e-8, 3, "sqrt(square_avg) + eps"),
    "Adagrad": (1e-10, 5, "sqrt(state_sum) + eps"),
    "Adadelta": (1e-6, 3, "sqrt(square_avg + eps)"),
}


@training_check("PA406", mentions=mentions_an_optimizer)
def optimizer_eps_underflow(script):
    from ...core.numerics import SMALLEST_SUBNORMAL, rounds_to  # numpy: only where an optimizer is built

    for site in optimizer_sites(script):
        if site.short_name not in EPS:
            continue
        default, index, denominator = EPS[site.short_name]
        call = site.call
        if site.built_by is not None:  # a framework's optimizer (frameworks/hf_trainer.py)
            given, not_fused = site.eps, list(site.unfused)
        else:
            if _groups_set_eps(script, argument(call, "params", 0)):
                continue
            given = argument(call, "eps", index)
            if given is None and (any(isinstance(a, ast.Starred) for a in call.args)
                                  or any(k.arg is None for k in call.keywords)):
                continue  # eps may be in *args / **kwargs: unknown
            not_fused = unfused_paths(script, call, site.short_name)
        eps_values = [Possible(default)] if given is None else numbers(script, given)
        hits = []
        for dtype in site.param_dtypes:
            if dtype.value not in LOW_DTYPES:
                continue
            for eps in eps_values:
                if not eps.known or eps.value <= 0 or rounds_to(eps.value, dtype.value) != 0.0:
                    continue
                for path in not_fused:
                    both = conjoin(conjoin([eps], dtype.guard), path)
                    if both:
                        hits.append((len(both[0].guard), sorted(both[0].guard), dtype, eps, both[0].guard))
        if not hits:
            continue
        _, _, dtype, eps, guard = min(hits, key=lambda h: h[:2])
        line, column = script.line_column(call)
        origin_line = script.line_column(dtype.origin)[0] if dtype.origin is not None else line
        values = {
            "optimizer": site.named, "eps": f"{eps.value:g}",
            "eps_source": "the default eps" if given is None else "eps",
            "dtype": dtype.value, "conversion_line": origin_line, "denominator": denominator,
            "smallest": f"{SMALLEST_SUBNORMAL[dtype.value]:.3g}",
        }
        yield TrainingHit(line, column, values, words(guard, script.index.flag_atoms), scope=script.enclosing(call),
                          subject=site.name)


def _groups_set_eps(script, params) -> bool:
    """Whether a param group dict names its own ``eps`` (then the default is not what runs)."""
    if params is None:
        return False
    nodes = [params]
    if isinstance(params, ast.Name):
        nodes += [value for value, _ in bound_values(script, params) if value is not None]
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "eps"
                                                   for k in inner.keys):
                return True
            if isinstance(inner, ast.keyword) and inner.arg == "eps":  # dict(params=..., eps=...)
                return True
    return False
