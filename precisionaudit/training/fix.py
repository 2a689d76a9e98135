"""``scan --fix`` for training scripts: the rewrites that are safe to make mechanically.
What to rewrite is decided on the script's ``ast`` (the same analysis the rules ran); the
rewrite is made with LibCST transforms, located by position, so that every other byte
(formatting, comments, blank lines) survives. LibCST is imported only here.

- PA409: a deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` use becomes ``torch.amp``
  with the device (``torch.amp.autocast("cuda", ...)``, ``torch.amp.custom_fwd(
  device_type="cuda")``). A ``from torch.cuda.amp import ...`` is rewritten with its uses,
  and only when every use of every name it imports can be rewritten
  (``deprecated_amp.rewritable``).
- PA401: ``scaler.unscale_(optimizer)`` is inserted before the clip, when the scaler and
  the one optimizer it steps afterwards in the same function are known; under accelerate,
  torch's ``clip_grad_norm_``/``clip_grad_value_`` after ``accelerator.backward`` becomes
  ``accelerator.clip_grad_norm_``/``clip_grad_value_`` (same arguments; it unscales first).

``fixed_source(script, findings)`` returns the new text; nothing is written here (the CLI
writes atomically, or shows a diff).
"""
from __future__ import annotations

import ast

from .deprecated_amp import MODULES, OLD_AUTOCAST_PARAMS, deprecated_imports, rewritable
from .step.walk import mentions_amp, walked


def fixed_source(script, findings=None) -> str:
    """``script``'s text with its autofixable findings fixed (all of them when ``findings``
    is None; else those among ``findings``, matched by rule, line and column). Unchanged
    text comes back byte-identical."""
    wanted = None
    if findings is not None:
        wanted = {(f.rule, f.line, f.column) for f in findings if (f.fix or {}).get("autofix")}
    every, imports = rewritable(script)
    uses = every
    if wanted is not None:
        uses = [u for u in every if ("PA409", *script.line_column(u.node)) in wanted]
        kept = {id(u.node) for u in uses}
        imports = {i: node for i, node in imports.items()
                   if all(id(u.node) in kept for u in every if _binds(script, node, u))}
        # a name's use is rewritten only with its import: ``GS("cuda")`` on the old
        # torch.cuda.amp.GradScaler would pass "cuda" as its init_scale
        uses = [u for u in uses if not isinstance(u.node, ast.Name)
                or any(_binds(script, node, u) for node in imports.values())]
    inserts, renames = _clip_fixes(script, wanted)
    if not uses and not inserts and not renames:
        return script.text
    return _rewrite(script, uses, imports, inserts, renames)


def _binds(script, importer, use) -> bool:
    return isinstance(use.node, ast.Name) and deprecated_imports(script).get(use.node.id) is importer


def _clip_fixes(script, wanted) -> tuple[dict, dict]:
    """(line of the statement holding each fixable PA401 clip -> the statement to insert,
    (line, column) of a clip's callee -> the callee it becomes)."""
    if not mentions_amp(script.text):
        return {}, {}
    inserts, renames = {}, {}
    for hit in script.once(walked).hits.found.values():
        if hit.rule != "PA401" or not (hit.fix or {}).get("autofix"):
            continue
        if wanted is not None and ("PA401", *script.line_column(hit.node)) not in wanted:
            continue
        if "replace" in hit.fix:
            line, column = script.line_column(hit.node.func)
            renames[(line, column - 1)] = hit.fix["replace"]
            continue
        node, parents = hit.node, script.index.parents
        while node is not None and not isinstance(node, ast.stmt) and not isinstance(node, ast.Lambda):
            node = parents.get(node)
        if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
            inserts[node.lineno] = hit.fix["insert"]
    return inserts, renames


