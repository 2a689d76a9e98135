"""Which dtype the parameters an optimizer updates have, read statically.

An optimizer's ``params`` argument is followed to the module(s) whose ``.parameters()`` /
``.named_parameters()`` it takes (through param-group lists, comprehensions, ``filter``
and local names). A module's dtype where the optimizer is built comes from how it was
made and converted before: ``.half()``, ``.bfloat16()``, ``.float()``, ``.to(dtype)``,
``.to(dtype=...)``, ``.type(dtype)``, ``from_pretrained(torch_dtype=... / dtype=...)``,
``torch.nn`` layers built with ``dtype=``; a module conversion converts in place, so
``model.half()`` as a statement counts too. A name is followed to its assignments
(``lookup.bound_values``), a function parameter to the calls of the function in the same
file, ``self.model`` to its assignments in the class. Anything else (a helper's result,
``get_peft_model(model)``, a head assigned after the conversion, parameters frozen in a
loop) makes the dtype unknown, and unknown is never reported.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .frameworks.lightning import PLAIN_STRATEGIES, PRECISIONS, TRAINERS
from .guards import TRUE, UNKNOWN, Possible, conjoin
from .lookup import MAX_DEPTH, bound_values, dtypes, evaluate, path_condition, strings, test_literal, truths
from .syntax import FUNCTIONS, argument, key_of, last_name, own_returns, self_attribute, unpacks_keywords

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
#: call of a torch.optim class (most files of a library build no optimizer)
LOW_PRECISION_WORDS = re.compile(r"\.half\b|float16|bfloat16|fp16|bf16|16-true")
OPTIMIZER_CALL = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(TORCH_OPTIMIZERS)))
TRAINER_CALL = re.compile(r"Trainer\s*\(")
#: calls that take an optimizer and may keep fp32 master weights (or scale) for it:
#: deepspeed.initialize (fp16/bf16 optimizers), apex amp.initialize (O2), accelerate's
#: prepare (which may run DeepSpeed from its config)
MASTER_WEIGHT_WRAPPERS = frozenset({"initialize", "prepare", "prepare_optimizer", "FP16_Optimizer",
                                    "FP16_UnfusedOptimizer"})
#: optimizers with a fused kernel (``fused=True``; torch 2.13 sets ``_step_supports_amp_scaling``)
FUSED = frozenset({"Adam", "AdamW", "Adagrad", "SGD"})
#: tensor methods that return a converted copy: ``[p.detach().clone().float() for p in
#: net.parameters()]`` are fp32 master copies that an optimizer over them updates in fp32
COPYING_CONVERSIONS = frozenset({"float", "double", "half", "bfloat16", "to", "type"})


@dataclass(frozen=True)
class OptimizerSite:
    """A ``torch.optim`` optimizer built in the script, or one a framework builds for it
    (the HF Trainer's, ``built_by`` saying so), with the dtypes its parameters may have
    there (``Possible``s whose origin is the conversion that made them)."""

    call: ast.Call
    #: the class, as ``torch.optim.AdamW``
    name: str
    param_dtypes: tuple
    #: for a framework's optimizer: who builds it ("the Trainer at line 40"), the expression
    #: of its eps (None: the default), the guards under which it is not fused
    built_by: str | None = None
    eps: object = None
    unfused: tuple = ()

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def named(self) -> str:
        """The optimizer as a finding names it (``AdamW``, ``AdamW (built by the Trainer at line 40)``)."""
        return f"{self.short_name} (built by {self.built_by})" if self.built_by else self.short_name


def mentions_an_optimizer(text: str) -> bool:
    """Whether a file may build a torch.optim optimizer over low-precision parameters:
    it names ``optim`` (the import), calls an optimizer class and names a low dtype; or it
    builds an HF Trainer (which builds one) and names a low dtype."""
    built = ("optim" in text and bool(OPTIMIZER_CALL.search(text))) or bool(TRAINER_CALL.search(text))
    return built and bool(LOW_PRECISION_WORDS.search(text))


def optimizer_sites(script) -> list[OptimizerSite]:
    """The script's torch.optim optimizers (found once per script)."""
    return script.once(_find_sites)


def torch_optimizer_name(script, call: ast.Call) -> str | None:
    for name in sorted(script.names_of(call.func)):
        parts = name.split(".")
        if parts[0] == "torch" and len(parts) >= 3 and parts[1] == "optim" and parts[-1] in TORCH_OPTIMIZERS:
            return f"torch.optim.{parts[-1]}"
    return None


def _find_sites(script) -> list:
    if not mentions_an_optimizer(script.text):
        return []
    sites = []
    for call in script.index.calls:
        if last_name(call.func) not in TORCH_OPTIMIZERS:
            continue
        name = torch_optimizer_name(script, call)
        if name is None:
            continue
        params = argument(call, "params", 0)
        if params is None or _handed_to_a_wrapper(script, call):
            continue
        possible = []
        for module, guard in modules_of_params(script, params):
            possible += conjoin(module_dtypes(script, module, script.position(call)), guard)
            if _in_configure_optimizers(script, call) and (_chain_root(module) or "").split(".")[0] == "self":
                possible += conjoin(lightning_dtypes(script), guard)
        sites.append(OptimizerSite(call, name, tuple(possible)))
    return sites + _trainer_sites(script)


def is_hf_trainer(script, call) -> bool:
    """``Trainer(...)``, ``SFTTrainer(...)``: a Trainer class of transformers or TRL."""
    from .frameworks.hf_trainer import PACKAGES

    last = last_name(call.func) or ""
    return last.endswith("Trainer") and any(n.split(".")[0] in PACKAGES and n.endswith("Trainer")
                                            for n in script.names_of(call.func))


def _trainer_sites(script) -> list:
    """The optimizers the HF Trainers of this file build (``frameworks/hf_trainer.py``):
    where no optimizer is passed, the arguments are one construction of this file, and
    neither DeepSpeed nor FSDP takes the optimizer over; under ``fp16=True`` the Trainer
    raises before any update (PA405), so only the paths where fp16 is false count."""
    from .frameworks import hf_trainer as hf

    sites = []
    for call in script.index.calls:
        if not is_hf_trainer(script, call) or any(argument(call, k) is not None for k in ("optimizers", "peft_config")):
            continue
        model, args = argument(call, "model", 0), argument(call, "args", 1)
        made = [(c, g) for c, g in constructions(script, args)
                if any(n.split(".")[0] in hf.PACKAGES for n in script.names_of(c.func))] if args is not None else []
        if model is None or len(made) != 1 or unpacks_keywords(made[0][0]) \
                or any(argument(made[0][0], k) is not None for k in hf.DELEGATES):
            continue
        arguments, guard = made[0]
        fp16 = argument(arguments, "fp16")
        paths = [guard | p.guard for p in truths(script, fp16) if p.value is False] if fp16 is not None else [guard]
        dtypes_there = [q for path in paths for q in conjoin(module_dtypes(script, model, script.position(call)), path)]
        for optimizer, unfused in _trainer_optimizers(script, argument(arguments, "optim"), hf):
            sites.append(OptimizerSite(call, f"torch.optim.{optimizer}", tuple(dtypes_there),
                                       built_by=f"the Trainer at line {call.lineno}",
                                       eps=argument(arguments, "adam_epsilon"), unfused=tuple(unfused)))
    return sites


def _trainer_optimizers(script, optim, hf) -> list:
    """(torch.optim class, guards under which it is not fused) for the ``optim`` given."""
    if optim is None:
        return [("AdamW", [frozenset({(hf.UNFUSED_DEFAULT, True)})])]
    if isinstance(optim, ast.Attribute) and optim.attr.lower() in hf.OPTIMS:  # OptimizerNames.ADAMW_TORCH
        values = [Possible(optim.attr.lower())]
    else:
        values = strings(script, optim)
    found = {}
    for value in values:
        if not value.known or value.value not in hf.OPTIMS:
            return []  # another optimizer (bitsandbytes, Adafactor, ...) on some path: not torch.optim's
        cls, fused = hf.OPTIMS[value.value]
        found.setdefault(cls, [])
        if not fused:
            found[cls].append(value.guard)
    return list(found.items())


def _in_configure_optimizers(script, call) -> bool:
    function = script.index.function_of(call)
    return function is not None and function.name == "configure_optimizers"


def lightning_dtypes(script) -> list:
    """The parameter dtypes a Lightning ``Trainer(precision="bf16-true" / "16-true")`` in
    this file trains with: its precision plugin converts the module
    (``HalfPrecision.convert_module``: ``module.to(dtype=...)``) in ``Strategy.setup`` before
    ``setup_optimizers`` calls ``configure_optimizers``. Origin: the precision argument.
    A strategy other than a plain one (DeepSpeed, FSDP, a variable) is not followed."""
    return script.once(_lightning_dtypes)


def _lightning_dtypes(script) -> list:
    found = []
    for call, precisions in lightning_trainers(script):
        strategy = argument(call, "strategy")
        if strategy is not None and not (isinstance(strategy, ast.Constant) and strategy.value in PLAIN_STRATEGIES):
            continue
        found += [Possible(PRECISIONS[p.value].params, p.guard, argument(call, "precision")) for p in precisions
                  if p.known and p.value in PRECISIONS and PRECISIONS[p.value].params in ("float16", "bfloat16")]
    return found


def lightning_trainers(script) -> list:
    """(call, precision Possibles) of each Lightning ``Trainer(...)`` with a ``precision=``
    in this file (the spellings as given: ``"16-mixed"``, ``16``)."""
    found = []
    for call in script.index.by_name.get("Trainer", ()):
        precision = argument(call, "precision")
        if precision is not None and script.names_of(call.func) & TRAINERS:
            found.append((call, evaluate(script, precision, _spelling)))
    return found


def _spelling(script, expr):
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, int)) and not isinstance(expr.value, bool):
        return expr.value
    return UNKNOWN


