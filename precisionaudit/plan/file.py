"""The override plan file (``amp_plan.yaml``): its data model, validation, reading, writing.

One module owns the format so that the planner that writes it, ``apply_plan`` that
training code calls, and ``check`` all read the same thing the same way. Validation is
strict because a plan silently ignored is worse than no plan: every error names the file
and the offending entry.

A plan is for one kind of model. PyTorch entries name a ``module`` glob (and optionally
its ``ops``); ONNX entries name graph ``nodes`` and/or ``op_types`` that the float16
conversion keeps in float32 (``precisionaudit convert``). One plan never mixes the two:
a module glob means nothing in an ONNX graph, and a node name nothing in an nn.Module.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import yaml

from ..core.documents import reading, require_regular_file
from ..core.errors import UsageError
from ..core.schema import schema_error
from ..core.target import DEVICES, FP8_RECIPES, MODES, TARGET_DTYPES

PLAN_VERSION = 1
#: op types an ONNX plan may not keep in fp32 by type: onnxconverter-common wraps a blocked
#: op in the Casts it inserts and then meets those Casts as blocked ops too, forever.
UNBLOCKABLE_OP_TYPES = ("Cast",)


def _names(what: str, kind: str, nullable: bool = False) -> dict:
    """A non-empty list of non-empty strings, with one message for every way to miss it."""
    message = f"{what} must be a non-empty list of {kind}"
    return {"type": ["array", "null"] if nullable else "array", "minItems": 1, "x-message": message,
            "items": {"type": "string", "minLength": 1, "x-message": message}}


def _strings(message: str) -> dict:
    return {"type": ["array", "null"], "x-message": message, "items": {"type": "string", "x-message": message}}


#: the plan format; what spans fields (module or nodes, one kind per plan, Cast) stays in code
SCHEMA = {
    "type": "object", "required": ["version"], "additionalProperties": False,
    "x-message": {"type": "a plan is a mapping with version, target and overrides (got {got})",
                  "required": f"no version (this precisionaudit reads plan version {PLAN_VERSION})",
                  "additionalProperties": "unknown top-level key {keys}"},
    "properties": {
        "version": {"const": PLAN_VERSION, "x-message": f"plan version {{value!r}} is not supported "
                                                        f"(this precisionaudit reads version {PLAN_VERSION})"},
        "target": {
            "type": ["object", "null"], "additionalProperties": False,
            "x-message": {"type": "target must be a mapping like {{dtype: float16, mode: autocast}}",
                          "additionalProperties": "target: unknown key '{keys}'"},
            "properties": {**{key: {"enum": list(values), "x-message": f"target {key} {{value!r}} is not one "
                                                                       f"of {', '.join(values)}"}
                              for key, values in (("dtype", TARGET_DTYPES), ("recipe", FP8_RECIPES),
                                                  ("mode", MODES), ("device", DEVICES))},
                           "tp": {"type": "integer", "minimum": 1,
                                  "x-message": "target tp {value!r} is not a tensor-parallel degree (1, 2, ...)"}}},
        "overrides": {"type": ["array", "null"], "x-message": "overrides must be a list of entries", "items": {
            "type": "object", "additionalProperties": False,
            "x-message": {"type": "an entry is a mapping with at least a module",
                          "additionalProperties": "unknown key {keys}"},
            "properties": {
                "module": {"type": "string", "x-message": 'module must be a string (a glob over '
                                                          'named_modules() paths; "" is the root)'},
                "ops": _names("ops", "op names (leave it out to run the whole module in fp32)", nullable=True),
                "nodes": _names("nodes", "ONNX node names"),
                "op_types": _names("op_types", "ONNX op types"),
                "dtype": {"const": "float32",
                          "x-message": "dtype {value!r} is not supported (overrides run in float32)"},
                "rules": _strings("rules must be a list of rule ids"),
                "reason": {"type": ["string", "null"], "x-message": "reason must be a string"}}}},
        "keep_fp32_modules": _strings("keep_fp32_modules must be a list of module globs"),
        # --dtype float8: the nn.Linear modules (named_modules() paths) to leave in bf16
        "keep_out_of_fp8": _strings("keep_out_of_fp8 must be a list of module names"),
        # --dtype nvfp4 / mxfp4: the nn.Linear modules (named_modules() paths) to leave in bf16
        "keep_out_of_fp4": _strings("keep_out_of_fp4 must be a list of module names"),
        # training entries (check --train, plan --train): how the optimizer holds the weights
        "master_weights": {"enum": ["float32", None],
                           "x-message": "master_weights {value!r} is not supported (float32: the "
                                        "optimizer steps an fp32 copy of the low-precision weights)"},
        "loss_scale": {
            "type": ["object", "null"], "required": ["init"], "additionalProperties": False,
            "x-message": {"*": "loss_scale must be a mapping like {{init: 65536}}",
                          "additionalProperties": "loss_scale: unknown key '{keys}' (it takes init)"},
            "properties": {"init": {"type": "number", "exclusiveMinimum": 0,
                                    "x-message": "loss_scale init {value!r} is not a positive number"}}},
    },
}


class PlanError(UsageError, ValueError):
    """A plan that cannot be applied: malformed, another version, or invalid entries."""


@dataclass
class Override:
    """One region that runs in fp32: a module glob and, optionally, the ops inside it
    (PyTorch), or ONNX graph nodes by name and/or by op type (``module`` is None then)."""

    module: str | None
    ops: list[str] | None = None  # None: the whole module runs in fp32
    dtype: str = "float32"
    rules: list[str] = field(default_factory=list)
    reason: str = ""
    nodes: list[str] | None = None  # ONNX node names
    op_types: list[str] | None = None  # ONNX op types: every node of the type

    @property
    def is_onnx(self) -> bool:
        return self.nodes is not None or self.op_types is not None

    def to_dict(self) -> dict:
        data = {} if self.module is None else {"module": self.module}
        if self.nodes is not None:
            data["nodes"] = list(self.nodes)
        if self.op_types is not None:
            data["op_types"] = list(self.op_types)
        if self.ops is not None:
            data["ops"] = list(self.ops)
        data["dtype"] = self.dtype
        if self.rules:
            data["rules"] = list(self.rules)
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass
class OverridePlan:
    target: dict
    overrides: list[Override] = field(default_factory=list)
    #: pure mode: modules whose parameters stay fp32 when the model is converted to the low
    #: dtype (Hugging Face's ``_keep_in_fp32_modules``); empty under autocast.
    keep_fp32_modules: list[str] = field(default_factory=list)
    #: --dtype float8: the nn.Linear modules (exact named_modules() paths) that stay in bf16
    #: (torchao's module_filter_fn returns False for them; Transformer Engine keeps them nn.Linear)
    keep_out_of_fp8: list[str] = field(default_factory=list)
    #: --dtype nvfp4 / mxfp4: the nn.Linear modules (exact named_modules() paths) that stay in
    #: bf16 (torchao's filter_fn, Transformer Engine's per-layer choice, Megatron's bf16 layers)
    keep_out_of_fp4: list[str] = field(default_factory=list)
    #: training entries: ``"float32"`` when the optimizer steps an fp32 master copy of the
    #: low-precision weights (pure mode; autocast's weights are fp32 already)
    master_weights: str | None = None
    #: training entries: ``{"init": 65536.0}``, GradScaler's initial scale (fp16)
    loss_scale: dict | None = None
    version: int = PLAN_VERSION
    source: str = "<plan>"  # where it was read from, for messages

    def to_dict(self) -> dict:
        data = {"version": self.version, "target": dict(self.target),
                "overrides": [o.to_dict() for o in self.overrides]}
        if self.keep_fp32_modules:
            data["keep_fp32_modules"] = list(self.keep_fp32_modules)
        if self.keep_out_of_fp8:
            data["keep_out_of_fp8"] = list(self.keep_out_of_fp8)
        if self.keep_out_of_fp4:
            data["keep_out_of_fp4"] = list(self.keep_out_of_fp4)
        if self.master_weights:
            data["master_weights"] = self.master_weights
        if self.loss_scale:
            data["loss_scale"] = dict(self.loss_scale)
        return data

    def keep_out(self, target) -> list[str]:
        """The Linears the plan leaves in bf16 under a quantized-Linear ``target`` (a
        core.target.Target): keep_out_of_fp4 under nvfp4/mxfp4, keep_out_of_fp8 under float8."""
        return self.keep_out_of_fp4 if getattr(target, "fp4", None) else self.keep_out_of_fp8

    @property
    def has_training_entries(self) -> bool:
        """True when the plan says how training holds the weights (check --train reads these)."""
        return bool(self.master_weights or self.loss_scale)

    def target_mismatch(self, target: dict) -> str | None:
        """A sentence saying how the plan's target differs from ``target``, or None."""
        diffs = [f"{key} {self.target.get(key)} (not {target[key]})"
                 for key in ("dtype", "mode", "device")
                 if key in self.target and key in target and self.target[key] != target[key]]
        if not diffs:
            return None
        return f"{self.source} was made for {', '.join(diffs)}; its regions are applied anyway"

    @property
    def is_onnx(self) -> bool:
        """True when the entries name ONNX nodes / op types (never mixed with modules)."""
        return any(o.is_onnx for o in self.overrides)

    def require_pytorch(self) -> None:
        """Raise PlanError for an ONNX plan handed to code that patches nn.Modules."""
        if self.is_onnx:
            raise PlanError(f"{self.source}: this plan names ONNX nodes (nodes:/op_types:); apply it "
                            "to the ONNX model with `precisionaudit convert MODEL.onnx --plan ...`")


