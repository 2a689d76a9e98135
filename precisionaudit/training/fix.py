"""``scan --fix`` for training scripts: the rewrites that are safe to make mechanically,
made with LibCST transforms so every other byte (formatting, comments, blank lines)
survives.

- PA409: a deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` use becomes ``torch.amp``
  with the device (``torch.amp.autocast("cuda", ...)``, ``torch.amp.custom_fwd(
  device_type="cuda")``). A ``from torch.cuda.amp import ...`` is rewritten with its uses,
  and only when every use of every name it imports can be rewritten (a name passed around
  as a value cannot: it would be called later without its device).
- PA401: ``scaler.unscale_(optimizer)`` is inserted before the clip, when the scaler and
  the one optimizer it steps afterwards in the same function are known.

``fixed_source(script, findings)`` returns the new text; nothing is written here (the CLI
writes atomically, or shows a diff).
"""
from __future__ import annotations

import libcst as cst
from libcst.helpers import get_full_name_for_node

from .deprecated_amp import DEPRECATED, MODULES, OLD_AUTOCAST_PARAMS, deprecated_uses

_MEMBERS = {member for member, _ in DEPRECATED.values()}


def _deprecated_imports(script) -> dict:
    """local name -> the ``from torch.cuda.amp import ...`` binding it, for imports whose
    every name is a deprecated member (others are left alone)."""
    found: dict = {}
    ambiguous: set = set()

    class Imports(cst.CSTVisitor):
        def visit_ImportFrom(self, node):
            if node.relative or isinstance(node.names, cst.ImportStar) or node.module is None:
                return False
            if get_full_name_for_node(node.module) not in MODULES:
                return False
            if not all(a.name.value in _MEMBERS for a in node.names):
                return False
            for alias in node.names:
                local = alias.asname.name.value if alias.asname else alias.name.value
                if local in found:
                    ambiguous.add(local)
                found[local] = node
            return False

    script.module.visit(Imports())
    return {k: v for k, v in found.items() if k not in ambiguous}


def _plan(script):
    """(uses that can be rewritten, the imports rewritten with them)."""
    return script.once(_rewritable)


def _rewritable(script):
    uses = deprecated_uses(script)
    imports = _deprecated_imports(script)
    fixable, by_import = [], {}
    for use in uses:
        node = use.node
        if isinstance(node, cst.Name):
            importer = imports.get(node.value)
            if importer is None:
                continue
            by_import.setdefault(id(importer), []).append(use)
        elif _root_is_torch(script, node):
            if use.how != "other":
                fixable.append(use)
    rewritten = set()
    for importer_id, group in by_import.items():
        if all(u.how != "other" for u in group) and _all_names_used_fixably(script, importer_id, imports, group):
            fixable += group
            rewritten.add(importer_id)
    return fixable, rewritten


def _all_names_used_fixably(script, importer_id, imports, group) -> bool:
    """Every reference to a name the import binds is among ``group``'s uses (a name read
    somewhere LibCST does not resolve to the deprecated API would break)."""
    locals_ = {name for name, node in imports.items() if id(node) == importer_id}
    seen = {id(u.node) for u in group}

    class Refs(cst.CSTVisitor):
        ok = True

        def visit_Import(self, node):
            return False

        def visit_ImportFrom(self, node):
            return False

        def visit_Attribute(self, node):
            node.value.visit(self)
            return False

        def visit_Name(self, node):
            if node.value in locals_ and id(node) not in seen:
                Refs.ok = False

    script.module.visit(Refs())
    return Refs.ok


def _root_is_torch(script, node) -> bool:
    root = node
    while isinstance(root, cst.Attribute):
        root = root.value
    return isinstance(root, cst.Name) and root.value == "torch" and script.names_of(root) == {"torch"}


def autofixable_uses(script) -> set:
    """ids of the PA409 use nodes ``fixed_source`` rewrites."""
    return {id(u.node) for u in _plan(script)[0]}


