"""PA407 no-fp32-master-weights: a plain ``torch.optim`` optimizer updates fp16/bf16
parameters, so each update is rounded into the low dtype and one smaller than half an ulp
of the weight is lost.

torch.optim's optimizers update ``param`` in place in its own dtype
(``param.addcdiv_(exp_avg, denom, value=-step_size)`` in torch/optim/adam.py); none keeps
an fp32 copy. Optimizers that compensate (optimi's Kahan summation, torchao's
``bf16_stochastic_round=True``, apex's ``master_weights=True``) are not ``torch.optim``
and are not reported.
"""
from __future__ import annotations

from ..guards import words
from ..params import mentions_an_optimizer, optimizer_sites
from ..registry import TrainingHit, training_check
from ..syntax import LOW_DTYPES


@training_check("PA407", mentions=mentions_an_optimizer)
def no_fp32_master_weights(script):
    from ...core.numerics import UNIT_ROUNDOFF  # numpy: only where an optimizer is built

    for site in optimizer_sites(script):
        low = [p for p in site.param_dtypes if p.value in LOW_DTYPES]
        if not low:
            continue
        chosen = min(low, key=lambda p: (len(p.guard), sorted(p.guard), LOW_DTYPES.index(p.value)))
        line, column = script.line_column(site.call)
        origin_line = script.line_column(chosen.origin)[0] if chosen.origin is not None else line
        half_ulp = UNIT_ROUNDOFF[chosen.value]
        values = {"optimizer": site.named, "dtype": chosen.value, "conversion_line": origin_line,
                  "half_ulp": f"{half_ulp:.2g}", "half_ulp_power": f"2^{half_ulp.hex().split('p')[1].lstrip('+')}"}
        yield TrainingHit(line, column, values, words(chosen.guard, script.index.flag_atoms),
                          scope=script.enclosing(site.call), subject=site.name)
