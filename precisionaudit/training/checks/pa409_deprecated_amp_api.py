"""PA409 deprecated-amp-api: each use of ``torch.cuda.amp.*`` / ``torch.cpu.amp.*``
(any import spelling, resolved by LibCST's qualified names), with the ``torch.amp``
spelling it becomes; ``fix.py`` rewrites the ones it can."""
from ..deprecated_amp import deprecated_uses
from ..fix import autofixable_uses
from ..registry import TrainingHit, training_check
from ..step_syntax import mentions_deprecated_amp


@training_check("PA409", mentions=mentions_deprecated_amp)
def check(script):
    if not mentions_deprecated_amp(script.text):
        return
    fixable = autofixable_uses(script)
    for use in deprecated_uses(script):
        line, column = script.line_column(use.node)
        written = script.module.code_for_node(use.node)
        yield TrainingHit(line=line, column=column, subject=use.qualified,
                          values={"name": written if written == use.qualified else f"{written} ({use.qualified})",
                                  "replacement": use.replacement},
                          fix={"autofix": id(use.node) in fixable})
