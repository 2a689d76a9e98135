"""Which dtype the parameters an optimizer updates have, read statically.

An optimizer's ``params`` argument is followed to the module(s) whose ``.parameters()`` /
``.named_parameters()`` it takes (through param-group lists, comprehensions, ``filter``
and local names). A module's dtype where the optimizer is built comes from how it was
made and converted before: ``.half()``, ``.bfloat16()``, ``.float()``, ``.to(dtype)``,
``.to(dtype=...)``, ``.type(dtype)``, ``from_pretrained(torch_dtype=... / dtype=...)``,
``torch.nn`` layers built with ``dtype=``; a module conversion converts in place, so
``model.half()`` as a statement counts too. A name is followed to its assignments, a
function parameter to the calls of the function in the same file, ``self.model`` to its
assignments in the class. Anything else (a helper's result, ``get_peft_model(model)``, a
head assigned after the conversion, parameters frozen in a loop) makes the dtype unknown,
and unknown is never reported.
"""
from __future__ import annotations

from .registry import MAX_LINES  # noqa: F401 - the checks read it from here

import re
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import libcst as cst

from .values import (MAX_DEPTH, UNKNOWN, Possible, all_calls, argument, bound_values, call_index, calls_in,
                     conjoin, dtypes, evaluate, last_name,
                     enclosing_class, enclosing_function, path_condition, position, test_literals, truths)

#: torch.optim's optimizers (torch 2.13 ``torch/optim/__init__.py`` __all__)
TORCH_OPTIMIZERS = frozenset({"Adafactor", "Adadelta", "Adagrad", "Adam", "Adamax", "AdamW", "ASGD", "LBFGS",
                              "Muon", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam"})
#: methods of nn.Module that set the parameters' dtype (in place) and return the module
CONVERSIONS = {"half": "float16", "bfloat16": "bfloat16", "float": "float32", "double": "float64",
               "convert_to_fp16": "float16"}  # guided-diffusion / glide-text2im's UNet method
#: methods of nn.Module that convert with a dtype argument
DTYPE_CONVERSIONS = ("to", "type")
#: methods of nn.Module that return the module itself, its parameters' dtype unchanged
KEEPS_DTYPE = frozenset({"cuda", "cpu", "train", "eval", "xpu", "mps", "share_memory", "to_empty", "zero_grad",
                         "requires_grad_"})
#: methods that change which parameters a module trains (a new submodule, adapters, freezing)
MUTATIONS = frozenset({"requires_grad_", "add_module", "register_module", "apply", "add_adapter", "load_adapter",
                       "enable_adapters", "set_adapter", "init_adapter"})
#: helpers that, given a module, may change which of its parameters train or their dtype
MUTATING_HELPERS = re.compile(r"cast|peft|lora|adapter|freeze|quantiz|prepare_model", re.IGNORECASE)
#: wrappers whose ``.parameters()`` are the wrapped module's
WRAPPERS = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.DistributedDataParallel",
                      "torch.nn.parallel.distributed.DistributedDataParallel", "torch.nn.DataParallel",
                      "torch.nn.parallel.DataParallel", "torch.compile"})
#: from_pretrained arguments that load a quantized model: its trained parameters are adapters
QUANTIZED = ("quantization_config", "load_in_8bit", "load_in_4bit")
#: what a file must mention for parameter dtypes to be worth analysing: a low dtype and a
#: call of a torch.optim class. The LibCST metadata costs seconds on a large file (trainer.py),
#: and most files of a library build no optimizer.
LOW_PRECISION_WORDS = re.compile(r"\.half\b|float16|bfloat16|fp16|bf16|16-true")
OPTIMIZER_CALL = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(TORCH_OPTIMIZERS)))
#: Lightning's Trainer, however imported
LIGHTNING_TRAINERS = frozenset({"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer",
                                "lightning.pytorch.trainer.Trainer", "pytorch_lightning.trainer.Trainer",
                                "lightning.pytorch.trainer.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer"})
