"""PyTorch frontend: run the user's forward under the target policy and build the IR.

Capture order: a fake-tensor run (the model built with initialisation skipped and its
parameters on the meta device, then made fake: no weights allocated, any model size); if
that forward fails, an eager run on real tensors, which also says whose error it is
(``_after_fake_failure``); without example inputs, or when neither can run the forward, the
module structure alone.
"""
from __future__ import annotations

import contextlib
import logging
import math

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.utils import _pytree as pytree

from ...core.autocast_policy import aten_short
from ...core.errors import CaptureError
from ...core.numerics import Target, dtype_name
from ...ir.capture import Capture
from ...ir.graph import OpNode, add_op, new_graph
from ...runtime.pytorch.cuda_autocast import autocast_policy
from ...runtime.pytorch.emulation import EmulatedKernels, mixed_operands
from ...runtime.pytorch.meta_build import VALUE_LIMIT
from ...runtime.pytorch.model_file import OWN_ERROR, allocation_failure, on_meta
from ...runtime.pytorch.ops import CAST_FNS
from ...runtime.pytorch.source import ModelSource, open_source
from ...runtime.pytorch.user_code import describe, user_code
from ...runtime.sources import DEFAULT_LOAD, LoadOptions
from .attribution import eager_budget, size_text, weight_bytes
from .fakes import register_fakes
from .recorder import Recorder, calls_the_model

#: aten ops that only re-view, alias or copy a tensor: not nodes, edges pass through them.
TRANSPARENT = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "transpose", "t", "permute", "expand",
    "unsqueeze", "squeeze", "slice", "select", "split", "split_with_sizes", "unbind", "alias",
    "detach", "clone", "contiguous", "as_strided", "lift_fresh", "lift_fresh_copy", "narrow",
    "expand_as", "view_as", "unfold", "_to_copy", "to", "copy_", "copy", "_to_dim_order_copy",
    "empty_like", "empty", "empty_strided", "new_empty", "new_empty_strided", "zero_", "fill_",
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "is_same_size",
}
#: norms whose first scalar argument is the order p, not a dim
NORM_ORDER_FIRST = {"linalg_vector_norm", "norm"}
#: ops whose int arguments are the dimensions reduced or normalised.
DIM_ARG_OPS = {"sum", "mean", "var", "std", "var_mean", "std_mean", "cumsum", "cumprod", "prod",
               "softmax", "log_softmax", "logsumexp", "norm", "linalg_vector_norm", "amax",
               "amin", "max", "min", "argmax", "nansum", "nanmean"}


def capture_file(name: str, target: Target, load: LoadOptions = DEFAULT_LOAD) -> Capture:
    """The capture of the model ``name`` names: a model file, a Hugging Face directory or a
    ``module:callable`` (runtime/pytorch/source.py)."""
    return capture_source(open_source(name, load), target)


def capture(make_model, make_inputs, target: Target, path: str = "<model>",
            entry: str = "get_model", inputs: str = "get_example_inputs") -> Capture:
    """The capture of the model ``make_model()`` builds, run on ``make_inputs()`` (None: the
    module structure alone)."""
    return capture_source(ModelSource(path, entry, make_model, inputs, make_inputs), target)


def capture_source(source: ModelSource, target: Target) -> Capture:
    if not source.has_inputs:
        model, note = _fake_model(source)
        return Capture(structure_graph(model, target), "structure", notes=([note] if note else []) + source.notes,
                       skipped=[f"{source.missing_inputs}: only module-structure checks ran"])
    register_fakes()
    try:
        with _quiet_fake_tensor_log():
            result = _run(source, target, fake=True)
    except ForwardFailed as failed:
        result = _after_fake_failure(source, target, failed.error)
    result.notes += source.notes
    return result