def _handed_to_a_wrapper(script, call) -> bool:
    """Whether the optimizer ``call`` makes is passed to DeepSpeed, apex or accelerate: what
    then updates the parameters is not known from here."""
    parents = script.index.parents
    holder = parents.get(call)
    outer = parents.get(holder) if isinstance(holder, ast.keyword) else holder
    if isinstance(outer, ast.Call) and (holder is not outer or any(a is call for a in outer.args)) \
            and _wraps(script, outer):
        return True
    if not isinstance(holder, ast.Assign):  # opt = AdamW(...): the call is the value
        return False
    names = {_plain(t) for t in holder.targets} - {None}
    by_name = script.index.by_name
    wrappers = [c for c in script.index.calls if _wraps(script, c)] if any(
        by_name.get(w) for w in MASTER_WEIGHT_WRAPPERS) or "import" in script.text else []
    return any(_plain(_value(arg)) in names for other in wrappers for arg in (*other.args, *other.keywords))


def _wraps(script, call) -> bool:
    """Whether ``call`` is one of the wrappers, by its name or the name it was imported
    under (``from deepspeed.runtime.fp16.fused_optimizer import FP16_Optimizer as W``)."""
    if last_name(call.func) in MASTER_WEIGHT_WRAPPERS:
        return True
    return any(n.rsplit(".", 1)[-1] in MASTER_WEIGHT_WRAPPERS for n in script.names_of(call.func))


