"""One way through a training step so far (``Path``): what is assumed (its guard), what
the names hold, and where the AMP protocol stands on it. Paths that know the same are
merged, so that an ``if`` that does nothing AMP-related does not double them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..guards import TRUE, Possible, complementary, join


@dataclass
class Pending:
    """Scaled gradients not unscaled yet: the scaler, its text, and the function whose
    ``scaler.scale(loss).backward()`` made them."""

    scaler: object
    backward: object
    text: str | None
    fn: object


@dataclass
class Path:
    """One way through the code so far: what is assumed, known, and done."""

    guard: frozenset = TRUE
    origins: dict = field(default_factory=dict)   # atom -> the if/while node whose test made it
    env: dict = field(default_factory=dict)       # name or self.attr -> value alternatives
    prov: dict = field(default_factory=dict)      # name -> frozenset of enabled Autocast regions
    regions: tuple = ()                           # the autocast stack (innermost last)
    pending: Pending | None = None                # scaled gradients not unscaled
    backward: str | None = None                   # "plain" / "scaled": the last backward since a step
    stepped: dict = field(default_factory=dict)   # optimizer text -> scaler.step node, since update()
    scaler_opts: dict = field(default_factory=dict)  # optimizer text -> scaler.step node on this path
    plain_steps: dict = field(default_factory=dict)  # optimizer text -> plain opt.step() node
    iter_backward: bool = False                   # a backward ran in this loop iteration
    updated_at: object = None                     # the update() since the last scaled backward (None: none)
    marks: list = field(default_factory=list)     # (kind, node) since the loop's iteration began
    ret_prov: frozenset = frozenset()
    callers: tuple = ()                           # (env, prov) of each caller, while in a callee
    depths: tuple = ()                            # the autocast stack's depth at each open with
    ended: str | None = None                      # "return" / "raise" / "continue" / "break"

    def copy(self) -> "Path":
        """A path that may go its own way from here. ``env`` and ``prov`` are shared: they
        are never changed in place (``bind``, ``forget``, ``derive`` make new ones), so a
        copy costs nothing and two paths that share them know the same."""
        return replace(self, origins=dict(self.origins), stepped=dict(self.stepped),
                       scaler_opts=dict(self.scaler_opts), plain_steps=dict(self.plain_steps),
                       marks=list(self.marks))

    def bind(self, key: str, alternatives=None, regions: frozenset | None = None):
        """``key`` now holds ``alternatives`` (None: unknown) computed under ``regions``
        (None: its provenance is left as it is)."""
        if alternatives is not None:
            self.env = {**self.env, key: alternatives}
        elif key in self.env:
            self.forget(key)
        if regions is not None:
            self.prov = {**self.prov, key: regions}

    def forget(self, key: str, provenance: bool = False):
        """``key`` is unknown from here (and, with ``provenance``, computed under no region)."""
        if key in self.env:
            env = dict(self.env)
            del env[key]
            self.env = env
        if provenance and key in self.prov:
            prov = dict(self.prov)
            del prov[key]
            self.prov = prov

    def assume(self, guard: frozenset, origin=None) -> "Path | None":
        merged = join(self.guard, guard)
        if merged is None:
            return None
        path = self.copy()
        path.guard = merged
        if origin is not None:
            for atom, _ in guard - self.guard:
                path.origins[atom] = origin
        return path

    @property
    def region(self):
        """The autocast region in force (None: autocast off or disabled here)."""
        if not self.regions:
            return None
        inner = self.regions[-1]
        return inner if inner.enabled else None


@dataclass
class Frame:
    """A function being walked: its scope name (``Trainer.training_step``), its class, and
    its definition (the frames on the stack are never entered again: no recursion)."""

    scope: str
    cls: str | None
    fn: object = None
    #: the call that entered this function (None for an entry point)
    call: object = None


def _signature(p: Path):
    """Everything a path knows except its guard, by identity (values, ``env`` and ``prov``
    are immutable and shared between the paths that did not reassign them): paths with
    equal signatures differ only in how they got there."""
    return (p.ended, p.backward, p.iter_backward, id(p.pending.backward) if p.pending else None, id(p.updated_at),
            tuple((k, id(v)) for k, v in p.stepped.items()),
            tuple((k, id(v)) for k, v in p.scaler_opts.items()),
            tuple((k, id(v)) for k, v in p.plain_steps.items()),
            tuple((k, id(n)) for k, n in p.marks), tuple(id(r) for r in p.regions),
            id(p.ret_prov), tuple(id(c[0]) for c in p.callers), p.depths,
            id(p.env), id(p.prov))


def merge(paths: list) -> list:
    """Paths that know the same and whose guards differ in one literal's truth become one
    (``if (i + 1) % accum == 0: log()`` does not double the paths)."""
    groups: dict = {}
    for p in paths:
        groups.setdefault(_signature(p), []).append(p)
    out = []
    for group in groups.values():
        changed = True
        while changed and len(group) > 1:
            changed = False
            for i, a in enumerate(group):
                for b in group[i + 1:]:
                    common = complementary(a.guard, b.guard)
                    if common is not None:
                        merged = a.copy()
                        merged.guard = common
                        group = [q for q in group if q is not a and q is not b] + [merged]
                        changed = True
                        break
                    if a.guard == b.guard:
                        group = [q for q in group if q is not b]
                        changed = True
                        break
                if changed:
                    break
        out += group
    return out


def merged_env(paths, keep) -> dict:
    """Every path's bindings of the kept names as one set of alternatives, each guarded by
    the path it comes from."""
    merged: dict = {}
    for p in paths:
        for key, alternatives in p.env.items():
            if not keep(key):
                continue
            for a in alternatives:
                guard = join(p.guard, a.guard)
                if guard is not None:
                    merged.setdefault(key, []).append(Possible(a.value, guard))
    return {k: tuple(v) for k, v in merged.items()}
