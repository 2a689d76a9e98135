"""The replay of a failing step: the last forward's batch run again, from the random state it
started with, under op-level attribution (``attribution``), then its backward from the
gradients that reached the model's outputs; and the smallest region that keeps the failing
value out of the low dtype.

It never changes the user's run: the parameters' ``.grad`` are set aside and put back, the
buffers (BatchNorm's running statistics) are restored, the random state is put back as it
was, and the backward is ``torch.autograd.grad`` on the parameters (no ``.grad`` written, no
DDP reducer hook). It runs before the optimizer applies the step's update.
"""
from __future__ import annotations

import contextlib
import time

import torch
from torch.utils import _pytree as pytree

from ..core.autocast_policy import FP32_CALLS
from ..core.numerics import dtype_name
from ..runtime.pytorch.autocast_state import autocast_disabled
from ..runtime.pytorch.ops import CAST_FNS, GEMM_OPS
from .attribution import LOW, MOVES, Calls, ModuleStack, Ops, all_finite, floating


@contextlib.contextmanager
def _random_state(saved):
    """The generators set to ``saved`` (the forward's) for the block, then put back."""
    now = rng_state()
    set_rng_state(saved)
    try:
        yield
    finally:
        set_rng_state(now)


def rng_state() -> dict:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def _autocast(state):
    with contextlib.ExitStack() as stack:
        for device, dtype in state:
            stack.enter_context(torch.autocast(device, dtype=dtype))
        yield