#: Lightning precisions that train the module's parameters in a low dtype, with no fp32 copy
PURE_PRECISIONS = {"bf16-true": "bfloat16", "16-true": "float16"}
#: strategies whose precision plugin is HalfPrecision (DeepSpeed and FSDP bring their own)
PLAIN_STRATEGIES = frozenset({"auto", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "single_device", "dp"})
#: longer files are skipped: generated code, and LibCST's metadata would take minutes
#: calls that take an optimizer and may keep fp32 master weights (or scale) for it:
#: deepspeed.initialize (fp16/bf16 optimizers), apex amp.initialize (O2), accelerate's
#: prepare (which may run DeepSpeed from its config)
MASTER_WEIGHT_WRAPPERS = frozenset({"initialize", "prepare", "prepare_optimizer", "FP16_Optimizer"})
#: optimizers with a fused kernel (``fused=True``; torch 2.13 sets ``_step_supports_amp_scaling``)
FUSED = frozenset({"Adam", "AdamW", "Adagrad", "SGD"})


@dataclass(frozen=True)
class OptimizerSite:
    """A ``torch.optim`` optimizer built in the script, with the dtypes its parameters may
    have there (``Possible``s whose origin is the conversion that made them)."""

    call: cst.Call
    #: the class, as ``torch.optim.AdamW``
    name: str
    param_dtypes: tuple

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


_SITES: WeakKeyDictionary = WeakKeyDictionary()


def mentions_an_optimizer(text: str) -> bool:
    """Whether a file may build a torch.optim optimizer over low-precision parameters:
    it names ``optim`` (the import), calls an optimizer class and names a low dtype. A file
    of more than MAX_LINES lines is generated code, not a training script: it is skipped
    (LibCST's metadata takes minutes there)."""
    return ("optim" in text and bool(OPTIMIZER_CALL.search(text)) and bool(LOW_PRECISION_WORDS.search(text))
            and text.count("\n") <= MAX_LINES)


def optimizer_sites(script) -> list[OptimizerSite]:
    """The script's torch.optim optimizers (computed once per script)."""
    if script not in _SITES:
        _SITES[script] = _find_sites(script) if mentions_an_optimizer(script.text) else []
    return _SITES[script]


def torch_optimizer_name(script, call: cst.Call) -> str | None:
    for name in script.names_of(call.func):
        parts = name.split(".")
        if parts[0] == "torch" and len(parts) >= 3 and parts[1] == "optim" and parts[-1] in TORCH_OPTIMIZERS:
            return f"torch.optim.{parts[-1]}"
    return None


def _find_sites(script) -> list:
    sites = []
    for call in all_calls(script):
        if _last_name(call.func) not in TORCH_OPTIMIZERS:
            continue  # read without metadata: most calls are not an optimizer's
        name = torch_optimizer_name(script, call)
        if name is None:
            continue
        params = argument(call, "params", 0)
        if params is None or _handed_to_a_wrapper(script, call):
            continue
        possible = []
        for module, condition in modules_of_params(script, params):
            possible += conjoin(module_dtypes(script, module, position(script, call)), condition)
            if _in_configure_optimizers(script, call) and (_chain_root(module) or "").split(".")[0] == "self":
                possible += conjoin(lightning_dtypes(script), condition)
        sites.append(OptimizerSite(call, name, tuple(possible)))
    return sites


def _in_configure_optimizers(script, call) -> bool:
    function = enclosing_function(script, call)
    return function is not None and function.name.value == "configure_optimizers"


_LIGHTNING: WeakKeyDictionary = WeakKeyDictionary()


def lightning_dtypes(script) -> list:
    """The parameter dtypes a Lightning ``Trainer(precision="bf16-true" / "16-true")`` in
    this file trains with: its precision plugin converts the module
    (``HalfPrecision.convert_module``: ``module.to(dtype=...)``) in ``Strategy.setup`` before
    ``setup_optimizers`` calls ``configure_optimizers``. Origin: the precision argument.
    A strategy other than a plain one (DeepSpeed, FSDP, a variable) is not followed."""
    if script not in _LIGHTNING:
        found = []
        for call in call_index(script).by_name.get("Trainer", ()):
            if not script.names_of(call.func) & LIGHTNING_TRAINERS:
                continue
            strategy = argument(call, "strategy")
            if strategy is not None and not (isinstance(strategy, cst.SimpleString)
                                             and strategy.evaluated_value in PLAIN_STRATEGIES):
                continue
            precision = argument(call, "precision")
            if precision is None:
                continue
            for p in evaluate(script, precision, _string_literal):
                if p.value in PURE_PRECISIONS:
                    found.append(Possible(PURE_PRECISIONS[p.value], p.condition, precision))
        _LIGHTNING[script] = found
    return _LIGHTNING[script]