def _value(arg):
    return arg.value if isinstance(arg, (ast.Starred, ast.keyword)) else arg


# ----------------------------------------------------------------------------- params -> modules
def modules_of_params(script, params, depth: int = 0) -> list:
    """(module expression, guard) for each module whose parameters ``params`` holds."""
    if depth > MAX_DEPTH:
        return []
    if isinstance(params, ast.IfExp):  # chain(unet.parameters(), te.parameters()) if args.train_te else ...
        literal = test_literal(script, params.test)
        return ([(m, g | {literal}) for m, g in modules_of_params(script, params.body, depth + 1)]
                + [(m, g | {(literal[0], not literal[1])}) for m, g in modules_of_params(script, params.orelse, depth + 1)])
    nodes = list(ast.walk(params))
    calls = [n for n in nodes if isinstance(n, ast.Call)]
    if any(isinstance(c.func, ast.Attribute) and c.func.attr in COPYING_CONVERSIONS for c in calls):
        return []  # new tensors in a dtype of their own (fp32 master copies), not the module's
    found = [(c.func.value, TRUE) for c in calls
             if isinstance(c.func, ast.Attribute) and c.func.attr in ("parameters", "named_parameters")]
    if not found:
        for name in (n for n in nodes if isinstance(n, ast.Name)):
            for value, guard in bound_values(script, name, depth + 1):
                if value is not None:
                    found += [(m, g | guard) for m, g in modules_of_params(script, value, depth + 1)]
    return found


