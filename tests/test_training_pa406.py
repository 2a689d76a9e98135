"""PA406 optimizer-eps-underflow: the dtype of the parameters an optimizer updates, read
statically. The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""
import pytest
from precisionaudit.core.numerics import rounds_to
from training_rules import OPTIM, assert_page_examples, sample

optim_found, optim_code = OPTIM.conditions, OPTIM.code_conditions


HAZARDS = [("pa406_optimizer_eps_underflow_hazard.py",
            [("PA406", 16, "when --fp16 is set"), ("PA407", 16, "when --fp16 is set")])]


def test_the_hazard_samples_fire_at_their_lines_under_their_conditions_and_their_twins_are_clean():
    for name, expected in HAZARDS:
        assert optim_found(sample(name)) == expected
        assert optim_found(sample(name.replace("_hazard", "_clean"))) == []


def test_the_message_names_the_dtype_the_eps_and_what_it_rounds_to():
    (f,) = [f for f in OPTIM.run(sample(HAZARDS[0][0])) if f.rule == "PA406"]
    assert f.message.startswith(
        "AdamW updates float16 parameters (made float16 at line 25) with the default eps 1e-08, which rounds to 0")
    assert f.message.endswith("(when --fp16 is set)") and f.severity == "error"
    assert "{" not in f.message + f.fix["to"]


def test_the_eps_limit_is_what_fp16_rounds_to_zero():
    """The rule's premise, checked against numpy's rounding: 2^-25 is 0, just above is not."""
    assert rounds_to(2.0 ** -25, "float16") == 0.0
    assert rounds_to(2.0 ** -25 * 1.01, "float16") > 0.0
    assert rounds_to(1e-8, "bfloat16") > 0.0


@pytest.mark.parametrize("optimizer,eps,fires", [
    ("Adam", None, True), ("AdamW", "1e-8", True), ("RMSprop", None, True), ("Adagrad", None, True),
    ("Adadelta", None, False),           # default 1e-6 survives in fp16 (a subnormal)
    ("Adadelta", "1e-9", True),
    ("Adam", "1e-4", False), ("Adam", "3e-8", False),   # 3e-8 rounds up to 2^-24
    ("Adam", "EPS", True), ("Adam", "EPS * 10", True), ("Adam", "10 ** -7", False),
    ("Adam", "args.eps", False),          # unknown: silence
    ("SGD", None, False),                 # no eps
])
def test_eps_is_judged_as_fp16_stores_it(tmp_path, optimizer, eps, fires):
    extra = f", eps={eps}" if eps else ""
    found = optim_code(tmp_path, f"""
        import torch
        EPS = 1e-9
        def main(args):
            model = Net().cuda().half()
            opt = torch.optim.{optimizer}(model.parameters(), lr=1e-3{extra})
    """)
    assert (("PA406", 6, None) in found) == fires


def test_eps_passed_by_position_and_in_param_groups(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        def main():
            model = Net().half()
            a = torch.optim.Adam(model.parameters(), 1e-3, (0.9, 0.999), 1e-4)
            b = torch.optim.Adam([{"params": model.parameters(), "eps": 1e-4}], lr=1e-3)
            c = torch.optim.Adam(model.parameters(), 1e-3, (0.9, 0.999), 1e-9)
    """)
    assert [f for f in found if f[0] == "PA406"] == [("PA406", 7, None)]


def test_keyword_arguments_unpacked_from_a_dict_make_eps_and_fused_unknown(tmp_path):
    """nanoGPT: ``extra_args = dict(fused=True) if use_fused else dict()``."""
    found = optim_code(tmp_path, """
        import torch
        def main(use_fused, kwargs):
            model = Net().half()
            extra_args = dict(fused=True) if use_fused else dict()
            a = torch.optim.AdamW(model.parameters(), lr=1e-3, **extra_args)
            b = torch.optim.AdamW(model.parameters(), **kwargs)
    """)
    assert [f for f in found if f[0] == "PA406"] == []


def test_a_fused_optimizer_is_not_claimed_and_a_fused_flag_becomes_the_condition(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        def main(args):
            model = Net().half()
            a = torch.optim.AdamW(model.parameters(), fused=True)
            b = torch.optim.AdamW(model.parameters(), fused=args.fused)
    """)
    assert [f for f in found if f[0] == "PA406"] == [("PA406", 6, "when args.fused is false")]


def test_glide_finetune_converts_its_unet_with_convert_to_fp16(tmp_path):
    """glide-finetune #5: guided-diffusion's ``convert_to_fp16()`` and AdamW's default eps."""
    found = optim_code(tmp_path, """
        import torch
        def run(glide_model, use_fp16, learning_rate):
            if use_fp16:
                glide_model.convert_to_fp16()
            optimizer = torch.optim.AdamW([x for x in glide_model.parameters() if x.requires_grad], lr=learning_rate)
    """)
    assert ("PA406", 6, "when use_fp16 is true") in found


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA406", tmp_path)