def _string_literal(script, expr):
    return expr.evaluated_value if isinstance(expr, cst.SimpleString) else UNKNOWN


def _handed_to_a_wrapper(script, call) -> bool:
    """Whether the optimizer ``call`` makes is passed to DeepSpeed, apex or accelerate: what
    then updates the parameters is not known from here."""
    holder = script.parents.get(call)
    if isinstance(holder, cst.Arg):
        outer = script.parents.get(holder)
        if isinstance(outer, cst.Call) and _last_name(outer.func) in MASTER_WEIGHT_WRAPPERS:
            return True
    if not isinstance(holder, cst.Assign):  # opt = AdamW(...): the call is the value
        return False
    names = {_plain(t.target) for t in holder.targets} - {None}
    by_name = call_index(script).by_name
    wrappers = [c for w in MASTER_WEIGHT_WRAPPERS for c in by_name.get(w, ())]
    return any(_plain(arg.value) in names for other in wrappers for arg in other.args)


_last_name = last_name


# ----------------------------------------------------------------------------- params -> modules
#: tensor methods that return a converted copy: ``[p.detach().clone().float() for p in
#: net.parameters()]`` are fp32 master copies that an optimizer over them updates in fp32
COPYING_CONVERSIONS = frozenset({"float", "double", "half", "bfloat16", "to", "type"})


def modules_of_params(script, params, depth: int = 0) -> list:
    """(module expression, condition) for each module whose parameters ``params`` holds."""
    if depth > MAX_DEPTH:
        return []
    calls = _calls_within(params)
    if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in COPYING_CONVERSIONS for c in calls):
        return []  # new tensors in a dtype of their own (fp32 master copies), not the module's
    found = []
    for call in calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
            found.append((func.value, frozenset()))
    if not found:
        for name in _names_within(params):
            for value, condition in bound_values(script, name, depth + 1):
                found += [(m, c | condition) for m, c in modules_of_params(script, value, depth + 1)]
    return found


def _calls_within(node) -> list:
    collector = _Collect(cst.Call)
    node.visit(collector)
    return collector.found


def _names_within(node) -> list:
    if isinstance(node, cst.Name):
        return [node]
    collector = _Collect(cst.Name)
    node.visit(collector)
    return [n for n in collector.found if n.value not in ("True", "False", "None")]


class _Collect(cst.CSTVisitor):
    def __init__(self, kind):
        self.kind, self.found = kind, []

    def on_visit(self, node):
        if isinstance(node, self.kind):
            self.found.append(node)
        return True


# ----------------------------------------------------------------------------- module -> dtypes
def module_dtypes(script, module, at, depth: int = 0) -> list:
    """The dtypes the module ``module`` (an expression) may have at position ``at``."""
    if depth > MAX_DEPTH:
        return [Possible(UNKNOWN)]
    if isinstance(module, cst.Call):
        return _call_dtypes(script, module, at, depth)
    if isinstance(module, cst.IfExp):
        (literal,) = test_literals(script, module.test)
        return (conjoin(module_dtypes(script, module.body, at, depth + 1), {literal})
                + conjoin(module_dtypes(script, module.orelse, at, depth + 1), {(literal[0], not literal[1])}))
    if isinstance(module, cst.Name):
        return _name_dtypes(script, module, at, depth)
    if _is_self_attribute(module):
        return _attribute_dtypes(script, module, at, depth)
    if isinstance(module, cst.Attribute):  # model.encoder: a submodule converts with its model
        return module_dtypes(script, module.value, at, depth + 1)
    return [Possible(UNKNOWN)]


def _call_dtypes(script, call: cst.Call, at, depth) -> list:
    func = call.func
    names = script.names_of(func)
    if names & WRAPPERS:
        inner = argument(call, "module", 0) or argument(call, "model", 0)
        return module_dtypes(script, inner, at, depth + 1) if inner is not None else [Possible(UNKNOWN)]
    if not isinstance(func, cst.Attribute):
        if any(n.startswith("torch.nn.") for n in names):
            return _constructor_dtypes(script, call)
        return [Possible(UNKNOWN)]
    method = func.attr.value
    if method in CONVERSIONS:
        return [Possible(CONVERSIONS[method], origin=call)]
    if method in DTYPE_CONVERSIONS:
        converted = conversion_dtypes(script, call)
        if converted is not None:
            return converted
        return module_dtypes(script, func.value, at, depth + 1)
    if method in KEEPS_DTYPE:
        return module_dtypes(script, func.value, at, depth + 1)
    if method == "from_pretrained":
        given = argument(call, "torch_dtype") or argument(call, "dtype")
        if given is None or any(argument(call, k) is not None for k in QUANTIZED):
            return [Possible(UNKNOWN)]
        return [Possible(p.value, p.condition, call) for p in dtypes(script, given, depth + 1)]
    if any(n.startswith("torch.nn.") for n in names):
        return _constructor_dtypes(script, call)
    return [Possible(UNKNOWN)]


