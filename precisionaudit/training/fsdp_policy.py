"""FSDP mixed-precision policies in a training script, read statically: each
``MixedPrecision(...)`` (FSDP1) and ``MixedPrecisionPolicy(...)`` (FSDP2, ``fully_shard``)
call, with the dtypes its arguments may take (``lookup.known_dtypes``: every path known, or
unknown). Shared by PA421 (the reduce dtype) and PA422 (fp16 compute and the loss scaler).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .guards import Possible
from .lookup import known_dtypes
from .syntax import argument, string

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
    """One policy call. ``param``/``reduce`` are ``known_dtypes`` results: a list of
    possibilities, or None when unknown; an argument not given is ``[Possible(None)]``."""

    call: ast.Call
    version: int  # 1: FullyShardedDataParallel's MixedPrecision, 2: fully_shard's, 0: accelerate's
    api: str  # the class name as the script wrote it: "MixedPrecision", "MP"
    param: list | None
    reduce: list | None
    #: accelerate's plugin (``version`` 0): the setting that decides the reduce dtype, in words
    written: str | None = None


def may_use_fsdp_policies(text: str) -> bool:
    """A textual prefilter: a policy class is imported from, or reached through, a module
    path with ``fsdp`` in it, or accelerate's plugin is named."""
    return ("MixedPrecision" in text and "fsdp" in text) or "FullyShardedDataParallelPlugin" in text


def fsdp_policies(script) -> list[Policy]:
    """Every FSDP mixed-precision policy call of ``script``, in source order (found once).
    A call with ``*args``/``**kwargs`` has unknown dtypes."""
    return script.once(_find_policies)


def _find_policies(script) -> list[Policy]:
    policies = []
    for call in script.index.calls:
        names = script.names_of(call.func)
        if names & ACCELERATE_PLUGINS:
            policy = _accelerate_policy(script, call)
            if policy is not None:
                policies.append(policy)
            continue
        version = 1 if names & FSDP1_POLICIES else 2 if names & FSDP2_POLICIES else None
        if version is None:
            continue
        unknown = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
        given = {**dict(zip(_FIELDS[version], call.args)), **{k.arg: k.value for k in call.keywords if k.arg}}

        def dtypes(field):
            if unknown:
                return None
            if field not in given:
                return [Possible(None)]
            return known_dtypes(script, given[field])

        api = script.source(call.func).strip()
        policies.append(Policy(call, version, api, dtypes("param_dtype"), dtypes("reduce_dtype")))
    return policies


def _accelerate_policy(script, call) -> Policy | None:
    """The policy ``FullyShardedDataParallelPlugin(mixed_precision_policy=...)`` makes from
    a string or a dict literal; None when it is not given (the Accelerator's
    ``mixed_precision`` decides) or is an object (its own call is read as a policy)."""
    value = argument(call, "mixed_precision_policy")
    api = script.source(call.func).strip()
    written = None if value is None else script.source(value).strip()
    if string(value) is not None:
        dtype = _ACCELERATE_PRECISIONS.get(value.value)
        both = None if dtype is None else [Possible(dtype)]
        return Policy(call, 0, api, both, both,
                      f"mixed_precision_policy={written}, which accelerate makes reduce_dtype=torch.{dtype}")
    if isinstance(value, ast.Dict):
        given = {k.value: v for k, v in zip(value.keys, value.values) if string(k) is not None}
        if "reduce_dtype" not in given or len(given) != len(value.keys):
            return None  # accelerate refuses a dict without every key: not this rule's
        param = known_dtypes(script, given["param_dtype"]) if "param_dtype" in given else None
        reduce_code = script.source(given["reduce_dtype"]).strip()
        return Policy(call, 0, api, param, known_dtypes(script, given["reduce_dtype"]),
                      f'mixed_precision_policy={{"reduce_dtype": {reduce_code}, ...}}')
    return None