# ----------------------------------------------------------------------------- module -> dtypes
def module_dtypes(script, module, at, depth: int = 0) -> list:
    """The dtypes the module ``module`` (an expression) may have at position ``at``."""
    if depth > MAX_DEPTH:
        return [Possible(UNKNOWN)]
    if isinstance(module, ast.Call):
        return _call_dtypes(script, module, at, depth)
    if isinstance(module, ast.IfExp):
        literal = test_literal(script, module.test)
        return (conjoin(module_dtypes(script, module.body, at, depth + 1), frozenset({literal}))
                + conjoin(module_dtypes(script, module.orelse, at, depth + 1),
                          frozenset({(literal[0], not literal[1])})))
    if isinstance(module, ast.Name):
        return _name_dtypes(script, module, at, depth)
    if self_attribute(module):
        return _attribute_dtypes(script, module, at, depth)
    if isinstance(module, ast.Attribute):  # model.encoder: a submodule converts with its model
        root = module
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):  # pipeline.unet: not converted by pipeline.vae.to(...)
            return _name_dtypes(script, root, at, depth, part=key_of(module))
        return module_dtypes(script, module.value, at, depth + 1)
    return [Possible(UNKNOWN)]


def _call_dtypes(script, call: ast.Call, at, depth) -> list:
    func = call.func
    names = script.names_of(func)
    if names & WRAPPERS:
        inner = argument(call, "module", 0) or argument(call, "model", 0)
        return module_dtypes(script, inner, at, depth + 1) if inner is not None else [Possible(UNKNOWN)]
    helper = _local_function(script, call)
    if helper is not None:
        returned = _returned_dtypes(script, helper, depth)
        if returned and all(p.known for p in returned):
            return returned
    if not isinstance(func, ast.Attribute):
        if any(n.startswith("torch.nn.") for n in names):
            return _constructor_dtypes(script, call)
        return _factory_dtypes(script, call, depth)
    method = func.attr
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
        return [Possible(p.value, p.guard, call) for p in dtypes(script, given, depth + 1)]
    if any(n.startswith("torch.nn.") for n in names):
        return _constructor_dtypes(script, call)
    return _factory_dtypes(script, call, depth)


def _factory_dtypes(script, call: ast.Call, depth) -> list:
    """``load_model(path, dtype=torch.float16)``, ``build(cfg, torch_dtype=...)``: a model
    factory told which dtype to load the weights in (as ``from_pretrained`` is); a model
    loaded quantized is unknown (its trained parameters are adapters)."""
    given = argument(call, "torch_dtype") or argument(call, "dtype")
    if given is None or any(argument(call, k) is not None for k in QUANTIZED):
        return [Possible(UNKNOWN)]
    return [Possible(p.value, p.guard, call) for p in dtypes(script, given, depth + 1)]


def _local_function(script, call: ast.Call):
    """The function of this file ``call`` calls (``build_model(cfg)``, ``self.build()``)."""
    index, func = script.index, call.func
    if isinstance(func, ast.Name):
        return index.functions.get(func.id)
    if self_attribute(func) is not None:
        cls = index.class_of(call)
        if cls is not None:
            return index.methods.get(cls.name, {}).get(func.attr)
    return None


def _returned_dtypes(script, function, depth) -> list:
    """The dtypes of the modules ``function`` returns, each under its return's path
    condition ([] when it returns nothing this analysis can read)."""
    if depth > MAX_DEPTH:
        return []
    found = []
    for node in own_returns(function):
        if node.value is not None:
            found += conjoin(module_dtypes(script, node.value, script.position(node), depth + 1),
                             path_condition(script, node))
    return found


