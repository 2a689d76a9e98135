"""PA405 low-precision-params-with-scaler: parameters made fp16 and then trained with a
GradScaler, which refuses fp16 gradients.

``GradScaler.unscale_`` and ``GradScaler.step`` call ``_unscale_grads_(..., allow_fp16=False)``
(torch/amp/grad_scaler.py), which raises ``ValueError("Attempting to unscale FP16
gradients.")`` for any parameter whose ``.grad`` is float16 (pytorch #74739). The HF Trainer
with ``fp16=True`` steps through accelerate's ``torch.amp.GradScaler`` the same way, and so
does Lightning's ``Trainer(precision="16-mixed")`` (``MixedPrecision.optimizer_step``
calls ``scaler.unscale_``; frameworks/lightning.py) for the module ``trainer.fit(model)``
trains (Lightning #5140), and accelerate's ``Accelerator(mixed_precision="fp16")`` for an
optimizer it prepares (``AcceleratedOptimizer.step`` -> ``scaler.step``;
frameworks/accelerate.py; diffusers #6442, d3po #6). FSDP's ``ShardedGradScaler`` allows
fp16 gradients and is not matched.
"""
from __future__ import annotations

import ast
import re

from ..frameworks import Precision
from ..frameworks.accelerate import ACCELERATE
from ..frameworks.lightning import PRECISIONS
from ..guards import TRUE, Possible, conjoin, equals, simplify, words
from ..lookup import dtypes, strings, truths
from ..params import (LOW_PRECISION_WORDS, constructions, lightning_trainers, mentions_an_optimizer,
                      module_dtypes, modules_of_params, optimizer_sites, torch_optimizer_name, unfused_paths)
from ..registry import TrainingHit, training_check
from ..syntax import PLAIN_SCALERS, argument

NONE = Precision(scales=False)

#: Trainer classes that train with accelerate's GradScaler when their args say fp16=True
TRAINER_PACKAGES = ("transformers", "trl")
#: the words a file needs for the Trainer route to be read at all
TRAINER_CALL, FP16_ARGUMENT = re.compile(r"Trainer\s*\("), re.compile(r"\bfp16\s*=")
LIGHTNING_FP16 = re.compile(r"precision\s*=")


def mentions_a_scaler_or_trainer(text: str) -> bool:
    """Whether a file may train fp16 parameters with a GradScaler or an fp16 Trainer."""
    scaled = ("GradScaler" in text or "Accelerator" in text) and mentions_an_optimizer(text)
    trainer = "Trainer" in text and bool(TRAINER_CALL.search(text) and (FP16_ARGUMENT.search(text)
                                                                        or LIGHTNING_FP16.search(text)))
    return scaled or (trainer and bool(LOW_PRECISION_WORDS.search(text)))


@training_check("PA405", mentions=mentions_a_scaler_or_trainer)
def low_precision_params_with_scaler(script):
    if not mentions_a_scaler_or_trainer(script.text):
        return
    hits = {}
    fp16_sites = any(p.value == "float16" for s in optimizer_sites(script) for p in s.param_dtypes)
    lightning = {id(call): [p for p in precisions if p.known and PRECISIONS.get(p.value, NONE).scales]
                 for call, precisions in lightning_trainers(script)}
    for call in script.index.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("step", "unscale_"):
            if not fp16_sites:
                continue
            found = _scaler_steps(script, call)
        elif _is_trainer(script, call):
            found = _trainer_trains(script, call)
        elif isinstance(func, ast.Attribute) and func.attr == "fit" and lightning:
            found = _lightning_fits(script, call, lightning)
        elif isinstance(func, ast.Attribute) and func.attr in ("prepare", "prepare_optimizer"):
            found = _accelerate_prepares(script, call)
        else:
            continue
        for possible, how in found:
            key = possible.origin
            if key not in hits:
                hits[key] = (how, [])
            hits[key][1].append(possible.guard)
    for origin, (how, guards) in sorted(hits.items(), key=lambda item: script.position(item[0])):
        line, column = script.line_column(origin)
        values = {"conversion": _conversion_words(script, origin), "how": how}
        # the paths it holds on, merged: ``a and b`` or ``a and not b`` is ``a``
        yield TrainingHit(line, column, values, words(simplify(guards), script.index.flag_atoms),
                          scope=script.enclosing(origin), subject=_subject(origin))


