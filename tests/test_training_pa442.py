"""PA442 fp8-amax-group-data-parallel: an FP8 training set-up (Transformer Engine, torchao). The
hazard sample, its clean twin, the rule page's Example and Use instead, and the ways real code
is written."""
from training_rules import Audit, assert_page_examples

AUDIT = Audit("PA441", "PA442", "PA443")
findings, audit_code = AUDIT.findings, AUDIT.code


def test_the_hazard_sample_fires_at_its_line_with_its_message_and_its_twin_is_silent():
    seen = AUDIT.pair("pa442_fp8_amax_group_data_parallel", [("PA442", 10)])
    assert seen["PA442"].message.startswith("fp8_group is mpu.get_data_parallel_group(), the data-parallel group")
    assert seen["PA442"].evidence["condition"] == "when tensor parallelism is used"


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


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA442", tmp_path)
