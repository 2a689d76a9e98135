"""PA443 fp8-convert-without-filter: an FP8 training set-up (Transformer Engine, torchao). The
hazard sample, its clean twin, the rule page's Example and Use instead, and the ways real code
is written."""
import pytest
from training_rules import Audit, assert_page_examples

AUDIT = Audit("PA441", "PA442", "PA443")
findings, audit_code = AUDIT.findings, AUDIT.code


def test_the_hazard_sample_fires_at_its_line_with_its_message_and_its_twin_is_silent():
    AUDIT.pair("pa443_fp8_convert_without_filter", [("PA443", 7)])


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


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA443", tmp_path)
