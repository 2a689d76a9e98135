"""``--input-shape`` values: the shapes of generated example inputs, for every kind of model
that has none of its own (ONNX, Hugging Face directories, ``module:callable``). Torch-free."""
from __future__ import annotations

import math
import re

from ..core.errors import UsageError

#: no generated input is larger than this (2^31 elements, 8 GiB of float32)
MAX_ELEMENTS = 2**31
_SHAPE = re.compile(r"\s*(?:([^=]+?)\s*=\s*)?(\d+(?:\s*[x,]\s*\d+)*)\s*")


def parse_shapes(values, names: bool = True) -> list[tuple[str | None, tuple[int, ...]]]:
    """``["ids=2x128", "mask=2x128"]`` → [("ids", (2, 128)), ...]; with ``names=False`` a bare
    ``1x3x224x224`` too (name None: a positional input), but not both kinds at once."""
    shapes = []
    for value in values:
        match = _SHAPE.fullmatch(value)
        if not match or (names and match.group(1) is None):
            raise UsageError(f"--input-shape {value!r}: expected NAME=DIMS such as input_ids=2x128"
                             + ("" if names else " or DIMS such as 1x3x224x224"))
        shape = tuple(int(d) for d in re.split(r"\s*[x,]\s*", match.group(2)))
        if math.prod(shape) > MAX_ELEMENTS:
            raise UsageError(f"--input-shape {value}: {math.prod(shape):,} elements is more than "
                             f"the {MAX_ELEMENTS:,} an input may have")
        shapes.append((match.group(1), shape))
    if len({name is None for name, _ in shapes}) > 1:
        raise UsageError("--input-shape: give every input a NAME= (keyword arguments) or none (positional)")
    return shapes
