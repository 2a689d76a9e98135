"""PA443 fp8-convert-without-filter: torchao's ``convert_to_float8_training`` with no
``module_filter_fn``, which converts every nn.Linear, the output head included."""
from ..fp8_recipes import CONVERT, calls, mentions_fp8
from ..registry import TrainingHit, training_check
from ..syntax import argument, unpacks_keywords


@training_check("PA443", mentions=mentions_fp8)
def check(script):
    for call in calls(script, CONVERT):
        if argument(call, "module_filter_fn") is not None or unpacks_keywords(call):
            continue
        line, column = script.line_column(call)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(call),
                          subject=script.source(call.func),
                          values={"convert": script.source(call.func)})
