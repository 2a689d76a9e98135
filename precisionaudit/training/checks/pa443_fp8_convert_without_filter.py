"""PA443 fp8-convert-without-filter: torchao's ``convert_to_float8_training`` with no
``module_filter_fn``, which converts every nn.Linear, the output head included."""
from ..fp8_recipes import CONVERT, calls, keyword, mentions_fp8
from ..registry import TrainingHit, training_check


@training_check("PA443", mentions=mentions_fp8)
def check(script):
    for call in calls(script, CONVERT):
        if keyword(call, "module_filter_fn") is not None or any(a.star == "**" for a in call.args):
            continue
        line, column = script.line_column(call)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(call),
                          subject=script.module.code_for_node(call.func),
                          values={"convert": script.module.code_for_node(call.func)})