@contextlib.contextmanager
def _grads_and_buffers_kept(model: torch.nn.Module):
    params = [p for p in model.parameters()]
    grads = [p.grad for p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    for p in params:
        p.grad = None
    try:
        yield
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def replay(model, names: dict, batch, rng, autocast, output_grads, collective: bool = False) -> dict:
    """{first, masked, region, seconds}: the first non-finite op of the step run again (None
    when the replay stays finite), the first one the forward masked (a log(0) behind a
    where, a -inf mask: not a failure while the outputs stay finite). ``collective``: every
    rank replays together (FSDP's all-gathers and reduce-scatters), so the backward runs on
    every rank whatever its forward found, to keep the ranks' collectives in step."""
    started = time.perf_counter()
    args, kwargs = batch
    produced: dict = {}
    modules = ModuleStack(names)
    calls = Calls(modules, produced)
    ops = Ops(calls, modules, produced, _leaves(model, names))
    first = masked = None
    with _grads_and_buffers_kept(model), _random_state(rng), torch.enable_grad(), _autocast(autocast):
        with modules, calls, ops:
            out = model(*args, **kwargs)
            ops.phase = "idle"
            leaves = [t if isinstance(t, torch.Tensor) else None for t in pytree.tree_leaves(out)]
            outputs = floating([t for t in leaves if t is not None])
            forward_failed = not all_finite(outputs)
            forward_first = ops.origin_of(outputs) if forward_failed else None
            masked, ops.first = (ops.describe(ops.first.failed, ops.first) if ops.first and not forward_failed
                                 else None), None
            pairs = [(t, g) for t, g in zip(leaves, output_grads or ()) if t is not None and g is not None
                     and t.requires_grad]
            grads_failed = bool(pairs) and not all_finite(floating([g for _, g in pairs]))
            if pairs and (collective or not (forward_failed or grads_failed)):
                ops.phase = "backward"
                params = [p for p in model.parameters() if p.requires_grad]
                torch.autograd.grad([t for t, _ in pairs], params, [g for _, g in pairs], allow_unused=True)
        if forward_failed:
            first = forward_first or {"phase": "forward", "module": "", "op": None, "aten": None, "node": None,
                                      "dtype": None, "input_dtypes": [], "fp32_finite": None, "index": ops.count,
                                      "_inputs": [], "_stack": []}
        elif grads_failed:
            first = {"phase": "loss", "module": None, "op": None, "aten": None, "node": None,
                     "dtype": dtype_name(pairs[0][1].dtype), "input_dtypes": [],
                     "fp32_finite": None, "index": ops.count, "_inputs": [], "_stack": []}
        else:
            first = ops.first
        fixable = first is not None and first["phase"] in ("forward", "backward") and first.get("op")
        region = _region(first, rerun=not collective, records=ops.records, log=calls.log) if fixable else None
    for record in (first, masked):
        if record:
            for key in ("_inputs", "_stack", "_call"):
                record.pop(key, None)
    return {"first": first, "masked": masked, "region": region,
            "seconds": round(time.perf_counter() - started, 3)}


def _leaves(model, names: dict) -> dict:
    """_key -> the name of each parameter: a non-finite value no op made is named by it."""
    from .attribution import _key

    found = {}
    for module, name in names.items():
        for pname, p in module.named_parameters(recurse=False):
            key = _key(p.detach())
            if key is not None:
                found[key] = f"parameter {name + '.' if name else ''}{pname}"
    return found


# --------------------------------------------------------------------------- the region
def _region(first: dict, rerun: bool = True, records=(), log=()) -> dict | None:
    """The smallest region that keeps the failing value out of the low dtype: the calls from
    the op where the low dtype first lost the value (flushed it to 0, or made it inf) to the
    failing call, in the innermost module that holds them all; for a failing op that float32
    keeps finite, that op alone, in the innermost module whose float32 output is back in the
    low dtype's range (``rerun``: the modules are rerun in float32 to find it; not when the
    ranks replay together, whose sharded modules would gather on one rank only). None when
    float32 from the same inputs is not finite either and no earlier op lost the value: not
    a precision failure, which no region fixes."""
    path = _path_to_loss(first["_inputs"]) if first.get("fp32_finite") is not True else []
    if first.get("fp32_finite") is False and not path:
        return None  # float32 is not finite either and no op lost the value: no region fixes it
    ops = [r.fn for r in path if r.fn and r.fn not in MOVES]
    if first["op"] and first["op"] not in ops:
        ops.append(first["op"])
    modules = [r.module for r in path] + ([first["module"]] if first["module"] is not None else [])
    module = _common(modules) if modules else ""
    back = None
    if first["phase"] == "forward" and rerun:
        module, back = _back_in_range(first, module)
    ops = list(dict.fromkeys(ops))
    if not path:  # the failing op alone: a GEMM is kept narrow where its float32 value lands
        # within the module the float32 rerun found back in range; without the rerun (ranks
        # replaying together), within the whole model
        module, ops = _narrowed(first, module, ops, records, log, within=module if back is not None else "")
    origin = path[0] if path else None
    return {"module": module, "ops": ops, "back_in_range": back,
            "origin": {"op": origin.fn, "module": origin.module, "lost": origin.lost} if origin else None}


def _narrowed(first: dict, module: str, ops: list, records, log, within: str) -> tuple[str, list]:
    """(module, ops) for a failing GEMM: ``op#k`` (its k-th call in the module, as
    ``apply_plan`` counts them) in the innermost module, from the GEMM's own outwards, in
    which every value its float32 result flows into becomes a float32 value of the run
    (a float32 residual stream, autocast's float32 ops) before it leaves the
    module, meets a GEMM or is cast down: kept in float32, it is never back in the low dtype.
    One Linear in float32, not every Linear of ``module`` (``ops: [linear]``). Where no such
    module is found within ``within``, (module, ops) as they were."""
    op, call = first.get("op"), first.get("_call")
    if op not in GEMM_OPS or call is None or not 0 <= call < len(log):
        return module, ops
    made = [r for r in records if r.call == call]
    consumers: dict = {}
    for record in records:
        for source in record.inputs:
            consumers.setdefault(id(source), []).append(record)
    for name, number in reversed(log[call][1]):
        if not _encloses(within, name):
            break  # past the module the float32 rerun found back in range
        if made and _lands(made, name, consumers):
            k = sum(1 for fn, stack in log[:call + 1] if fn == op and (name, number) in stack)
            return name, [f"{op}#{k}" if o == op else o for o in ops]
    return module, ops


def _lands(made: list, module: str, consumers: dict) -> bool:
    """Whether every value flowing from ``made`` reaches a float32 result of the run inside
    ``module`` before it leaves it, meets a GEMM, is cast down or ends. A result is float32
    with or without the plan (``apply_plan`` never casts it back) when autocast itself returns
    it in float32, or when it promotes with a float32 activation of the run (a residual
    stream); not when its other float32 operand is a weight (``apply_plan`` takes a weight
    for no surrounding dtype: the result would go back to the low dtype)."""
    call = made[0].call
    todo, seen = list(made), {id(r) for r in made}

    def landed(consumer) -> bool:
        return consumer.dtype == torch.float32 and (consumer.fn in FP32_CALLS or any(
            i.dtype == torch.float32 and id(i) not in seen for i in consumer.inputs))

    while todo:
        record = todo.pop()
        following = consumers.get(id(record), [])
        if not following:
            return False  # an output of the module (or of the model): cast back as it leaves
        for consumer in following:
            if id(consumer) in seen:
                continue
            seen.add(id(consumer))
            if consumer.call == call:  # another aten op of the same call (addmm's reshape)
                todo.append(consumer)
            elif not _encloses(module, consumer.module) or consumer.fn in GEMM_OPS:
                return False
            elif consumer.fn in CAST_FNS:
                if consumer.dtype != torch.float32:
                    return False  # cast down
                todo.append(consumer)  # .float() of the planned result: the same region-made tensor
            elif not landed(consumer):
                todo.append(consumer)
    return True


def _path_to_loss(inputs: list, depth: int = 64) -> list:
    """The producers from the nearest value the low dtype lost (breadth first through the
    inputs' records) to the failing op's input; [] when none was lost."""
    seen, frontier = set(), [(r, [r]) for r in inputs]
    for _ in range(depth):
        following = []
        for record, path in frontier:
            if id(record) in seen:
                continue
            seen.add(id(record))
            if record.lost:
                return list(reversed(path))
            following += [(r, path + [r]) for r in record.inputs]
        if not following:
            break
        frontier = following
    return []


def _common(names: list) -> str:
    """The innermost module that holds every module of ``names`` ("" is the root)."""
    parts = [n.split(".") if n else [] for n in names]
    common = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)


