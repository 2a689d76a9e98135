"""The training measures of ``check --train``, per parameter, then per module.

Every step, a low-precision run is compared with the fp32 reference's same step (the runs
start from the same weights and see the same batches; their states drift apart only as
precision makes them):

- **updates lost**: among the elements whose fp32 update at this step was nonzero and whose
  own gradient was nonzero (the optimizer had something to apply), the share whose stored
  value did not change: the update was smaller than half an ulp of the weight and rounded
  away. Counted over element-steps, on the tensors the optimizer updates (fp32 masters when
  the run has them: there an update is kept even when the low-precision copy cannot show
  it yet), on steps the scaler did not skip. ``never_moved``: elements that never changed
  while fp32's did.
- **optimizer state underflow**: the share of ``exp_avg_sq`` elements that are 0 or
  subnormal in the run's state dtype where fp32's are normal (largest share over the steps).
- **gradient flushed**: the share of gradient elements that are exactly 0 as backward left
  them (at the loss scale used) where fp32's are nonzero (largest share over the steps).
- **drift**: at the end, ``|(p - p_0) - (p_fp32 - p_fp32_0)| / |p_fp32 - p_fp32_0|``: how far
  the run's total update is from fp32's, relative to fp32's (1.0: as far off as not training
  at all). Each run is measured from its own start, so the rounding of the initial weights
  to the low dtype (which ``check`` measures on the forward) is not counted as drift;
  ``rel_l2``: ``|p - p_fp32| / |p_fp32|``, positions, rounding included.

Memory: a run's measures hold one bool mask per element (ever moved), the run's start (none
when it is the reference's start, or exactly its rounding to the run's dtype, as fp32
masters and ``model.to(bfloat16)`` are: it is remade from that when needed), and a snapshot
of the stepped tensors from right before the optimizer step until it is measured (never
across a forward and backward). The reference's step is kept as its update (computed in
place of its snapshot, dropped after the step) and a bool mask of its nonzero gradients; which
elements fp32 ever moved is one mask shared by every run (ReferenceMoves).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

SAMPLE = 1 << 16  # elements sampled for the median weight / update of lost updates


@dataclass
class ParamTally:
    elements: int
    lost: int = 0
    eligible: int = 0
    moved: torch.Tensor | None = None  # bool: ever changed
    last_lost: tuple | None = None  # (|w| before, |fp32 update|) of lost elements, last step that lost any

    def magnitudes(self) -> tuple[float | None, float | None]:
        """Median |w| and median fp32 |update| of the elements whose update was lost, at the
        last step that lost any (a sample of SAMPLE elements)."""
        if self.last_lost is None:
            return None, None
        w, u = self.last_lost
        return float(w.median()), float(u.median())
    state_underflow: float = 0.0
    state_zero: float = 0.0  # share of exp_avg_sq elements exactly 0 (largest over the steps)
    grad_flushed: float = 0.0


@dataclass
class ReferenceStep:
    """What the fp32 step did: each parameter's update (after - before) and where its
    gradient was nonzero (bool masks: the measures need no more of the gradient)."""

    delta: dict
    grad_nonzero: dict


class ReferenceMoves:
    """Which elements the fp32 reference has ever changed, one bool mask per parameter for
    every run (``add`` after the runs' same step); a run that stops measuring keeps a copy
    as of its last measured step (``RunMeasures.stop``)."""

    def __init__(self):
        self.masks: dict = {}

    def add(self, ref: ReferenceStep) -> None:
        for name, delta in ref.delta.items():
            changed = delta != 0
            mask = self.masks.get(name)
            self.masks[name] = changed if mask is None else mask.logical_or_(changed)

    def copy(self) -> dict:
        return {n: m.clone() for n, m in self.masks.items()}


@dataclass
class RunMeasures:
    """The accumulated measures of one low-precision run against the reference."""

    reference: object  # the reference Run: its optimizer state is read at the same step
    moves: ReferenceMoves  # the elements fp32 changed, through the reference's latest step
    reference_start: dict = field(default_factory=dict)  # the reference's weights before any step
    tallies: dict = field(default_factory=dict)
    initial: dict = field(default_factory=dict)  # the run's held tensors before its first step (start())
    ref_moved: dict | None = None  # set once the run stops: fp32's moves through its last step
    _before: dict = field(default_factory=dict)

    def before_step(self, run) -> None:
        """Before each step: the run's start, the first time (see ``_same_or``)."""
        if not self.initial:
            self.initial = {n: _same_or(self.reference_start.get(n), t.detach()) for n, t in run.held.items()}

    def before_update(self, run) -> None:
        """Right before the optimizer step (not across the forward and backward, whose
        activations it would lie beside): what the step will change is compared with it."""
        self._before = {n: t.detach().clone() for n, t in run.held.items()}

    def start(self, name: str):
        """The run's held tensor ``name`` before its first step."""
        start = self.initial[name]
        return start if isinstance(start, torch.Tensor) else start()

    def stop(self) -> None:
        """The run measures no more steps: keep fp32's moves as of now (see ReferenceMoves)."""
        if self.ref_moved is None:
            self.ref_moved = self.moves.copy()
        self._before = {}

    def reference_moved(self, name: str):
        return (self.ref_moved if self.ref_moved is not None else self.moves.masks).get(name)

    def after_step(self, run, result, ref: ReferenceStep) -> None:
        grads = run.grads()
        for name, held in run.held.items():
            tally = self.tallies.get(name)
            if tally is None:
                tally = self.tallies[name] = ParamTally(held.numel())
            before = self._before.get(name)  # none when the loss was inf/NaN: no update ran
            changed = held.detach() != before if before is not None else torch.zeros_like(held, dtype=torch.bool)
            tally.moved = changed if tally.moved is None else tally.moved.logical_or_(changed)
            grad, ref_nonzero = grads.get(name), ref.grad_nonzero.get(name)
            if result.skipped or grad is None or ref_nonzero is None or result.nonfinite:
                continue
            ref_changed = ref.delta[name] != 0
            has_grad = grad != 0
            eligible = ref_changed & has_grad
            lost = eligible & ~changed
            n_lost = int(lost.sum())
            tally.eligible += int(eligible.sum())
            tally.lost += n_lost
            if n_lost:  # a sample of the lost elements' magnitudes; the medians are taken at the end
                where = lost.flatten().nonzero().flatten()[:SAMPLE]
                tally.last_lost = (self._before[name].flatten()[where].float().abs(),
                                   ref.delta[name].flatten()[where].abs())
            n_ref = int(ref_nonzero.sum())
            if n_ref:
                flushed = int((ref_nonzero & ~has_grad).sum()) / n_ref
                tally.grad_flushed = max(tally.grad_flushed, flushed)
        self._state_underflow(run, result)
        self._before = {}

    def _state_underflow(self, run, result) -> None:
        ref = self.reference
        for name in run.held:
            state, ref_state = run.state(name, "exp_avg_sq"), ref.state(name, "exp_avg_sq")
            if state is None or ref_state is None or state.dtype == torch.float32:
                continue
            tally = self.tallies[name]
            tally.state_zero = max(tally.state_zero, int((state == 0).sum()) / max(1, state.numel()))
            normal = ref_state.abs() >= torch.finfo(torch.float32).tiny
            n = int(normal.sum())
            if n:
                under = state.abs() < torch.finfo(state.dtype).tiny  # 0 or subnormal
                tally.state_underflow = max(tally.state_underflow, int((under & normal).sum()) / n)


def reference_step(run, before: dict) -> ReferenceStep:
    """The reference's step; ``before`` (its snapshot, no longer needed) becomes the update."""
    delta = {n: torch.sub(run.held[n].detach(), before[n], out=before[n]) for n in run.held}
    return ReferenceStep(delta=delta, grad_nonzero={n: g.detach() != 0 for n, g in run.grads().items()})


def _same_or(shared, own):
    """``shared`` when it holds exactly ``own``'s values in ``own``'s dtype; a function that
    rounds ``shared`` to ``own``'s dtype when that gives exactly ``own``; else a copy of ``own``."""
    if shared is None or shared.shape != own.shape:
        return own.clone()
    if shared.dtype == own.dtype:
        return shared if torch.equal(shared, own) else own.clone()
    if torch.equal(shared.to(own.dtype), own):
        return lambda: shared.to(own.dtype)
    return own.clone()


def module_of(name: str) -> str:
    return name.rpartition(".")[0]


def _sums(run, ref_run, name, own_start, ref_start) -> tuple[float, float, float]:
    """(|update - fp32 update|^2, |fp32 update|^2, |p - p_fp32|^2) of one parameter."""
    p, r = run.held[name].detach().float(), ref_run.held[name].detach()
    moved = r - ref_start[name]
    return (_square_norm((p - own_start).sub_(moved)), _square_norm(moved), _square_norm(p - r))


def _square_norm(t) -> float:
    return float(torch.linalg.vector_norm(t, dtype=torch.float64)) ** 2


def by_parameter(model, measures: RunMeasures, run, ref_run, initial: dict) -> list[dict]:
    """Per trainable parameter, in model order: the measures and the drift (``initial``: the
    reference's weights before its first step)."""
    rows = []
    for name, tally in measures.tallies.items():
        module = module_of(name)
        d2, m2, p2 = _sums(run, ref_run, name, measures.start(name), initial)
        r2 = _square_norm(ref_run.held[name].detach())
        weight_abs, update_abs = tally.magnitudes()
        ref_moved = measures.reference_moved(name)
        never = int((ref_moved & ~tally.moved).sum()) if tally.moved is not None and ref_moved is not None else 0
        moved = int(ref_moved.sum()) if ref_moved is not None else 0
        rows.append({
            "parameter": name, "module": module, "type": type(model.get_submodule(module)).__name__,
            "dtype": str(run.held[name].dtype).removeprefix("torch."), "elements": tally.elements,
            "updates_lost": tally.lost / tally.eligible if tally.eligible else 0.0,
            "never_moved": never / moved if moved else 0.0,
            "weight_abs": weight_abs, "update_abs": update_abs,
            "lr": run.lr_of(name) if tally.lost else None,
            "state_underflow": tally.state_underflow, "state_zero": tally.state_zero,
            "grad_flushed": tally.grad_flushed,
            "drift": _ratio(d2 ** 0.5, m2 ** 0.5), "rel_l2": _ratio(p2 ** 0.5, r2 ** 0.5),
            "lost": tally.lost, "eligible": tally.eligible, "never": never, "moved": moved,
            "_d2": d2, "_m2": m2, "_p2": p2, "_r2": r2})
    return rows


def by_module(rows: list[dict]) -> list[dict]:
    """The parameter rows summed per module (updates lost over all its element-steps, drift
    over all its parameters; the other shares their largest); the private sums dropped."""
    modules: dict[str, dict] = {}
    for row in rows:
        m = modules.setdefault(row["module"], {
            "module": row["module"], "type": row["type"], "parameters": [], "elements": 0,
            "_lost": 0, "_eligible": 0, "_never": 0, "_moved": 0, "_d2": 0.0, "_m2": 0.0, "_p2": 0.0, "_r2": 0.0,
            "state_underflow": 0.0, "grad_flushed": 0.0})
        m["parameters"].append(row["parameter"].rpartition(".")[2])
        m["elements"] += row["elements"]
        for key in ("lost", "eligible", "never", "moved"):
            m["_" + key] += row[key]
        for key in ("_d2", "_m2", "_p2", "_r2"):
            m[key] += row[key]
        for key in ("state_underflow", "grad_flushed"):
            m[key] = max(m[key], row[key])
    out = []
    for m in modules.values():
        m.update(updates_lost=m["_lost"] / m["_eligible"] if m["_eligible"] else 0.0,
                 never_moved=m["_never"] / m["_moved"] if m["_moved"] else 0.0,
                 drift=_ratio(m["_d2"] ** 0.5, m["_m2"] ** 0.5), rel_l2=_ratio(m["_p2"] ** 0.5, m["_r2"] ** 0.5))
        out.append(public(m))
    return out


def public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def whole_model_drift(rows: list[dict]) -> float:
    """The drift over every parameter of the parameter rows (``by_parameter``)."""
    return _ratio(sum(r["_d2"] for r in rows) ** 0.5, sum(r["_m2"] for r in rows) ** 0.5)


def _ratio(num: float, den: float) -> float:
    if num != num:  # NaN weights
        return float("inf")
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den
