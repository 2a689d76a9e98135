"""PA441-PA443, read statically: FP8 training set-ups (Transformer Engine's delayed-scaling
window and amax group, torchao's conversion filter). Each hazard by rule and line, each clean
twin silent, real call shapes (accelerate, Lightning) silent."""
import pytest
from training_rules import Audit, sample

AUDIT = Audit("PA441", "PA442", "PA443")
findings, audit_code = AUDIT.findings, AUDIT.code


@pytest.mark.parametrize("stem,expected", [
    ("pa441_fp8_one_step_amax_window", [("PA441", 7)]),
    ("pa442_fp8_amax_group_data_parallel", [("PA442", 10)]),
    ("pa443_fp8_convert_without_filter", [("PA443", 7)]),
])
def test_each_hazard_is_found_at_its_line_and_its_clean_twin_is_silent(stem, expected):
    assert findings(sample(f"{stem}_hazard.py")) == expected
    assert findings(sample(f"{stem}_clean.py")) == []


def test_every_message_and_fix_is_filled_with_real_values():
    seen = AUDIT.rendered("pa44")
    assert set(seen) == set(AUDIT.ids)
    assert seen["PA441"].message.startswith(
        'DelayedScaling(amax_history_len=1, amax_compute_algo="most_recent") sets each FP8 scaling factor')
    assert seen["PA442"].message.startswith("fp8_group is mpu.get_data_parallel_group(), the data-parallel group")
    assert seen["PA442"].evidence["condition"] == "when tensor parallelism is used"


@pytest.mark.parametrize("args,fires", [
    ("amax_history_len=1", True),
    ('amax_compute_algo="most_recent"', True),
    ('amax_history_len=16, amax_compute_algo="most_recent"', True),
    ('amax_history_len=1024, amax_compute_algo="max"', False),
    ("", False),                        # the installed version's defaults: not judged
    ("amax_history_len=args.window", False),
    ("**recipe_kwargs", False),         # accelerate / Lightning pass a dict
])
def test_a_one_step_window_in_any_spelling(tmp_path, args, fires):
    code = f"""
        import transformer_engine.common.recipe as te_recipe
        recipe = te_recipe.DelayedScaling({args})
        """
    assert audit_code(tmp_path, code) == ([("PA441", 3)] if fires else [])


def test_the_data_parallel_group_as_fp8_autocast_keyword_and_parallel_state(tmp_path):
    assert audit_code(tmp_path, """
        import transformer_engine.pytorch as te
        from megatron.core import parallel_state

        def forward(layers, x, recipe):
            with te.fp8_autocast(fp8_recipe=recipe, fp8_group=parallel_state.get_data_parallel_group()):
                return layers(x)

        def forward_fixed(layers, x, recipe):
            with te.fp8_autocast(fp8_recipe=recipe, fp8_group=parallel_state.get_amax_reduction_group()):
                return layers(x)

        def forward_world(layers, x, recipe):
            with te.fp8_autocast(fp8_recipe=recipe):      # the default group: the world
                return layers(x)
        """) == [("PA442", 6)]


@pytest.mark.parametrize("call,fires", [
    ("convert_to_float8_training(model)", True),
    ("convert_to_float8_training(model, config=config)", True),
    ("convert_to_float8_training(model, module_filter_fn=keep, config=config)", False),
    ("convert_to_float8_training(model, **options)", False),
])
def test_a_conversion_without_a_filter(tmp_path, call, fires):
    code = f"""
        from torchao.float8 import convert_to_float8_training as _unused
        import torchao.float8 as f8

        def prepare(model, config, keep, options):
            f8.{call}
        """
    assert audit_code(tmp_path, code) == ([("PA443", 6)] if fires else [])
