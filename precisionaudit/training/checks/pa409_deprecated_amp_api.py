"""PA409 deprecated-amp-api: each use of ``torch.cuda.amp.*`` / ``torch.cpu.amp.*`` (any
import spelling, resolved through the file's imports), with the ``torch.amp`` spelling it
becomes; ``fix.py`` rewrites the ones ``deprecated_amp.rewritable`` allows.

A call or a decorator warns (``@deprecated(..., category=FutureWarning)`` on each call);
a name only referred to (``isinstance(s, torch.cuda.amp.GradScaler)``, a base class, a
value kept for later) warns nowhere but is still the deprecated name, and the fix is where
the name comes from: its import, or the ``torch.amp`` spelling.
"""
import ast

from ..deprecated_amp import deprecated_imports, deprecated_uses, mentions_deprecated_amp, rewritable
from ..registry import TrainingHit, training_check

WARNS = "is deprecated (torch warns with a FutureWarning on each use)"
NAMED = "is a deprecated name (it warns only when called, and goes with torch.cuda.amp)"


@training_check("PA409", mentions=mentions_deprecated_amp)
def check(script):
    if not mentions_deprecated_amp(script.text):
        return
    fixable = {id(u.node) for u in rewritable(script)[0]}
    imports = deprecated_imports(script)
    for use in deprecated_uses(script):
        line, column = script.line_column(use.node)
        written = script.source(use.node)
        if use.how == "other":
            replacement = f"torch.amp.{use.member}"
            importer = imports.get(use.node.id) if isinstance(use.node, ast.Name) else None
            fix_to = (f"import {use.member} from torch.amp instead (line {importer.lineno})" if importer is not None
                      else f"use {replacement}")
        else:
            replacement = use.replacement
            fix_to = f"use {replacement}"
        yield TrainingHit(line=line, column=column, subject=use.qualified,
                          values={"name": written if written == use.qualified else f"{written} ({use.qualified})",
                                  "deprecation": WARNS if use.how != "other" else NAMED,
                                  "replacement": replacement, "fix_to": fix_to},
                          fix={"autofix": id(use.node) in fixable})