def _scaler_steps(script, call) -> list:
    """(fp16 possibility, how) where ``call`` is ``scaler.step(opt)`` / ``scaler.unscale_(opt)``
    of an enabled torch GradScaler over an optimizer of fp16 parameters."""
    optimizer = argument(call, "optimizer", 0)
    if optimizer is None:
        return []
    stepping = call.func.attr == "step"
    enabled = []
    for made, guard in constructions(script, call.func.value):
        if not script.names_of(made.func) & PLAIN_SCALERS:
            continue
        given = argument(made, "enabled")
        paths = [Possible(True)] if given is None else truths(script, given)
        enabled += [p.guard | guard for p in paths if p.value is True]
    if not enabled:
        return []
    sites = {id(s.call): s for s in optimizer_sites(script)}
    found = []
    for made, guard in constructions(script, optimizer):
        site = sites.get(id(made))
        if site is None:
            continue
        # a fused optimizer unscales inside its kernel: scaler.step() does not call unscale_
        unfused = unfused_paths(script, made, site.short_name) if stepping else [TRUE]
        for dtype in site.param_dtypes:
            if dtype.value != "float16":
                continue
            for path in enabled:
                for plain in unfused:
                    found += conjoin([dtype], guard | path | plain)
    how = f"GradScaler.{call.func.attr}({script.source(optimizer)}) at line {call.lineno}"
    return [(p, how) for p in found]


def _is_trainer(script, call) -> bool:
    func = call.func
    last = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
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
    for made, guard in constructions(script, args):
        if not any(n.split(".")[0] in TRAINER_PACKAGES for n in script.names_of(made.func)):
            continue
        if any(argument(made, key) is not None for key in ("deepspeed", "fsdp")):
            continue
        given = argument(made, "fp16")
        if given is not None:
            fp16_paths += [p.guard | guard for p in truths(script, given) if p.value is True]
    found = []
    for dtype in module_dtypes(script, model, script.position(call)):
        if dtype.value == "float16":
            for path in fp16_paths:
                found += conjoin([dtype], path)
    how = f"a Trainer with fp16=True at line {call.lineno}"
    return [(p, how) for p in found]


def _lightning_fits(script, call, scaling) -> list:
    """(fp16 possibility, how) where ``trainer.fit(model)`` trains a module of fp16
    parameters with a Lightning Trainer whose precision scales the loss ("16-mixed")."""
    model = argument(call, "model", 0)
    if model is None:
        return []
    found, how = [], None
    for made, guard in constructions(script, call.func.value):
        for precision in scaling.get(id(made), ()):
            how = f"Lightning's Trainer(precision={precision.value!r}) at line {made.lineno} (its GradScaler)"
            for dtype in module_dtypes(script, model, script.position(call)):
                if dtype.value == "float16":
                    found += conjoin([dtype], guard | precision.guard)
    return [(p, how) for p in found]


def _accelerate_prepares(script, call) -> list:
    """(fp16 possibility, how) where ``accelerator.prepare(..., optimizer, ...)`` hands a
    torch optimizer over fp16 parameters to an Accelerator whose mixed precision is fp16."""
    fp16 = []
    for made, guard in constructions(script, call.func.value):
        if not script.names_of(made.func) & ACCELERATE.makers:
            continue
        given = argument(made, ACCELERATE.precision_keyword)
        for p in strings(script, given) if given is not None else []:
            if p.known and p.value == "fp16":
                fp16.append((made, guard | p.guard))
            elif not p.known:
                fp16.append((made, guard | p.guard | equals(script.text_of(given), "fp16")))
    found, how = [], None
    for arg in (*call.args, *(k.value for k in call.keywords)):
        for optimizer, made_guard in constructions(script, arg):
            if torch_optimizer_name(script, optimizer) is None or (params := argument(optimizer, "params", 0)) is None:
                continue
            for module, params_guard in modules_of_params(script, params):
                for dtype in module_dtypes(script, module, script.position(call)):
                    for accelerator, guard in fp16 if dtype.value == "float16" else ():
                        how = (f"accelerate's GradScaler (Accelerator(mixed_precision='fp16') at line "
                               f"{accelerator.lineno})")
                        found += conjoin([dtype], made_guard | params_guard | guard)
    return [(p, how) for p in found]


def _conversion_words(script, origin) -> str:
    """``model.half()``, ``AutoModel.from_pretrained(..., torch_dtype=torch.float16)``: the
    call with only its dtype argument, on one line."""
    func = " ".join(script.source(origin.func).split())
    if len(func) > 60:
        func = "..." + func[-57:]
    dtype_args = [k for k in origin.keywords if k.arg in ("dtype", "torch_dtype")]
    shown = ", ".join(f"{k.arg}={script.source(k.value)}" for k in dtype_args)
    if not dtype_args:
        first = [a for a in origin.args if any(p.known and p.value is not None for p in dtypes(script, a))][:1]
        shown = ", ".join(script.source(a) for a in first)
        dtype_args = first
    every = len(origin.args) + len(origin.keywords)
    more = "..., " if shown and len(dtype_args) < every else "..." if every and not shown else ""
    return f"{func}({more}{' '.join(shown.split())})"


def _subject(origin) -> str | None:
    func = getattr(origin, "func", None)
    return func.attr if isinstance(func, ast.Attribute) else None