class ForwardFailed(Exception):
    """The model's forward raised ``error`` (not the scan's machinery around it)."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _after_fake_failure(source: ModelSource, target: Target, fake_error: BaseException) -> Capture:
    """The forward failed on fake tensors: whose error is it? A real run says. The model runs
    eagerly when its weights fit the memory (``attribution.eager_budget``): an error there is
    the model's own, named so; a run that passes is captured eagerly, and the note says that
    fake tensors could not run it. A model too large for that (or that its factory builds on
    the meta device) is judged on a small build of its config where the source has one (a
    Hugging Face directory): failing there is the model's own error; passing, or fake tensors'
    known limits (``fake_limitation``: data-dependent control flow), leave the module structure
    as the capture, with the note saying why. Only a failure no real run could check stays
    an error of the scan, and says it was not checked."""
    path = source.name
    model, _ = source.build_without_weights()
    need, budget = weight_bytes(model), eager_budget()
    why = f"its weights take {size_text(need)}, more than the {size_text(budget)} a real run may take here"
    try:
        real = source.build() if need <= budget else None
        if real is not None and on_meta(real):
            real, why = None, "its factory builds it on the meta device"
        result = _run(source, target, fake=False, model=real) if real is not None else None
    except ForwardFailed as failed:
        if not allocation_failure(failed.error):
            raise CaptureError(f"{path}: the forward failed on the example inputs: {describe(failed.error)} "
                               f"({OWN_ERROR}: it fails eagerly on real tensors too{_generated(source)})") \
                from failed.error
        result, why = None, f"a real run ran out of memory ({describe(failed.error)})"
    except CaptureError as exc:
        if not allocation_failure(exc):
            raise
        result, why = None, "building it with its weights ran out of memory"
    if result is not None:
        result.notes.append(f"fake-tensor capture failed ({describe(fake_error)}), a limit of the scan's fake "
                            "tensors: the model runs on real tensors; ran eagerly"
                            + (" (CUDA's low-precision kernels emulated in fp32 arithmetic)" if target.device == "cuda" else ""))
        return result
    verdict = _on_a_small_build(source, target, fake_error, budget)
    if isinstance(verdict, BaseException):
        raise CaptureError(f"{path}: the forward failed on the example inputs: {describe(verdict)} ({OWN_ERROR}: "
                           "a small build of its config fails the same way, and eagerly on real tensors too"
                           f"{_generated(source)})") from verdict
    if verdict is None and not fake_limitation(fake_error):
        raise CaptureError(f"{path}: the forward failed on fake tensors: {describe(fake_error)} (not checked on "
                           f"real tensors, since {why}: the scan's limit or the model's error)")
    note = (f"fake-tensor capture failed ({describe(fake_error)}), a limit of the scan "
            f"({verdict or 'fake tensors cannot run it'}); not run eagerly, since {why}")
    return Capture(structure_graph(model, target), "structure", notes=[note],
                   skipped=["the forward did not run: only module-structure checks ran"])


def _generated(source: ModelSource) -> str:
    """What a message adds when the inputs the model failed on are the scan's, not the user's."""
    return ("; on inputs generated for it: --input-shape or --inputs module:callable give others"
            if source.generated else "")


def _on_a_small_build(source: ModelSource, target: Target, fake_error: BaseException, budget: int):
    """What a small build of the source's config says about ``fake_error``: the error its
    eager run raises (the model's own), the words saying it runs (the scan's limit), or None
    when it says nothing: there is no small build, it does not fit or build, or it does not
    fail on fake tensors as the model did (then it is no witness)."""
    small = source.small_build()
    if small is None:
        return None
    try:
        if weight_bytes(small.build_without_weights()[0]) > budget:
            return None
        try:
            with _quiet_fake_tensor_log():
                _run(small, target, fake=True)
            return None
        except ForwardFailed as failed:
            if describe(failed.error) != describe(fake_error):
                return None
        try:
            _run(small, target, fake=False)
        except ForwardFailed as failed:
            return None if allocation_failure(failed.error) else failed.error
    except CaptureError:  # the small config does not build or make its inputs
        return None
    return "a small build of its config fails the same way on fake tensors and runs on real ones"


@contextlib.contextmanager
def _quiet_fake_tensor_log():
    """FakeTensorMode logs a traceback for every failing meta kernel; we report the error once."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


_FAKE_LIMITS = (fake_tensor.DataDependentOutputException, fake_tensor.DynamicOutputShapeException,
                fake_tensor.UnsupportedFakeTensorException, fake_tensor.UnsupportedOperatorException,
                fake_tensor.UnsupportedMutationAliasingException, GuardOnDataDependentSymNode)


def fake_limitation(exc: BaseException) -> bool:
    """True when the error is fake tensors' (no values), not the model's."""
    while exc is not None:
        if isinstance(exc, _FAKE_LIMITS) or "FakeTensor" in str(exc) or "meta tensor" in str(exc):
            return True
        exc = exc.__cause__
    return False


def _fake_model(source):
    model, note = source.build_without_weights()
    with FakeTensorMode(allow_non_fake_inputs=True):
        materialise_meta(model)
    return model, note


