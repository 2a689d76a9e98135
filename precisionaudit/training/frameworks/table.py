"""The vocabulary of the framework tables (``training/frameworks``): what an API call does to
the AMP protocol (the effects), one call (``Api``), one precision setting (``Precision``) and
one framework's step (``Framework``). Data only: the tables are in the modules beside it."""
from __future__ import annotations

from dataclasses import dataclass, field

#: what an API call does to the step, in the order it does it
SCALED_BACKWARD = "scaled backward"  # backward of the loss multiplied by the loss scale (a scaling precision)
SCALES_LOSS = "scales loss"          # returns the loss multiplied by the loss scale (``.backward()`` on it)
UNSCALE = "unscale"                  # divides the gradients by the loss scale, in place (each call)
CLIP = "clip"                        # clips the gradients as they are
STEP = "step"                        # steps the optimizer through the loss scaler (unscale_ first if not done)
UPDATE = "update"                    # updates the loss scale
PREPARES = "prepares"                # returns the optimizers it steps through the scaler
ACCUMULATES = "accumulates"          # a context in which the optimizer steps only when ``sync`` is true


@dataclass(frozen=True)
class Api:
    """One call of a framework object: ``owner.method(...)``, what it does and where the
    framework does it."""

    method: str
    effects: tuple
    source: str


@dataclass(frozen=True)
class Precision:
    """One precision setting as the framework spells it: whether a dynamic loss scaler
    multiplies the loss (fp16 mixed precision), and the dtype the parameters are trained in
    when the framework converts them (pure low precision; None: kept fp32)."""

    scales: bool
    params: str | None = None


@dataclass(frozen=True)
class Framework:
    """One framework's step, as the walk reads it.

    ``makers``: the qualified names of what makes the owner object (``accelerate.Accelerator``);
    ``precision_keyword``: the maker's argument that names the precision (None: read by the
    framework's own module, e.g. DeepSpeed's config); ``precisions``: spelling -> Precision;
    ``default``: the spelling used when none is given (None: the framework reads it from a
    config file or the environment, unknown here); ``unknown``: the condition, in words,
    under which the loss is scaled when the precision is unknown; ``apis``: method ->
    ``Api`` of the owner; ``optimizer``: what ``.step()`` / ``.zero_grad()`` of an optimizer
    it returned (``PREPARES``) do; ``sync``: the owner's attribute that is true on the
    iterations an ``ACCUMULATES`` context steps on; ``names``: receiver names taken for
    this framework's owner when the file imports ``packages`` and the object was made
    elsewhere (a parameter, another file); ``unscales_in``: where the framework unscales before stepping;
    ``spelled``: the scaling precision as a finding names it (``{precision}`` filled);
    ``refuses_plain_backward``: a plain ``loss.backward()`` before its step raises inside
    the framework (no silent hazard to report);
    ``remedy``: rule id -> what to do instead, in words."""

    name: str
    title: str
    packages: frozenset
    makers: frozenset = frozenset()
    precision_keyword: str | None = None
    precisions: dict = field(default_factory=dict)
    default: str | None = None
    unknown: str = ""
    apis: dict = field(default_factory=dict)
    optimizer: dict = field(default_factory=dict)
    sync: str | None = None
    names: frozenset = frozenset()
    unscales_in: str = ""
    spelled: str = "{precision!r}"
    refuses_plain_backward: bool = False
    remedy: dict = field(default_factory=dict)

    @property
    def scaling(self) -> str:
        """The spelling of the precision that scales the loss (the condition's value)."""
        return next(name for name, p in self.precisions.items() if p.scales)

    def api(self, method: str) -> Api | None:
        return self.apis.get(method)

    def setting(self, precision) -> str:
        """``precision='16-mixed'``: the scaling setting as the code would spell it."""
        return self.spelled.format(precision=precision if precision is not None else self.scaling)


def apis(*entries: Api) -> dict:
    return {entry.method: entry for entry in entries}
