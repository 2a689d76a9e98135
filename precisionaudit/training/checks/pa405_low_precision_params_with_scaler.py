"""PA405 low-precision-params-with-scaler: parameters made fp16 and then trained with a
GradScaler, which refuses fp16 gradients.

``GradScaler.unscale_`` and ``GradScaler.step`` call ``_unscale_grads_(..., allow_fp16=False)``
(torch/amp/grad_scaler.py), which raises ``ValueError("Attempting to unscale FP16
gradients.")`` for any parameter whose ``.grad`` is float16 (pytorch #74739). The HF Trainer
with ``fp16=True`` steps through accelerate's ``torch.amp.GradScaler`` the same way.
FSDP's ``ShardedGradScaler`` allows fp16 gradients and is not matched.
"""
from __future__ import annotations

import re

import libcst as cst

from ..params import (LOW_PRECISION_WORDS, MAX_LINES, constructions, mentions_an_optimizer, module_dtypes,
                      optimizer_sites, unfused_paths)
from ..registry import TrainingHit, training_check
from ..values import UNKNOWN, Possible, all_calls, argument, condition_words, conjoin, dtypes, position, truths

GRAD_SCALERS = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.cuda.amp.GradScaler",
                          "torch.cuda.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler",
                          "torch.cpu.amp.grad_scaler.GradScaler"})
#: Trainer classes that train with accelerate's GradScaler when their args say fp16=True
TRAINER_PACKAGES = ("transformers", "trl")
#: the words a file needs for the Trainer route to be read at all
TRAINER_CALL, FP16_ARGUMENT = re.compile(r"Trainer\s*\("), re.compile(r"\bfp16\s*=")


def mentions_a_scaler_or_trainer(text: str) -> bool:
    """Whether a file may train fp16 parameters with a GradScaler or an fp16 Trainer."""
    scaled = "GradScaler" in text and mentions_an_optimizer(text)
    trainer = "Trainer" in text and bool(TRAINER_CALL.search(text) and FP16_ARGUMENT.search(text))
    return (scaled or (trainer and bool(LOW_PRECISION_WORDS.search(text)))) and text.count("\n") <= MAX_LINES


@training_check("PA405", mentions=mentions_a_scaler_or_trainer)
def low_precision_params_with_scaler(script):
    if not mentions_a_scaler_or_trainer(script.text):
        return
    hits = {}
    # the metadata (scopes, qualified names) is resolved only past these syntactic gates
    fp16_sites = any(p.value == "float16" for s in optimizer_sites(script) for p in s.param_dtypes)
    for call in all_calls(script):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("step", "unscale_"):
            if not fp16_sites:
                continue
            found = _scaler_steps(script, call)
        elif _is_trainer(script, call):
            found = _trainer_trains(script, call)
        else:
            continue
        for possible, how in found:
            key = possible.origin
            if key not in hits or len(possible.condition) < len(hits[key][0].condition):
                hits[key] = (possible, how)
    for origin, (possible, how) in sorted(hits.items(), key=lambda item: position(script, item[0])):
        line, column = script.line_column(origin)
        values = {"conversion": _conversion_words(script, origin), "how": how}
        yield TrainingHit(line, column, values, condition_words(possible.condition), scope=script.enclosing(origin),
                          subject=_subject(origin))


def _scaler_steps(script, call) -> list:
    """(fp16 possibility, how) where ``call`` is ``scaler.step(opt)`` / ``scaler.unscale_(opt)``
    of an enabled torch GradScaler over an optimizer of fp16 parameters."""
    optimizer = argument(call, "optimizer", 0)
    if optimizer is None:
        return []
    stepping = call.func.attr.value == "step"
    enabled = []
    for made, condition in constructions(script, call.func.value):
        if not script.names_of(made.func) & GRAD_SCALERS:
            continue
        given = argument(made, "enabled")
        paths = [Possible(True)] if given is None else truths(script, given)
        enabled += [p.condition | condition for p in paths if p.value is True]
    if not enabled:
        return []
    sites = {id(s.call): s for s in optimizer_sites(script)}
    found = []
    for made, condition in constructions(script, optimizer):
        site = sites.get(id(made))
        if site is None:
            continue
        # a fused optimizer unscales inside its kernel: scaler.step() does not call unscale_
        unfused = unfused_paths(script, made, site.short_name) if stepping else [frozenset()]
        for dtype in site.param_dtypes:
            if dtype.value != "float16":
                continue
            for path in enabled:
                for plain in unfused:
                    found += conjoin([dtype], condition | path | plain)
    how = f"GradScaler.{call.func.attr.value}({script.module.code_for_node(optimizer)}) at line {script.line_column(call)[0]}"
    return [(p, how) for p in found]


def _is_trainer(script, call) -> bool:
    func = call.func
    last = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if not last.endswith("Trainer"):
        return False
    return any(n.split(".")[0] in TRAINER_PACKAGES and n.endswith("Trainer") for n in script.names_of(call.func))


def _trainer_trains(script, call) -> list:
    """(fp16 possibility, how) where ``call`` builds an HF/TRL Trainer over a model of fp16
    parameters with ``fp16=True`` arguments (and no DeepSpeed/FSDP, which manage fp16 themselves)."""
    model, args = argument(call, "model", 0), argument(call, "args", 1)
    if model is None or args is None or argument(call, "peft_config") is not None:
        return []  # TRL applies the PEFT config: it trains the adapters, not the converted weights
    fp16_paths = []
    for made, condition in constructions(script, args):
        if not any(n.split(".")[0] in TRAINER_PACKAGES for n in script.names_of(made.func)):
            continue
        if any(argument(made, key) is not None for key in ("deepspeed", "fsdp")):
            continue
        given = argument(made, "fp16")
        if given is not None:
            fp16_paths += [p.condition | condition for p in truths(script, given) if p.value is True]
    found = []
    for dtype in module_dtypes(script, model, position(script, call)):
        if dtype.value == "float16":
            for path in fp16_paths:
                found += conjoin([dtype], path)
    how = f"a Trainer with fp16=True at line {script.line_column(call)[0]}"
    return [(p, how) for p in found]


def _conversion_words(script, origin) -> str:
    """``model.half()``, ``AutoModel.from_pretrained(..., torch_dtype=torch.float16)``: the
    call with only its dtype argument, on one line."""
    code = script.module.code_for_node
    func = " ".join(code(origin.func).split())
    if len(func) > 60:
        func = "..." + func[-57:]
    dtype_args = [a for a in origin.args if a.keyword is not None and a.keyword.value in ("dtype", "torch_dtype")]
    dtype_args = dtype_args or [a for a in origin.args if a.keyword is None
                                and any(p.value is not UNKNOWN for p in dtypes(script, a.value))][:1]
    shown = ", ".join(f"{a.keyword.value}={code(a.value)}" if a.keyword else code(a.value) for a in dtype_args)
    more = "..., " if shown and len(dtype_args) < len(origin.args) else "..." if origin.args and not shown else ""
    return f"{func}({more}{' '.join(shown.split())})"


def _subject(origin) -> str | None:
    func = getattr(origin, "func", None)
    return func.attr.value if isinstance(func, cst.Attribute) else None