def materialise_meta(model):
    """Meta parameters and buffers become fake CPU tensors (call inside FakeTensorMode).

    ``Module.to_empty`` cannot swap meta parameters for fake ones, so replace them in place.
    A tensor shared by several modules (an embedding tied to the output head) stays shared:
    tensors are matched by their meta storage and view, since ``init_empty_weights`` wraps
    each registered parameter in a new Parameter object over the same storage.
    """
    made = {}  # storage and view → (the meta tensor, kept alive so keys stay unique; replacement)
    for module in model.modules():
        for store in (module._parameters, module._buffers):
            for name, t in store.items():
                if t is None or t.device.type != "meta":
                    continue
                key = (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape),
                       tuple(t.stride()), t.dtype, store is module._parameters)
                if key not in made:
                    made[key] = (t, torch.nn.Parameter(torch.empty(t.shape, dtype=t.dtype),
                                                       requires_grad=t.requires_grad)
                                 if store is module._parameters else torch.zeros(t.shape, dtype=t.dtype))
                store[name] = made[key][1]


#: larger buffers are not summarised by buffer_ranges (frequency tables and slopes are small;
#: a scan's build makes larger tensors on the meta device)
TABLE_LIMIT = VALUE_LIMIT


def buffer_ranges(model, persistent: bool = False) -> dict:
    """(min, max) of each non-persistent floating buffer that holds values: tables a module's
    constructor computes (rotary ``inv_freq``) and no checkpoint replaces, so the forward reads
    the values the constructor gave. Call before a pure-mode conversion makes them fake.
    ``persistent=True`` gives the persistent ones instead, as built: a checkpoint may replace
    them, so only an analysis that says it assumes them (PA113's phase bound) reads these."""
    found = {}
    for prefix, module in model.named_modules():
        names = module._non_persistent_buffers_set
        if persistent:
            names = set(module._buffers) - names
        for name in sorted(names):
            t = module._buffers.get(name)
            if (t is None or not t.is_floating_point() or t.device.type == "meta"
                    or isinstance(t, fake_tensor.FakeTensor) or not 0 < t.numel() <= TABLE_LIMIT):
                continue
            lo, hi = float(t.min()), float(t.max())
            if math.isfinite(lo) and math.isfinite(hi):
                found[f"{prefix}.{name}" if prefix else name] = (lo, hi)
    return found


@calls_the_model
def _run(source, target, fake: bool, model=None) -> Capture:
    """One capture of the forward: on fake tensors, or eagerly on real ones (``model``: the
    model built already). A failure of the forward itself is ForwardFailed."""
    path = source.name
    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
    notes = []
    if fake:
        model, note = source.build_without_weights()
        notes += [note] if note else []
    elif model is None:
        model = source.build()
    tables = buffer_ranges(model)  # real values: outside the fake mode
    built = buffer_ranges(model, persistent=True)
    with mode:
        if fake:
            materialise_meta(model)
        elif on_meta(model):
            raise CaptureError(f"{path}: the model is on the meta device and its forward "
                               "needs real values (data-dependent control flow)")
        args, kwargs = source.example_inputs()
        if target.mode == "pure":
            model = to_dtype(model, target.torch_dtype) if fake else model.to(target.torch_dtype)
            args, kwargs = cast_floats((args, kwargs), target.torch_dtype)
        recorder = Recorder(model, {**dict(model.named_buffers()), **dict(model.named_parameters())})
        recorder.mark_inputs((args, kwargs))
        # an eager run for a CUDA target computes the low-precision kernels as CUDA does, in fp32
        # arithmetic (CPU's fp16 convolutions and GEMMs are ~50x slower); below the recorder and
        # the policy, so that both see the dtypes CUDA's kernels take and give
        kernels = EmulatedKernels(refuse_scalars=False) if not fake and target.device == "cuda" else contextlib.nullcontext()
        # below the recorder, which records the operands as the user gave them
        try:
            with torch.no_grad(), kernels, mixed_operands(gemms=not fake) as mixed, autocast_policy(
                    target, "cpu-emulated" if target.device == "cuda" else "cpu", recorder.mark_banned), \
                    recorder, user_code(path, "forward"):
                out = model(*args, **kwargs)
        except CaptureError:
            raise
        except Exception as exc:  # noqa: BLE001 - the forward's own failure: the caller judges whose
            raise ForwardFailed(exc) from exc
    graph = build_graph(recorder, target, (args, kwargs), out, model)
    graph.graph["buffer_ranges"] = tables
    graph.graph["built_buffer_ranges"] = built
    notes += [f"{op} given {' and '.join(dtypes)} operands was computed in float32 so that the capture "
             "reaches the rest of the model; CUDA refuses it (PA115)" for op, dtypes in sorted(mixed.items())]
    return Capture(graph, "fake" if fake else "eager", notes=notes)


