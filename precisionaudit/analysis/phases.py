"""Phases of sin/cos: where the value a phase is made from is stored in fp16/bf16 (PA113).

A sinusoid's argument (positions x inverse frequencies, a timestep x 1000 x frequencies) is
built by a chain of products, casts and views. Storing a value of that chain in a dtype
with m stored significand bits changes it by a relative 2^-(m+1) at most, and products,
casts and views carry a relative error unchanged to the phase: the phase error is
|phase| x 2^-(m+1). sin/cos then reduce the phase modulo 2 pi, so that error is an absolute
error of the embedding, however fine the sin/cos kernel itself computes.

Only the values that vary per position or step count (those made from a model input or
from integer positions): a frequency table stored low (an fp16 ``inv_freq`` buffer) changes
each frequency once, the same for every position, and keeps the embedding a consistent one.

The bound on |phase| is the phase's value range (static, or measured with --data). Where a
model input of unknown range makes it unknown, the pass assumes the input is of unit scale
(|x| <= 1, a [0, 1] timestep) and propagates that through the chain's constant scales and
bounded frequency tables; ``basis`` says which bound was used. Each low-precision store of
the chain gets a ``PhaseFacts`` (analysis/facts.py) under ``phase``: ``error`` (radians),
``largest`` (the bound on |phase|), ``basis``, ``sinusoid`` (the sin/cos node),
``stores_before`` (the chain's earlier low-precision stores) and ``fix_ops`` (the
low-precision chain ops from it on).
"""
from __future__ import annotations

import networkx as nx

from ..core.numerics import EXACT_INTEGER_LIMIT, LOW_PRECISION_NAMES, UNIT_ROUNDOFF
from ..ir.graph import producers
from .facts import PhaseFacts, fact
from .ranges import GEMMS, OUTER, SAME, contraction, value_range

SINUSOIDS = {"sin", "cos"}
UNIT = (-1.0, 1.0)
#: ops that pass a relative error through unchanged: products, casts, views, concatenations
PRODUCTS = {"mul", "div", "neg", *OUTER}
CARRIERS = SAME | PRODUCTS | {"cat", "stack"}


def _on_chain(node) -> bool:
    if node["op"] in GEMMS:
        return contraction(node) == 1  # an outer product written as a matmul
    return node["op"] in CARRIERS


def _chain(graph, sinusoid):
    """(chain nodes, roots): the carriers the phase is made by, and the other nodes they read."""
    chain, roots, todo = set(), set(), list(producers(graph, sinusoid))
    while todo:
        name = todo.pop()
        if name in chain or name in roots:
            continue
        if _on_chain(graph.nodes[name]):
            chain.add(name)
            todo.extend(producers(graph, name))
        else:
            roots.add(name)
    return chain, roots


def _varying(graph, name, chain, memo) -> bool:
    """The value changes with a model input or a position: it reads an input, holds integer
    positions, or is made on the chain from such a value (a frequency table is not)."""
    if name not in memo:
        node = graph.nodes[name]
        if node.get("sources") or fact(node, "integer.largest") is not None:
            memo[name] = True
        elif name in chain:
            memo[name] = any(_varying(graph, p, chain, memo) for p in producers(graph, name))
        else:
            memo[name] = any(graph.nodes[a].get("sources") for a in nx.ancestors(graph, name))
    return memo[name]


def _built_buffers_read(graph, names, built):
    """The persistent buffers (name -> range as built) that the nodes ``names`` read."""
    return {p: built[p] for n in names
            for p, _ in [*graph.nodes[n]["params"], *graph.nodes[n].get("param_views", ())] if p in built}


def _assumed_bound(graph, phase, chain, roots, input_range, buffers):
    """max |phase| from the chain's ranges, given what is assumed of inputs and buffers."""
    ranges = {n: fact(graph.nodes[n], "range.value_range") for n in chain | roots}
    for name in nx.topological_sort(graph.subgraph(chain | roots)):
        if ranges[name] is None:
            ranges[name] = value_range(graph, name, graph.nodes[name], ranges, input_range=input_range,
                                       buffers=buffers)
    return None if ranges[phase] is None else max(abs(v) for v in ranges[phase])


def _phase_bound(graph, sinusoid, chain, roots):
    """(max |phase|, basis, assumed buffers): the phase's range; else one that takes the
    persistent buffers the chain reads (a frequency table) at the values the model was built
    with, then one that also assumes unit-scale model inputs."""
    (phase,) = producers(graph, sinusoid)
    known = fact(graph.nodes[phase], "range.value_range")
    if known is not None:
        return max(abs(v) for v in known), fact(graph.nodes[phase], "range.source"), ()
    buffers = _built_buffers_read(graph, chain | roots, graph.graph.get("built_buffer_ranges") or {})
    if buffers:
        bound = _assumed_bound(graph, phase, chain, roots, None, buffers)
        if bound is not None:
            return bound, "buffers as built", tuple(buffers)
    bound = _assumed_bound(graph, phase, chain, roots, UNIT, buffers)
    if bound is None:
        return None, None, ()
    return bound, "unit-scale inputs", tuple(buffers)


def _stores(graph, chain, roots):
    """The chain's values that vary and are stored in fp16/bf16 inexactly, in forward order."""
    memo = {}
    found = []
    for name in nx.topological_sort(graph.subgraph(chain | roots)):
        node = graph.nodes[name]
        dtype = node["out_dtype"]
        if dtype not in LOW_PRECISION_NAMES or not _varying(graph, name, chain, memo):
            continue
        largest = fact(node, "integer.largest")
        if largest is not None and largest <= EXACT_INTEGER_LIMIT[dtype]:
            continue  # integers the dtype holds exactly: storing them rounds nothing
        found.append(name)
    return found


def annotate(graph):
    for sinusoid in [n for n, a in graph.nodes(data=True) if a["op"] in SINUSOIDS]:
        if len(producers(graph, sinusoid)) != 1:
            continue
        chain, roots = _chain(graph, sinusoid)
        stores = _stores(graph, chain, roots)
        if not stores:
            continue
        bound, basis, assumed = _phase_bound(graph, sinusoid, chain, roots)
        if bound is None:
            continue
        for i, name in enumerate(stores):
            node = graph.nodes[name]
            error = bound * UNIT_ROUNDOFF[node["out_dtype"]]
            if "phase" in node and error <= node["phase"].error:
                continue  # sin and cos of one phase: one fact, the larger error
            later = [s for s in stores[i:] if graph.nodes[s]["module"] == node["module"]]
            node["phase"] = PhaseFacts(error=error, largest=bound, basis=basis, sinusoid=sinusoid,
                                       assumed_buffers=assumed,
                                       stores_before=stores[:i],
                                       fix_ops=list(dict.fromkeys(graph.nodes[s]["op"] for s in later)))
