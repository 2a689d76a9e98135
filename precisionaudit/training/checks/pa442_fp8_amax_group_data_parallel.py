"""PA442 fp8-amax-group-data-parallel: FP8 amaxes reduced over Megatron's data-parallel
group, which leaves the tensor-parallel ranks with different scales for one tensor."""
from ..fp8_recipes import data_parallel_groups, mentions_fp8
from ..registry import TrainingHit, training_check


@training_check("PA442", mentions=mentions_fp8)
def check(script):
    for value in data_parallel_groups(script):
        line, column = script.line_column(value)
        yield TrainingHit(line=line, column=column, scope=script.enclosing(value),
                          subject=script.source(value.func),
                          condition="when tensor parallelism is used",
                          values={"group": script.source(value)})