# --------------------------------------------------------------------------- reading
def load_plan(plan, source: str | None = None) -> OverridePlan:
    """An OverridePlan from a path, a YAML string of a plan, a dict, or an OverridePlan."""
    if isinstance(plan, OverridePlan):
        return plan
    if isinstance(plan, dict):
        return parse_plan(plan, source or "<plan>")
    if isinstance(plan, (str, os.PathLike)):
        path = os.fspath(plan)
        require_regular_file(path, "plan", PlanError, missing="no such plan file")
        with open(path, encoding="utf-8") as fh, reading(path, "plan", PlanError):
            return parse_text(fh.read(), path)
    raise PlanError(f"a plan must be a path, a dict or an OverridePlan, not {type(plan).__name__}")


def parse_text(text: str, source: str) -> OverridePlan:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanError(f"{source}: not valid YAML{where}: {problem}") from exc
    return parse_plan(data, source)


def parse_plan(data, source: str) -> OverridePlan:
    error = schema_error(data, SCHEMA)
    if error is not None:
        where, why = error
        raise PlanError(f"{_entry_place(data, where, source)}: {why}")
    entries = [_entry(entry, f"{_entry_place(data, f'overrides[{i}]', source)}")
               for i, entry in enumerate(data.get("overrides") or [])]
    if len({o.is_onnx for o in entries}) > 1:
        raise PlanError(f"{source}: overrides mix module entries (PyTorch) with nodes/op_types "
                        "entries (ONNX); a plan is for one kind of model")
    return OverridePlan(target=dict(data.get("target") or {}), overrides=entries,
                        keep_fp32_modules=data.get("keep_fp32_modules") or [],
                        keep_out_of_fp8=data.get("keep_out_of_fp8") or [],
                        keep_out_of_fp4=data.get("keep_out_of_fp4") or [],
                        master_weights=data.get("master_weights"),
                        loss_scale=({"init": float(data["loss_scale"]["init"])}
                                    if data.get("loss_scale") else None),
                        version=PLAN_VERSION, source=source)  # the schema let only 1 (or 1.0) through