def _constructor_dtypes(script, call) -> list:
    """``nn.Linear(4, 4, dtype=torch.bfloat16)``: the layer's parameters are made bf16."""
    given = argument(call, "dtype")
    if given is None:
        return [Possible(UNKNOWN)]
    return [Possible(p.value, p.condition, call) for p in dtypes(script, given)]


def conversion_dtypes(script, call: cst.Call) -> list | None:
    """The dtypes ``m.to(...)`` / ``m.type(...)`` converts to, as Possibles whose origin is
    the call; None when it converts no dtype (``m.to(device)``); [UNKNOWN] when unknowable."""
    given = argument(call, "dtype")
    if given is None and call.func.attr.value == "type":
        given = argument(call, "dst_type", 0)
    if given is not None:
        return [Possible(p.value, p.condition, call) for p in dtypes(script, given)]
    plain = [a.value for a in call.args if a.keyword is None]
    if any(a.star for a in call.args):
        return [Possible(UNKNOWN)]
    for value in plain:
        possible = dtypes(script, value)
        if any(p.value is not UNKNOWN for p in possible):
            return [Possible(p.value, p.condition, call) for p in possible]
    if all(_device_like(script, value) for value in plain):
        return None
    return [Possible(UNKNOWN)]


def _device_like(script, expr) -> bool:
    """A ``.to()`` argument that names a device: a string, ``torch.device(...)``, a name
    or attribute about a device or rank."""
    if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.Integer)):
        return True
    if isinstance(expr, cst.Call):
        return bool(script.names_of(expr.func) & {"torch.device"}) or (
            isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("device", "current_device"))
    last = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return bool(re.search(r"device|rank|gpu|cuda", last, re.IGNORECASE))


def _name_dtypes(script, name: cst.Name, at, depth) -> list:
    """A module held in a name: its value where it was assigned (or passed in), then the
    in-place conversions of that name before ``at``."""
    scope_root = enclosing_function(script, name) or script.module
    found = []
    bindings = bound_values(script, name, depth + 1)
    if not bindings:  # a parameter with no caller here, an import: only its conversions here count
        return _apply_events(script, name.value, scope_root, (0, 0), at, [Possible(UNKNOWN)])
    for value, condition in bindings:
        bound_at = position(script, value)
        if _is_parameter_value(script, value, scope_root):
            bound_at = (0, 0)
            value_at = position(script, _call_of_argument(script, value)) if _call_of_argument(script, value) else at
        else:
            value_at = bound_at
        start = conjoin(module_dtypes(script, value, value_at, depth + 1), condition)
        found += _apply_events(script, name.value, scope_root, bound_at, at, start)
    return found


def _is_parameter_value(script, value, scope_root) -> bool:
    """Whether ``value`` (from ``bound_values``) came from another scope (a call's
    argument or a default), so the name's in-place conversions run from the function's start."""
    return (enclosing_function(script, value) or script.module) is not scope_root


def _call_of_argument(script, value):
    parent = script.parents.get(value)
    while parent is not None and not isinstance(parent, cst.Call):
        parent = script.parents.get(parent)
    return parent


def _apply_events(script, name: str, scope_root, after, before, start: list) -> list:
    """``start`` changed by the in-place conversions and mutations of ``name`` in
    ``scope_root`` between the positions ``after`` and ``before``."""
    possible = list(start)
    for event, kind in _events(script, name, scope_root):
        at = position(script, event)
        if not after < at < before:
            continue
        if kind == "rebind":
            break
        if _leaves_early(script, event, before):
            continue
        condition = path_condition(script, event)
        if kind == "mutate":  # which parameters train is unknown from here on, conversions or not
            return [Possible(UNKNOWN)]
        converted = [p for p in (kind or []) if p is not None]
        new = conjoin(converted, condition)
        if not condition:
            possible = new
        elif len(condition) == 1:
            ((code, truth),) = condition
            possible = new + conjoin(possible, {(code, not truth)})
        else:
            possible = new + possible
    return possible