def _rewrite(script, uses, imports, inserts, renames=None) -> str:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    wrapper = MetadataWrapper(cst.parse_module(script.text))
    positions = wrapper.resolve(PositionProvider)

    def at(use):
        line, column = script.line_column(use.node)
        return line, column - 1

    fixer = _fixer(cst, positions,
                   calls={at(u): u for u in uses if u.how == "call"},
                   decorators={at(u): u for u in uses if u.how == "decorator"},
                   imports={(n.lineno, script.line_column(n)[1] - 1) for n in imports.values()},
                   inserts={line: cst.parse_statement(text + "\n") for line, text in inserts.items()},
                   renames={at: cst.parse_expression(text) for at, text in (renames or {}).items()})
    return wrapper.module.visit(fixer).code


def _fixer(cst, positions, calls, decorators, imports, inserts, renames):
    """The LibCST transformer that makes the rewrites at those positions."""
    from libcst.helpers import get_full_name_for_node

    def start(node):
        where = positions[node].start
        return where.line, where.column

    def string(device):
        return cst.SimpleString(f'"{device}"')

    def keyword(name, value):
        return cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))

    def comma():
        return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))

    def with_device_first(args, device):
        return [cst.Arg(value=string(device), comma=comma() if args else cst.MaybeSentinel.DEFAULT), *args]

    def new_args(use, args):
        args = list(args)
        if use.member == "autocast":
            args = [arg.with_changes(keyword=cst.Name(OLD_AUTOCAST_PARAMS[i]), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
                if arg.keyword is None and not arg.star and i < len(OLD_AUTOCAST_PARAMS) else arg
                for i, arg in enumerate(args)]
            return with_device_first(args, use.device)
        if use.member == "GradScaler":
            return with_device_first(args, use.device)
        added = keyword("device_type", string(use.device))
        if not args:
            return [added]
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT:
            last = last.with_changes(comma=comma())
        return [*args[:-1], last, added]

    def func(use, updated):
        return cst.parse_expression(f"torch.amp.{use.member}") if isinstance(updated, cst.Attribute) else updated

    class Fixer(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            renamed = renames.get(start(original.func))
            if renamed is not None:
                return updated.with_changes(func=renamed)
            use = calls.get(start(original.func))
            if use is None:
                return updated
            return updated.with_changes(func=func(use, updated.func), args=new_args(use, updated.args))

        def leave_Decorator(self, original, updated):
            use = decorators.get(start(original.decorator))
            if use is None:
                return updated
            return updated.with_changes(decorator=cst.Call(func=func(use, updated.decorator),
                                                           args=[keyword("device_type", string(use.device))]))

        def leave_ImportFrom(self, original, updated):
            if start(original) not in imports:
                return updated
            return updated.with_changes(module=cst.parse_expression(MODULES[get_full_name_for_node(original.module)]))

        def _body(self, original, updated):
            body = []
            for orig, new in zip(original.body, updated.body):
                insert = inserts.get(start(orig)[0]) if isinstance(orig, cst.SimpleStatementLine) else None
                if insert is not None:
                    body.append(insert.with_changes(leading_lines=new.leading_lines))
                    new = new.with_changes(leading_lines=())
                body.append(new)
            return updated.with_changes(body=body)

        def leave_IndentedBlock(self, original, updated):
            return self._body(original, updated) if inserts else updated

        def leave_Module(self, original, updated):
            return self._body(original, updated) if inserts else updated

    return Fixer()


def fixes(paths, rules_of) -> list[tuple[str, str, str]]:
    """(path, text, fixed text) of each training script among ``paths`` that ``--fix`` would
    change, fixing the autofixable findings of the rules selected for it (``rules_of(path)``).
    A script that cannot be read or parsed is left alone (the scan reports it)."""
    from ..core.errors import UsageError
    from .audit import run_checks
    from .source import NewerSyntax, read_script

    changed = []
    for path in paths:
        try:
            script = read_script(path)
        except (UsageError, NewerSyntax):
            continue
        findings = [f for f in run_checks(script, rules_of(path)) if f.fix.get("autofix")]
        if findings:
            text = fixed_source(script, findings)
            if text != script.text:
                changed.append((path, script.text, text))
    return changed
