"""PA441 fp8-one-step-amax-window: an FP8 training set-up (Transformer Engine, torchao). The hazard
sample, its clean twin, the rule page's Example and Use instead, and the ways real code is
written."""
import pytest
from training_rules import Audit, assert_page_examples

AUDIT = Audit("PA441", "PA442", "PA443")
findings, audit_code = AUDIT.findings, AUDIT.code


def test_the_hazard_sample_fires_at_its_line_with_its_message_and_its_twin_is_silent():
    seen = AUDIT.pair("pa441_fp8_one_step_amax_window", [("PA441", 7)])
    assert seen["PA441"].message.startswith(
        'DelayedScaling(amax_history_len=1, amax_compute_algo="most_recent") sets each FP8 scaling factor')


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


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA441", tmp_path)
