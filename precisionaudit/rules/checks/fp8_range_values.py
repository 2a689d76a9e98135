"""What the measured FP8 range rules (PA604, PA605) share: shares and errors as message text,
and the recipes a layer's measured values would keep."""
from __future__ import annotations

from ...analysis.fp8_ranges import SCHEME_OF

#: the scalings a finding compares: the recipes' forward scalings (``delayed`` scales as
#: ``tensorwise`` does, at best; ``rowwise_with_gw_hp``'s forward is ``rowwise``'s)
COMPARED = tuple(dict.fromkeys(SCHEME_OF.values()))


def percent(share: float | None) -> str:
    """A share as a percentage with the digits that matter ("2.41%", "0.0031%"); "n/a": None."""
    if share is None:
        return "n/a"
    return "0%" if share == 0 else f"{share * 100:.3g}%"


def keeping(measured: dict, below: float, current: str) -> list[str]:
    """The recipes other than ``current`` whose measured value is below ``below`` (COMPARED order)."""
    return [r for r in COMPARED if r != current and measured.get(r) is not None and measured[r] < below]


def by_recipe(measured: dict) -> str:
    """"tensorwise 45%, rowwise 19%, ...": the measured value under each recipe that runs it."""
    return ", ".join(f"{r} {percent(measured[r])}" for r in COMPARED if measured.get(r) is not None)


def calls_text(calls: int) -> str:
    return f"{calls} call" if calls == 1 else f"{calls} calls"
