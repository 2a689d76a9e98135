"""PA441 fp8-one-step-amax-window: a Transformer Engine ``DelayedScaling`` recipe whose scale
comes from one step's amax (``amax_history_len=1`` or ``amax_compute_algo="most_recent"``)."""
from ..fp8_recipes import DELAYED_SCALING, calls, mentions_fp8
from ..registry import TrainingHit, training_check
from ..syntax import argument, literal


@training_check("PA441", mentions=mentions_fp8)
def check(script):
    for call in calls(script, DELAYED_SCALING):
        history = literal(argument(call, "amax_history_len"))
        algo = literal(argument(call, "amax_compute_algo"))
        if history != 1 and algo != "most_recent":
            continue
        setting = ", ".join(s for s in (f"amax_history_len={history}" if history == 1 else "",
                                           f'amax_compute_algo="{algo}"' if algo == "most_recent" else "") if s)
        line, column = script.line_column(call)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(call),
                          subject=script.source(call.func),
                          values={"recipe": script.source(call.func), "setting": setting})