_EVENTS: WeakKeyDictionary = WeakKeyDictionary()


def _events(script, name: str, scope_root) -> list:
    """(node, what) for the statements of ``scope_root`` (not nested functions) that act
    on the module held in ``name``: a conversion (a list of Possibles), a mutation that
    makes its trained parameters unknown ("mutate"), or a new binding ("rebind")."""
    per_script = _EVENTS.setdefault(script, {})
    key = (name, id(scope_root))
    if key not in per_script:
        per_script[key] = _scan_events(script, name, scope_root)
    return per_script[key]


def _scan_events(script, name: str, scope_root) -> list:
    events = []
    in_scope = calls_in(script, None if scope_root is script.module else scope_root)
    for call in in_scope:
        func = call.func
        if not isinstance(func, cst.Attribute) or _chain_root(func.value) != name:
            continue
        if not _chain_keeps_module(func.value):
            continue
        method = func.attr.value
        if method in CONVERSIONS:
            events.append((call, [Possible(CONVERSIONS[method], origin=call)]))
        elif method in DTYPE_CONVERSIONS:
            converted = conversion_dtypes(script, call)
            if converted is not None:
                events.append((call, converted))
        elif method in MUTATIONS:
            events.append((call, "mutate"))
        elif method in ("parameters", "named_parameters") and _is_loop_iterable(script, call):
            events.append((call, "mutate"))  # for p in model.parameters(): p.requires_grad = False / p.data = ...
    for call in in_scope:
        # cast_training_params(unet, dtype=torch.float32), freeze(model), apply_lora(model)
        helper = _last_name(call.func) or ""
        if MUTATING_HELPERS.search(helper) and any(_plain(arg.value) == name for arg in call.args):
            events.append((call, "mutate"))
    collector = _Collect((cst.AssignTarget, cst.AugAssign))
    scope_body = scope_root.body if isinstance(scope_root, cst.FunctionDef) else scope_root
    scope_body.visit(collector)
    for node in collector.found:
        target = node.target
        if (enclosing_function(script, node) or script.module) is not scope_root:
            continue
        if (isinstance(target, cst.Name) and target.value == name) or _dotted(target) == name:
            statement = script.parents.get(node)
            value = getattr(statement, "value", None)
            if value is None or not _same_module(value, name):
                events.append((target, "rebind"))
        elif (isinstance(target, cst.Attribute) and _chain_root(target.value) == name
              and _chain_root(target.value) == _plain(target.value) and isinstance(getattr(
                  script.parents.get(node), "value", None), cst.Call)):
            events.append((target, "mutate"))  # model.lm_head = nn.Linear(...): a new fp32 head
    return sorted(events, key=lambda e: position(script, e[0]))


def _plain(expr) -> str | None:
    """``model`` or ``self.model`` for exactly that expression, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    return _dotted(expr)


def _same_module(value, name) -> bool:
    """``model = model.half()``: the same module object, converted in place."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
        _chain_root(value.func.value) == name and _chain_keeps_module(value.func.value))


def _is_loop_iterable(script, call) -> bool:
    parent = script.parents.get(call)
    return isinstance(parent, cst.For) and parent.iter is call


def _chain_root(expr) -> str | None:
    """``model`` for ``model.cuda().half``; ``self.model`` for ``self.model.to(...)``."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and _dotted(expr) is None:
            expr = expr.value
        else:
            break
    if isinstance(expr, cst.Name):
        return expr.value
    return _dotted(expr)


def _dotted(expr) -> str | None:
    """``self.model`` (only ``self.<name>``), else None."""
    if _is_self_attribute(expr):
        return f"self.{expr.attr.value}"
    return None


def _chain_keeps_module(expr) -> bool:
    """Whether every call in ``model.cuda().train()`` returns the module itself."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value not in KEEPS_DTYPE | set(CONVERSIONS) | set(DTYPE_CONVERSIONS):
            return False
        expr = expr.func.value
    return isinstance(expr, cst.Name) or _is_self_attribute(expr)


def _is_self_attribute(expr) -> bool:
    return (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
            and expr.value.value == "self")


