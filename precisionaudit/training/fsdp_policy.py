"""FSDP mixed-precision policies in a training script, read statically: each
``MixedPrecision(...)`` (FSDP1) and ``MixedPrecisionPolicy(...)`` (FSDP2, ``fully_shard``)
call, with the dtypes its arguments may take. Shared by PA421 (the reduce dtype) and PA422
(fp16 compute and the loss scaler).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import libcst as cst

from .dtype_values import Possible, possible_dtypes

#: the qualified names each policy class is reachable by in torch 2.x
FSDP1_POLICIES = frozenset((
    "torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.api.MixedPrecision",
    "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision"))
FSDP2_POLICIES = frozenset((
    "torch.distributed.fsdp.MixedPrecisionPolicy",
    "torch.distributed.fsdp._fully_shard.MixedPrecisionPolicy",
    "torch.distributed.fsdp._fully_shard._fsdp_api.MixedPrecisionPolicy",
    "torch.distributed._composable.fsdp.MixedPrecisionPolicy"))
#: accelerate's FSDP plugin: ``mixed_precision_policy="bf16"`` becomes
#: ``MixedPrecision(param_dtype=bf16, reduce_dtype=bf16)`` and a dict is unpacked into the
#: policy (accelerate utils/dataclasses.py ``FullyShardedDataParallelPlugin.set_mixed_precision``)
ACCELERATE_PLUGINS = frozenset((
    "accelerate.FullyShardedDataParallelPlugin", "accelerate.utils.FullyShardedDataParallelPlugin",
    "accelerate.utils.dataclasses.FullyShardedDataParallelPlugin"))
_ACCELERATE_PRECISIONS = {"bf16": "bfloat16", "fp8": "bfloat16", "fp16": "float16", "fp32": "float32"}
#: the dataclass fields in declaration order: positional arguments map onto them
#: (torch/distributed/fsdp/api.py, torch/distributed/fsdp/_fully_shard/_fsdp_api.py)
_FIELDS = {1: ("param_dtype", "reduce_dtype", "buffer_dtype"),
           2: ("param_dtype", "reduce_dtype", "output_dtype")}


@dataclass
class Policy:
    """One policy call. ``param``/``reduce`` are ``possible_dtypes`` results: a list of
    possibilities, or None when unknown; an argument not given is ``[Possible(None)]``."""

    call: cst.Call
    version: int  # 1: FullyShardedDataParallel's MixedPrecision, 2: fully_shard's, 0: accelerate's
    api: str  # the class name as the script wrote it: "MixedPrecision", "MP"
    param: list | None
    reduce: list | None
    #: accelerate's plugin (``version`` 0): the setting that decides the reduce dtype, in words
    written: str | None = None


#: per script, what PA421 and PA422 both read: found once
_POLICIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def may_use_fsdp_policies(text: str) -> bool:
    """A textual prefilter, before any LibCST metadata: a policy class is imported from,
    or reached through, a module path with ``fsdp`` in it, or accelerate's plugin is named."""
    return ("MixedPrecision" in text and "fsdp" in text) or "FullyShardedDataParallelPlugin" in text


def fsdp_policies(script) -> list[Policy]:
    """Every FSDP mixed-precision policy call of ``script``, in source order. A call with
    ``*args``/``**kwargs`` has unknown dtypes."""
    if script not in _POLICIES:
        _POLICIES[script] = _find_policies(script)
    return _POLICIES[script]


def _find_policies(script) -> list[Policy]:
    policies = []
    for call in all_calls(script):
        names = script.names_of(call.func)
        if names & ACCELERATE_PLUGINS:
            policy = _accelerate_policy(script, call)
            if policy is not None:
                policies.append(policy)
            continue
        version = 1 if names & FSDP1_POLICIES else 2 if names & FSDP2_POLICIES else None
        if version is None:
            continue
        given: dict = {}
        unknown = False
        for index, arg in enumerate(call.args):
            if arg.star:
                unknown = True
            elif arg.keyword is not None:
                given[arg.keyword.value] = arg.value
            elif index < len(_FIELDS[version]):
                given[_FIELDS[version][index]] = arg.value

        def dtypes(field):
            if unknown:
                return None
            if field not in given:
                return [Possible(None)]
            return possible_dtypes(script, given[field])

        api = script.module.code_for_node(call.func).strip()
        policies.append(Policy(call, version, api, dtypes("param_dtype"), dtypes("reduce_dtype")))
    return policies


def _accelerate_policy(script, call) -> Policy | None:
    """The policy ``FullyShardedDataParallelPlugin(mixed_precision_policy=...)`` makes from
    a string or a dict literal; None when it is not given (the Accelerator's
    ``mixed_precision`` decides) or is an object (its own call is read as a policy)."""
    value = next((a.value for a in call.args if a.keyword is not None
                  and a.keyword.value == "mixed_precision_policy"), None)
    api = script.module.code_for_node(call.func).strip()
    written = None if value is None else script.module.code_for_node(value).strip()
    if isinstance(value, cst.SimpleString):
        dtype = _ACCELERATE_PRECISIONS.get(value.evaluated_value)
        both = None if dtype is None else [Possible(dtype)]
        return Policy(call, 0, api, both, both,
                      f"mixed_precision_policy={written}, which accelerate makes reduce_dtype=torch.{dtype}")
    if isinstance(value, cst.Dict):
        given = {e.key.evaluated_value: e.value for e in value.elements
                 if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)}
        if "reduce_dtype" not in given or len(given) != len(value.elements):
            return None  # accelerate refuses a dict without every key: not this rule's
        param = possible_dtypes(script, given["param_dtype"]) if "param_dtype" in given else None
        reduce_code = script.module.code_for_node(given["reduce_dtype"]).strip()
        return Policy(call, 0, api, param, possible_dtypes(script, given["reduce_dtype"]),
                      f'mixed_precision_policy={{"reduce_dtype": {reduce_code}, ...}}')
    return None


def _calls(module):
    found = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node):
            found.append(node)

    module.visit(Calls())
    return found


def all_calls(script) -> list[cst.Call]:
    """Every call of ``script``, in source order."""
    if script not in _CALLS:
        _CALLS[script] = _calls(script.module)
    return _CALLS[script]