def to_dtype(model, dtype, kept=lambda name: False):
    """``model.to(dtype)`` for a model whose tensors are fake, but for the modules ``kept(path)``
    says stay as they are (``keep_fp32_modules``).

    ``Module._apply`` exchanges FakeTensor parameters with ``torch.utils.swap_tensors``,
    which refuses tensors that have a weakref (fake parameters always do), so
    ``model.half()`` raises "Couldn't swap". The floating-point parameters and buffers are
    replaced instead, as ``.to(dtype)`` would convert them; tied weights stay tied.
    """
    converted = {}  # id → (original, replacement); the original is kept so ids stay unique
    with torch.no_grad():
        for name, module in model.named_modules():
            if kept(name):
                continue
            for store in (module._parameters, module._buffers):
                for key, t in store.items():
                    if t is None or not t.is_floating_point() or t.dtype == dtype:
                        continue
                    if id(t) not in converted:
                        new = t.to(dtype)
                        if isinstance(t, torch.nn.Parameter):
                            new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
                        converted[id(t)] = (t, new)
                    store[key] = converted[id(t)][1]
            if isinstance(module, torch.nn.RNNBase):
                module._init_flat_weights()  # what RNNBase._apply does after a conversion
    return model


def cast_floats(tree, dtype):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t, tree)


# --------------------------------------------------------------------------- graph building
def build_graph(rec: Recorder, target: Target, inputs, outputs, model) -> object:
    """The IR of one recorded forward: a node per significant user-level call, an edge per
    tensor one call's ops hand to another's.

    A call (``F.softmax``, ``x @ y``) is significant when one of its aten ops computes (not
    only views or copies; a cast call, when it copies; a constant written by ``x[m] = v``
    always). Its ``OpNode`` takes target and compute dtype from the last computing op and
    ``autocast_cast`` from a dtype-changing copy autocast inserted. A call that is not
    significant is no node: its ops resolve to the node they pass through, so edges skip
    it. Model inputs become a node's ``sources``, parameters its ``params``, operands nothing
    records its ``param_views`` / ``untracked_operands``. Graph attributes: the inputs,
    parameters, modules and outputs of the forward.
    """
    graph = new_graph(target=target)
    tensors = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    graph.graph["inputs"] = [(dtype_name(t.dtype), tuple(t.shape)) for t in tensors]
    graph.graph["input_dims"] = {d for t in tensors for d in t.shape}
    graph.graph["params"] = {n: tuple(p.shape) for n, p in model.named_parameters()}
    graph.graph["modules"] = module_facts(model)

    node_of: dict[int, str | None] = {}
    view_of: dict[int, tuple] = {}  # op of a view/copy call → the ("param"|"input", name) it views
    significant = {c.index: is_significant(c, rec) for c in rec.calls}
    counts: dict[str, int] = {}
    for call in rec.calls:
        ops = [rec.ops[i] for i in call.ops]
        written = written_constant(call, rec)
        if not significant[call.index] and written is None:
            for op in ops:
                node_of[op.index] = _resolve(op, node_of)
                viewed = _viewed(op, view_of)
                if viewed is not None:
                    view_of[op.index] = viewed
            continue
        name = _unique(call.fn, counts)
        compute = [op for op in ops if aten_short(op.target) not in TRANSPARENT] or ops
        main = compute[-1]
        inside = set(call.ops)
        entering = [ref for op in ops for ref in op.inputs
                    if ref.dtype is not None and ref.producer not in inside]
        compute_dtype = _compute_dtype(main)
        last = next((op.outputs[0] for op in reversed(ops) if op.outputs), None)
        autocast_cast = call.fn not in CAST_FNS and any(
            aten_short(op.target) == "_to_copy" and op.inputs and op.outputs
            and op.inputs[0].dtype != op.outputs[0].dtype for op in ops)
        ints = [r.value for r in main.inputs if r.dtype is None and isinstance(r.value, int)
                and not isinstance(r.value, bool)]
        if aten_short(main.target) in NORM_ORDER_FIRST and main.inputs[1:2] \
                and main.inputs[1].dtype is None:
            ints = ints[1:] if isinstance(main.inputs[1].value, int) else ints  # p=2 is no dim
        node = OpNode(
            name=name, op=call.fn, target=main.target,
            atens=[aten_short(op.target) for op in compute],
            in_dtypes=[dtype_name(r.dtype) for r in entering],
            in_shapes=[r.shape for r in entering],
            compute_dtype=dtype_name(compute_dtype),
            out_dtype=dtype_name(last.dtype) if last else None,
            out_shape=last.shape if last else None,
            scalars=[["setitem", written]] if written is not None else
            [[aten_short(op.target), r.value] for op in compute for r in op.inputs
             if (r.value is not None or r.dtype is None) and not isinstance(r.value, bool)],
            keywords={r.keyword: r.value for r in main.inputs if r.keyword and r.dtype is None},
            params=[[r.producer[1], r.shape] for r in entering
                    if isinstance(r.producer, tuple) and r.producer[0] == "param"],
            module=call.module, module_type=call.module_type, file=call.file, line=call.line,
            column=call.column,
            autocast_enabled=call.autocast,
            autocast_cast=autocast_cast,
            explicit_cast=call.fn in CAST_FNS,
            banned=any(op.banned for op in ops),
            dims=ints if call.fn in DIM_ARG_OPS or aten_short(main.target).lstrip("_") in DIM_ARG_OPS else [],
            flags=[r.value for r in main.inputs if r.dtype is None and isinstance(r.value, bool)],
        )
        add_op(graph, node)
        for op in ops:
            node_of[op.index] = name
        for arg, ref in enumerate(entering):
            source = ref.producer
            if isinstance(source, int):
                viewed = view_of.get(source)
                source = node_of.get(source)
                if source and source != name and not graph.has_edge(source, name):
                    graph.add_edge(source, name, arg=arg)
                elif not source and (viewed is not None or ref.value is None):
                    _untracked(graph.nodes[name], viewed, ref)  # a known 0-d constant is in scalars
            elif isinstance(source, tuple) and source[0] == "input":
                graph.nodes[name].setdefault("sources", []).append(source[1])
            elif source is None and ref.value is None:
                _untracked(graph.nodes[name], None, ref)
    out_nodes = []
    for t in pytree.tree_leaves(outputs):
        if isinstance(t, torch.Tensor):
            producer = rec.producer.get(t)
            name = node_of.get(producer) if isinstance(producer, int) else None
            out_nodes.append({"node": name, "dtype": dtype_name(t.dtype), "shape": tuple(t.shape)})
    graph.graph["outputs"] = out_nodes
    return graph