def _attribute_dtypes(script, attribute: cst.Attribute, at, depth) -> list:
    """``self.model`` read in a method: its assignment earlier in the same method, else in
    ``__init__``; then the in-place conversions of ``self.model`` in those methods."""
    cls = enclosing_class(script, attribute)
    method = enclosing_function(script, attribute)
    if cls is None or method is None:
        return [Possible(UNKNOWN)]
    dotted = f"self.{attribute.attr.value}"
    methods = [method] + [f for f in cls.body.body if isinstance(f, cst.FunctionDef)
                          and f.name.value == "__init__" and f is not method]
    for where in methods:
        limit = at if where is method else (10**9, 0)
        assigned = [t for t in _self_assignments(script, where, dotted) if position(script, t) < limit]
        if not assigned:
            continue
        target = assigned[-1]
        value = script.parents[script.parents[target]].value  # self.model = value
        start = conjoin(module_dtypes(script, value, position(script, target), depth + 1),
                        path_condition(script, target))
        found = _apply_events(script, dotted, where, position(script, target), limit, start)
        if where is not method:
            found = _apply_events(script, dotted, method, (0, 0), at, found)
        return found
    return [Possible(UNKNOWN)]


def _self_assignments(script, function, dotted: str) -> list:
    collector = _Collect(cst.AssignTarget)
    function.body.visit(collector)
    return sorted((n.target for n in collector.found
                   if _dotted(n.target) == dotted and isinstance(script.parents.get(script.parents.get(n.target)), cst.Assign)),
                  key=lambda t: position(script, t))


# ----------------------------------------------------------------------------- objects
def constructions(script, expr, depth: int = 0) -> list:
    """(call, condition) for each call that may have made the object ``expr`` holds: a
    name followed to its assignments (and a parameter to the calls' arguments),
    ``self.x`` to its assignments anywhere in the class. [] when unknown."""
    if depth > MAX_DEPTH or expr is None:
        return []
    if isinstance(expr, cst.Call):
        return [(expr, frozenset())]
    if isinstance(expr, cst.IfExp):
        (literal,) = test_literals(script, expr.test)
        return ([(c, k | {literal}) for c, k in constructions(script, expr.body, depth + 1)]
                + [(c, k | {(literal[0], not literal[1])}) for c, k in constructions(script, expr.orelse, depth + 1)])
    found = []
    if isinstance(expr, cst.Name):
        for value, condition in bound_values(script, expr, depth + 1):
            found += [(c, k | condition) for c, k in constructions(script, value, depth + 1)]
    elif _is_self_attribute(expr):
        cls = enclosing_class(script, expr)
        if cls is None:
            return []
        for method in cls.body.body:
            if isinstance(method, cst.FunctionDef):
                for target in _self_assignments(script, method, f"self.{expr.attr.value}"):
                    value = script.parents[script.parents[target]].value
                    found += [(c, k | path_condition(script, target)) for c, k in constructions(script, value, depth + 1)]
    return found


def unfused_paths(script, call, short_name: str) -> list:
    """The conditions under which optimizer ``call`` is not fused ([] when it always is, or
    when a ``**kwargs`` may say)."""
    if any(arg.star == "**" for arg in call.args):
        return []  # AdamW(groups, **extra_args): fused may be in there (nanoGPT)
    given = argument(call, "fused") if short_name in FUSED else None
    if given is None:
        return [frozenset()]
    return [p.condition for p in truths(script, given) if p.value is False]


def _leaves_early(script, node, before) -> bool:
    """Whether ``node`` sits in an ``if``/``else`` block that ends with ``return`` or
    ``raise`` and does not hold the position ``before`` (an evaluation-only branch: what it
    converts never reaches the code after it)."""
    parent = script.parents.get(node)
    while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Module)):
        if isinstance(parent, cst.IndentedBlock) and isinstance(script.parents.get(parent), (cst.If, cst.Else)):
            span = script.positions[parent]
            if (span.start.line, span.start.column) <= before <= (span.end.line, span.end.column):
                parent = script.parents.get(parent)
                continue
            last = parent.body[-1] if parent.body else None
            if isinstance(last, cst.SimpleStatementLine) and any(
                    isinstance(small, (cst.Return, cst.Raise)) for small in last.body):
                return True
        parent = script.parents.get(parent)
    return False