def _string(device: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{device}"')


def _keyword(name: str, value) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def _comma() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _with_device_first(args, device):
    first = cst.Arg(value=_string(device), comma=_comma() if args else cst.MaybeSentinel.DEFAULT)
    return [first, *args]


def _append(args, arg):
    if not args:
        return [arg]
    last = args[-1]
    if last.comma is cst.MaybeSentinel.DEFAULT:
        last = last.with_changes(comma=_comma())
    return [*args[:-1], last, arg]


def _new_args(use, args):
    args = list(args)
    if use.member == "autocast":
        converted = []
        for i, arg in enumerate(args):
            if arg.keyword is None and not arg.star and i < len(OLD_AUTOCAST_PARAMS):
                arg = arg.with_changes(keyword=cst.Name(OLD_AUTOCAST_PARAMS[i]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            converted.append(arg)
        return _with_device_first(converted, use.device)
    if use.member == "GradScaler":
        return _with_device_first(args, use.device)
    return _append(args, _keyword("device_type", _string(use.device)))


def _clip_inserts(script, wanted) -> dict:
    """id of the statement holding each fixable PA401 clip -> the statement to insert."""
    from .step import analyse
    from .step_syntax import mentions_amp

    if not mentions_amp(script.text):
        return {}
    inserts = {}
    for hit in analyse(script).hits.values():
        if hit.rule != "PA401" or not (hit.fix or {}).get("autofix"):
            continue
        if wanted is not None and ("PA401", *script.line_column(hit.node)) not in wanted:
            continue
        stmt = script.parents.get(hit.node)
        while stmt is not None and not isinstance(stmt, cst.SimpleStatementLine):
            if isinstance(stmt, (cst.BaseCompoundStatement, cst.Lambda)):
                stmt = None
                break
            stmt = script.parents.get(stmt)
        if stmt is not None and isinstance(script.parents.get(stmt), (cst.IndentedBlock, cst.Module)):
            inserts[id(stmt)] = cst.parse_statement(hit.fix["insert"] + "\n")
    return inserts


class _Fixer(cst.CSTTransformer):
    def __init__(self, script, uses, imports, inserts):
        self.calls = {id(u.node): u for u in uses if u.how == "call"}
        self.decorators = {id(u.node): u for u in uses if u.how == "decorator"}
        self.imports = imports
        self.inserts = inserts

    def _func(self, use, updated):
        return cst.parse_expression(f"torch.amp.{use.member}") if isinstance(use.node, cst.Attribute) else updated

    def leave_Call(self, original, updated):
        use = self.calls.get(id(original.func))
        if use is None:
            return updated
        return updated.with_changes(func=self._func(use, updated.func), args=_new_args(use, updated.args))

    def leave_Decorator(self, original, updated):
        use = self.decorators.get(id(original.decorator))
        if use is None:
            return updated
        call = cst.Call(func=self._func(use, updated.decorator),
                        args=[_keyword("device_type", _string(use.device))])
        return updated.with_changes(decorator=call)

    def leave_ImportFrom(self, original, updated):
        if id(original) not in self.imports:
            return updated
        new = MODULES[get_full_name_for_node(original.module)]
        return updated.with_changes(module=cst.parse_expression(new))

    def _body(self, original, updated):
        if not any(id(s) in self.inserts for s in original.body):
            return updated
        body = []
        for orig, new in zip(original.body, updated.body):
            insert = self.inserts.get(id(orig))
            if insert is not None:
                body.append(insert.with_changes(leading_lines=new.leading_lines))
                new = new.with_changes(leading_lines=())
            body.append(new)
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original, updated):
        return self._body(original, updated)

    def leave_Module(self, original, updated):
        return self._body(original, updated)


def fixed_source(script, findings=None) -> str:
    """``script``'s text with its autofixable findings fixed (all of them when ``findings``
    is None; else those among ``findings``, matched by rule, line and column). Unchanged
    text comes back byte-identical."""
    wanted = None
    if findings is not None:
        wanted = {(f.rule, f.line, f.column) for f in findings if (f.fix or {}).get("autofix")}
    uses, imports = _plan(script)
    if wanted is not None:
        uses = [u for u in uses if ("PA409", *script.line_column(u.node)) in wanted]
        kept = {id(u.node) for u in uses}
        imports = {i for i in imports
                   if all(id(u.node) in kept for u in _plan(script)[0] if isinstance(u.node, cst.Name)
                          and _binds(script, i, u))}
        # a name's use is rewritten only with its import: ``GS("cuda")`` on the old
        # torch.cuda.amp.GradScaler would pass "cuda" as its init_scale
        uses = [u for u in uses if not isinstance(u.node, cst.Name)
                or any(_binds(script, i, u) for i in imports)]
    inserts = _clip_inserts(script, wanted)
    if not uses and not inserts:
        return script.text
    return script.module.visit(_Fixer(script, uses, imports, inserts)).code


def _binds(script, importer_id, use) -> bool:
    importer = _deprecated_imports(script).get(use.node.value)
    return importer is not None and id(importer) == importer_id


def fixes(paths, rules_of) -> list[tuple[str, str, str]]:
    """(path, text, fixed text) of each training script among ``paths`` that ``--fix`` would
    change, fixing the autofixable findings of the rules selected for it (``rules_of(path)``).
    A script that cannot be read or parsed is left alone (the scan reports it)."""
    from ..core.errors import UsageError
    from .audit import audit_file
    from .source import read_script

    changed = []
    for path in paths:
        try:
            findings = [f for f in audit_file(path, rules_of(path)) if f.fix.get("autofix")]
            script = read_script(path) if findings else None
        except UsageError:
            continue
        if script is not None:
            text = fixed_source(script, findings)
            if text != script.text:
                changed.append((path, script.text, text))
    return changed