#: reductions that take a dtype argument accumulate in it: their output dtype is what they compute in.
ACCUMULATE_IN_OUTPUT = {"sum", "nansum", "cumsum", "cumprod", "prod", "mean", "norm",
                        "linalg_vector_norm"}


def _compute_dtype(op):
    """The dtype an aten op computes in: a reduction's dtype argument; else its float inputs'
    dtype, or, when tensors of different float dtypes meet (fp16 scores + fp32 mask), the
    promoted dtype. 0-d tensors do not promote dimensioned ones (fp16 * fp32 0-d is fp16)."""
    out = op.outputs[0].dtype if op.outputs else None
    if aten_short(op.target) in ACCUMULATE_IN_OUTPUT and out is not None and out.is_floating_point:
        return out
    floats = [r for r in op.inputs if r.dtype is not None and r.dtype.is_floating_point]
    if not floats:
        return out
    dtypes = [r.dtype for r in floats if r.shape] or [r.dtype for r in floats]
    promoted = dtypes[0]
    for dtype in dtypes[1:]:
        promoted = torch.promote_types(promoted, dtype)
    return promoted


#: the aten ops ``t[index] = value`` writes with: a number into a view, a mask, an index
WRITES = {"copy_", "fill_", "index_put_", "index_put", "masked_fill_"}


def written_constant(call, rec) -> float | int | None:
    """The constant ``t[index] = value`` writes into t: the Python number as written (2**30,
    not the inf of t's dtype that torch made of it), or the value of a constant 0-d tensor
    (``torch.tensor(1e9)``). None for other calls and for values computed from the data."""
    if call.fn != "setitem":
        return None
    if call.assigned is not None:
        return call.assigned
    for op in (rec.ops[i] for i in call.ops):
        if aten_short(op.target) in WRITES and op.inputs:
            source = op.inputs[-1]
            made_by = source.producer if isinstance(source.producer, int) else None
            constant = source.producer is None or (
                made_by is not None and aten_short(rec.ops[made_by].target).startswith("lift_fresh"))
            if source.shape == () and constant and isinstance(source.value, (int, float)) \
                    and not isinstance(source.value, bool):
                return source.value
    return None