def _back_in_range(first: dict, module: str) -> tuple[str, bool | None]:
    """(module, back in range): from ``module`` outwards along the failing op's stack, the
    innermost module whose float32 rerun (same inputs, float32 parameters) gives outputs
    that are finite and fit the failing op's dtype; ``module`` itself with False when none
    does, None when none could be rerun."""
    dtype = getattr(torch, first["dtype"], None)
    limit = torch.finfo(dtype).max if dtype in LOW else None
    answered = None
    for mod, name, args, kwargs, _ in reversed(first["_stack"]):
        if not _encloses(name, module):
            continue
        outputs = _in_float32(mod, args, kwargs)
        if outputs is None:
            continue
        answered = False
        if all_finite(outputs) and (limit is None or all(float(t.abs().amax()) <= limit for t in outputs if t.numel())):
            return name, True
    return module, answered


def _encloses(name: str, module: str) -> bool:
    return name == "" or name == module or module.startswith(name + ".")


def _in_float32(module, args, kwargs):
    """``module``'s floating outputs run in float32: low-precision inputs and parameters as
    float32 copies, buffers as copies (running statistics untouched), autocast off; None when
    it cannot run so."""
    from torch.func import functional_call

    def up(t):
        return t.detach().float() if isinstance(t, torch.Tensor) and t.dtype in LOW else t

    state = {name: up(p.detach()) for name, p in module.named_parameters()}
    state.update({name: b.detach().float() if b.dtype in LOW else b.detach().clone()
                  for name, b in module.named_buffers()})
    try:
        with torch.no_grad(), autocast_disabled():
            out = functional_call(module, state, pytree.tree_map(up, args), pytree.tree_map(up, kwargs))
    except Exception:  # noqa: BLE001 - a module that cannot run so: no answer from it
        return None
    return floating(out)