def _entry_place(data, where: str, source: str) -> str:
    """'amp_plan.yaml: overrides[2] (module 'blocks.*')' for a place inside an entry; the
    file alone elsewhere (those messages name their key themselves)."""
    if not where.startswith("overrides["):
        return source
    index = int(where[len("overrides["):where.index("]")])
    module = data["overrides"][index].get("module") if isinstance(data["overrides"][index], dict) else None
    return f"{source}: overrides[{index}]" + (f" (module {module!r})" if isinstance(module, str) else "")


def _entry(entry: dict, where: str) -> Override:
    """An Override from an entry the schema accepted: a module (PyTorch) or nodes/op_types
    (ONNX), never both."""
    common = {"dtype": entry.get("dtype", "float32"), "rules": list(entry.get("rules") or []),
              "reason": entry.get("reason") or ""}
    if "nodes" not in entry and "op_types" not in entry:
        if "module" not in entry:
            raise PlanError(f'{where}: module must be a string (a glob over named_modules() paths; "" '
                            "is the root)")
        ops = entry.get("ops")
        for op in ops or ():
            split_op(op, where)
        return Override(module=entry["module"], ops=list(ops) if ops is not None else None, **common)
    mixed = [key for key in ("module", "ops") if key in entry]
    if mixed:
        raise PlanError(f"{where}: an entry names nodes/op_types (ONNX) or a module (PyTorch), "
                        f"not both ({', '.join(mixed)} given too)")
    blocked = sorted(set(entry.get("op_types") or ()) & set(UNBLOCKABLE_OP_TYPES))
    if blocked:
        raise PlanError(f"{where}: op_types cannot keep {', '.join(blocked)} in float32 "
                        "(onnxconverter-common never finishes with Cast in its op block list); "
                        "name the nodes that need float32 under nodes: instead")
    return Override(module=None, nodes=_copy(entry.get("nodes")), op_types=_copy(entry.get("op_types")),
                    **common)


def split_op(op: str, where: str = "<plan>") -> tuple[str, int | None]:
    """('matmul', 1) for an entry's ``matmul#1`` (the first matmul call of each call of the
    module, its submodules' included), ('matmul', None) for ``matmul`` (every call)."""
    name, mark, number = op.partition("#")
    if not mark:
        return op, None
    if not name or not number.isdigit() or int(number) < 1:
        raise PlanError(f"{where}: op {op!r} is not an op name or an op name and a call number "
                        "(matmul#1: the module's first matmul call)")
    return name, int(number)


def _copy(names):
    return list(names) if names is not None else None


# --------------------------------------------------------------------------- writing
def dump_plan(plan: OverridePlan, header: list[str] = ()) -> str:
    """The plan as YAML, with ``header`` lines as a leading comment; key order is fixed."""
    body = yaml.safe_dump(plan.to_dict(), sort_keys=False, default_flow_style=None, width=1 << 16)
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header)
    return comment + body


def not_covered(f) -> str:
    """The plan header's line for a finding whose fix is a code or shape change, not a plan entry."""
    where = f"{f.path}:{f.line}" if f.line else f.path
    fix = f.fix
    what = {"replace": f"use {fix.get('use')} instead", "cast_output": "return float32 outputs",
            "pad": f"pad to {fix.get('to')}", "edit": fix.get("to")}.get(fix.get("action"), fix.get("action"))
    return f"{f.rule} {f.op} in {f.module or '<root>'} ({where}): {what}"