#: user-level calls that write a value into a tensor: nodes, so that PA107 meets the value
#: (aten's fill_ is transparent when torch's own code uses it to make zeros or ones)
VALUE_WRITES = {"fill_", "fill"}


def is_significant(call, rec) -> bool:
    shorts = [aten_short(rec.ops[i].target) for i in call.ops]
    if call.fn in CAST_FNS:
        return any(s == "_to_copy" for s in shorts)
    if call.fn in VALUE_WRITES:
        return bool(shorts)
    return any(s not in TRANSPARENT for s in shorts)


def _resolve(op, node_of):
    for ref in op.inputs:
        if ref.dtype is not None:
            return node_of.get(ref.producer) if isinstance(ref.producer, int) else None
    return None


def _viewed(op, view_of):
    """The parameter/buffer or model input a view or copy op reads, through earlier views."""
    for ref in op.inputs:
        if ref.dtype is not None:
            return ref.producer if isinstance(ref.producer, tuple) else view_of.get(ref.producer)
    return None


def _untracked(node: dict, viewed, ref):
    """An operand that is no node's output: a view of a buffer (``self.inv_freq[None, :]``:
    ``param_views``, which the value-range pass can bound) or a value nothing records
    (``untracked_operands``: the range pass must not take the op for one of one operand)."""
    if viewed is not None and viewed[0] == "param":
        node.setdefault("param_views", []).append([viewed[1], ref.shape])
    else:
        node["untracked_operands"] = node.get("untracked_operands", 0) + 1


def _unique(base: str, counts: dict) -> str:
    n = counts.get(base, 0)
    counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


# --------------------------------------------------------------------------- structure
def module_facts(model: torch.nn.Module) -> dict:
    """Shape facts of the modules the structure-only rules read (no forward needed)."""
    facts = {}
    # a tied matrix (embedding and output projection) is one weight under its first name
    weight_name = {id(p): n for n, p in reversed(list(model.named_parameters(remove_duplicate=False)))}
    for name, m in model.named_modules():
        kind = type(m).__name__
        if isinstance(m, torch.nn.Linear):
            facts[name] = {"type": kind, "in_features": m.in_features, "out_features": m.out_features,
                           "weight": weight_name.get(id(m.weight))}
        elif isinstance(m, torch.nn.Embedding):
            facts[name] = {"type": kind, "num_embeddings": m.num_embeddings,
                           "embedding_dim": m.embedding_dim, "weight": weight_name.get(id(m.weight))}
        elif isinstance(m, torch.nn.modules.conv._ConvNd):
            facts[name] = {"type": kind, "in_channels": m.in_channels,
                           "out_channels": m.out_channels, "groups": m.groups}
        elif isinstance(m, torch.nn.RNNBase):
            facts[name] = {"type": kind, "hidden_size": m.hidden_size, "input_size": m.input_size,
                           "num_layers": m.num_layers}
        elif isinstance(m, (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm,
                            torch.nn.GroupNorm)):
            facts[name] = {"type": kind}
    return facts


def structure_graph(model, target: Target):
    """A graph with one node per weight-bearing module, for runs without example inputs."""
    graph = new_graph(target=target)
    graph.graph["params"] = {n: tuple(p.shape) for n, p in model.named_parameters()}
    graph.graph["modules"] = module_facts(model)
    graph.graph["structure_only"] = True
    low = target.dtype
    for module, facts in graph.graph["modules"].items():
        kind = facts["type"]
        if "in_features" in facts:
            op, shape = "linear", (facts["out_features"], facts["in_features"])
        elif "num_embeddings" in facts:
            op, shape = "embedding", (facts["num_embeddings"], facts["embedding_dim"])
        elif "in_channels" in facts:
            op, shape = kind.lower().replace("transpose", "_transpose"), None
        elif "hidden_size" in facts:
            op, shape = kind.lower(), None
        else:
            continue
        params = [[f"{module}.weight" if module else "weight", shape]] if shape else []
        add_op(graph, OpNode(name=module or kind.lower(), op=op, target=f"module:{kind}",
                             compute_dtype=None if op == "embedding" else low,
                             params=params, module=module, module_type=kind))
    return graph