def _constructor_dtypes(script, call) -> list:
    """``nn.Linear(4, 4, dtype=torch.bfloat16)``: the layer's parameters are made bf16."""
    given = argument(call, "dtype")
    if given is None:
        return [Possible(UNKNOWN)]
    return [Possible(p.value, p.guard, call) for p in dtypes(script, given)]


def conversion_dtypes(script, call: ast.Call) -> list | None:
    """The dtypes ``m.to(...)`` / ``m.type(...)`` converts to, as Possibles whose origin is
    the call; None when it converts no dtype (``m.to(device)``); [UNKNOWN] when unknowable."""
    given = argument(call, "dtype")
    if given is None and call.func.attr == "type":
        given = argument(call, "dst_type", 0)
    if given is not None:
        return [Possible(p.value, p.guard, call) for p in dtypes(script, given)]
    if any(isinstance(a, ast.Starred) for a in call.args):
        return [Possible(UNKNOWN)]
    for value in call.args:
        possible = dtypes(script, value)
        if any(p.known and p.value is not None for p in possible):
            return [Possible(p.value, p.guard, call) for p in possible]
    if all(_device_like(script, value) for value in call.args):
        return None
    return [Possible(UNKNOWN)]


def _device_like(script, expr) -> bool:
    """A ``.to()`` argument that names a device: a string, ``torch.device(...)``, a name
    or attribute about a device or rank."""
    if isinstance(expr, ast.JoinedStr) or isinstance(expr, ast.Constant) and isinstance(expr.value, (str, int)):
        return True
    if isinstance(expr, ast.Call):
        return bool(script.names_of(expr.func) & {"torch.device"}) or (
            isinstance(expr.func, ast.Attribute) and expr.func.attr in ("device", "current_device"))
    last = expr.id if isinstance(expr, ast.Name) else expr.attr if isinstance(expr, ast.Attribute) else ""
    return bool(re.search(r"device|rank|gpu|cuda", last, re.IGNORECASE))


def _name_dtypes(script, name: ast.Name, at, depth, part: str | None = None) -> list:
    """A module held in a name: its value where it was assigned (or passed in), then the
    in-place conversions of that name before ``at``; ``part``: the submodule asked about
    (``pipeline.unet``), which a sibling's conversion (``pipeline.vae.to(...)``) leaves alone."""
    scope_root = script.index.function_of(name) or script.tree
    bindings = bound_values(script, name, depth + 1)
    if not bindings:  # a parameter with no caller here, an import: only its conversions here count
        return _apply_events(script, name.id, scope_root, (0, 0), at, [Possible(UNKNOWN)], part)
    found = []
    for value, guard in bindings:
        if value is None:
            found += _apply_events(script, name.id, scope_root, (0, 0), at, [Possible(UNKNOWN, guard)], part)
            continue
        bound_at = script.position(value)
        if (script.index.function_of(value) or script.tree) is not scope_root:  # a call's argument, a default
            bound_at = (0, 0)
            call = _call_of_argument(script, value)
            value_at = script.position(call) if call is not None else at
        else:
            value_at = bound_at
        start = conjoin(module_dtypes(script, value, value_at, depth + 1), guard)
        found += _apply_events(script, name.id, scope_root, bound_at, at, start, part)
    return found


def _call_of_argument(script, value):
    parent = script.index.parents.get(value)
    while parent is not None and not isinstance(parent, ast.Call):
        parent = script.index.parents.get(parent)
    return parent


def _apply_events(script, name: str, scope_root, after, before, start: list, part=None) -> list:
    """``start`` changed by the in-place conversions and mutations of ``name`` in
    ``scope_root`` between the positions ``after`` and ``before`` (of the part ``part``, its
    ancestors or its own submodules, when given)."""
    possible = list(start)
    for event, kind in _events(script, name, scope_root):
        at = script.position(event)
        if not after < at < before:
            continue
        if part is not None and not _related(part, _converted(event)):
            continue
        if kind == "rebind":
            break
        if _leaves_early(script, event, before):
            continue
        condition = path_condition(script, event)
        if kind == "mutate":  # which parameters train is unknown from here on, conversions or not
            return [Possible(UNKNOWN)]
        new = conjoin(kind, condition)
        if not condition:
            possible = new
        elif len(condition) == 1:
            ((code, truth),) = condition
            possible = new + conjoin(possible, frozenset({(code, not truth)}))
        else:
            possible = new + possible
    return possible


def _event_memo(script) -> dict:
    return {}


def _events(script, name: str, scope_root) -> list:
    """(node, what) for the statements of ``scope_root`` (not nested functions) that act
    on the module held in ``name``: a conversion (a list of Possibles), a mutation that
    makes its trained parameters unknown ("mutate"), or a new binding ("rebind")."""
    memo = script.once(_event_memo)
    key = (name, id(scope_root))
    if key not in memo:
        memo[key] = _scan_events(script, name, scope_root)
    return memo[key]


def _scan_events(script, name: str, scope_root) -> list:
    index = script.index
    fn = None if scope_root is script.tree else scope_root
    in_scope = index.in_scope.get(fn, [])
    events = []
    for call in in_scope:
        func = call.func
        if not isinstance(func, ast.Attribute) or _chain_root(func.value) != name \
                or not _chain_keeps_module(func.value):
            continue
        method = func.attr
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
        helper = last_name(call.func) or ""
        if MUTATING_HELPERS.search(helper) and any(_plain(_value(a)) == name for a in (*call.args, *call.keywords)):
            events.append((call, "mutate"))
    for target, statement in index.assigns.get(fn, ()):
        if (isinstance(target, ast.Name) and target.id == name) or self_attribute(target) == name:
            value = statement.value if isinstance(statement, ast.Assign) else None
            if value is None or not _same_module(value, name):
                events.append((target, "rebind"))
        elif (isinstance(target, ast.Attribute) and _chain_root(target.value) == name
              and _chain_root(target.value) == _plain(target.value) and isinstance(statement, ast.Assign)
              and isinstance(statement.value, ast.Call)):
            events.append((target, "mutate"))  # model.lm_head = nn.Linear(...): a new fp32 head
    return sorted(events, key=lambda e: script.position(e[0]))


def _converted(event) -> str | None:
    """The module an event acts on, as a dotted key (``pipeline.unet`` for
    ``pipeline.unet.to(dtype)``, ``model`` for ``model.lm_head = ...``)."""
    expr = event.func.value if isinstance(event, ast.Call) and isinstance(event.func, ast.Attribute) else event
    if isinstance(event, ast.Attribute) and not isinstance(event, ast.Call):
        expr = event.value if self_attribute(event) is None else event
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        expr = expr.func.value
    return key_of(expr)


def _related(part: str, converted: str | None) -> bool:
    """Whether converting ``converted`` converts (some of) ``part``: itself, an ancestor, or
    a submodule of it; not a sibling."""
    if converted is None:
        return True
    return part == converted or part.startswith(converted + ".") or converted.startswith(part + ".")


def _plain(expr) -> str | None:
    """``model`` or ``self.model`` for exactly that expression, else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    return self_attribute(expr)


def _same_module(value, name) -> bool:
    """``model = model.half()``: the same module object, converted in place."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and (
        _chain_root(value.func.value) == name and _chain_keeps_module(value.func.value))


def _is_loop_iterable(script, call) -> bool:
    parent = script.index.parents.get(call)
    return isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is call


def _chain_root(expr) -> str | None:
    """``model`` for ``model.cuda().half``; ``self.model`` for ``self.model.to(...)``."""
    while True:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute) and self_attribute(expr) is None:
            expr = expr.value
        else:
            break
    return expr.id if isinstance(expr, ast.Name) else self_attribute(expr)


def _chain_keeps_module(expr) -> bool:
    """Whether every call in ``model.cuda().train()`` returns the module itself."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr not in KEEPS_DTYPE | set(CONVERSIONS) | set(DTYPE_CONVERSIONS):
            return False
        expr = expr.func.value
    return key_of(expr) is not None  # model, self.model, pipeline.unet (a submodule: _related decides)


def _attribute_dtypes(script, attribute: ast.Attribute, at, depth) -> list:
    """``self.model`` read in a method: its assignment earlier in the same method, else in
    ``__init__``, else in the one other method that assigns it (``setup``, a
    ``build_model`` helper); then the in-place conversions of ``self.model`` in those
    methods."""
    cls, method = script.index.class_of(attribute), script.index.function_of(attribute)
    if cls is None or method is None:
        return [Possible(UNKNOWN)]
    dotted = self_attribute(attribute)
    others = [f for f in cls.body if isinstance(f, FUNCTIONS) and f is not method]
    init = [f for f in others if f.name == "__init__"]
    helpers = [f for f in others if f.name != "__init__" and _self_assignments(script, f, dotted)]
    methods = [method] + init + (helpers if len(helpers) == 1 else [])
    for where in methods:
        limit = at if where is method else (10**9, 0)
        assigned = [(t, s) for t, s in _self_assignments(script, where, dotted) if script.position(t) < limit]
        if not assigned:
            continue
        target, statement = assigned[-1]
        start = conjoin(module_dtypes(script, statement.value, script.position(target), depth + 1),
                        path_condition(script, target))
        found = _apply_events(script, dotted, where, script.position(target), limit, start)
        if where is not method:
            found = _apply_events(script, dotted, method, (0, 0), at, found)
        return found
    return [Possible(UNKNOWN)]


def _self_assignments(script, function, dotted: str) -> list:
    """(target, Assign) of each ``self.x = ...`` directly in ``function``, in source order."""
    return sorted(((t, s) for t, s in script.index.assigns.get(function, ())
                   if isinstance(s, ast.Assign) and self_attribute(t) == dotted), key=lambda ts: script.position(ts[0]))


# ----------------------------------------------------------------------------- objects
def constructions(script, expr, depth: int = 0) -> list:
    """(call, guard) for each call that may have made the object ``expr`` holds: a name
    followed to its assignments (and a parameter to the calls' arguments), ``self.x`` to
    its assignments anywhere in the class. [] when unknown."""
    if depth > MAX_DEPTH or expr is None:
        return []
    if isinstance(expr, ast.Call):
        return [(expr, TRUE)]
    if isinstance(expr, ast.IfExp):
        literal = test_literal(script, expr.test)
        return ([(c, k | {literal}) for c, k in constructions(script, expr.body, depth + 1)]
                + [(c, k | {(literal[0], not literal[1])}) for c, k in constructions(script, expr.orelse, depth + 1)])
    found = []
    if isinstance(expr, ast.Name):
        for value, guard in bound_values(script, expr, depth + 1):
            found += [(c, k | guard) for c, k in constructions(script, value, depth + 1)]
    elif self_attribute(expr):
        cls = script.index.class_of(expr)
        if cls is None:
            return []
        for method in cls.body:
            if isinstance(method, FUNCTIONS):
                for target, statement in _self_assignments(script, method, self_attribute(expr)):
                    found += [(c, k | path_condition(script, target))
                              for c, k in constructions(script, statement.value, depth + 1)]
    return found


def unfused_paths(script, call, short_name: str) -> list:
    """The guards under which optimizer ``call`` is not fused ([] when it always is, or
    when a ``**kwargs`` may say)."""
    if unpacks_keywords(call):
        return []  # AdamW(groups, **extra_args): fused may be in there (nanoGPT)
    given = argument(call, "fused") if short_name in FUSED else None
    if given is None:
        return [TRUE]
    return [p.guard for p in truths(script, given) if p.value is False]


def _leaves_early(script, node, before) -> bool:
    """Whether ``node`` sits in an ``if``/``else`` block that ends with ``return`` or
    ``raise`` and does not hold the position ``before`` (an evaluation-only branch: what it
    converts never reaches the code after it)."""
    parents = script.index.parents
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, (*FUNCTIONS, ast.Module)):
        if isinstance(parent, ast.If):
            block = parent.body if any(s is child for s in parent.body) else \
                parent.orelse if any(s is child for s in parent.orelse) else None
            if block and not (isinstance(block[0], ast.If) and block is parent.orelse
                              and block[0].col_offset == parent.col_offset):
                start = (block[0].lineno, block[0].col_offset)
                end = (block[-1].end_lineno, block[-1].end_col_offset)
                if not start <= before <= end and isinstance(block[-1], (ast.Return, ast.Raise)):
                    return True
        child, parent = parent, parents.get(parent)
    return False
