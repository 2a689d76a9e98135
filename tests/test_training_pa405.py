"""PA405 low-precision-params-with-scaler: the dtype of the parameters an optimizer updates, read
statically. The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""
import pytest
from training_rules import OPTIM, assert_page_examples, sample

optim_found, optim_code = OPTIM.conditions, OPTIM.code_conditions


HAZARDS = [("pa405_low_precision_params_with_scaler_hazard.py",
            [("PA405", 25, "when --amp is set"), ("PA407", 26, None)]),
           ("pa405_trainer_fp16_hazard.py", [("PA405", 8, None)])]


def test_the_hazard_samples_fire_at_their_lines_under_their_conditions_and_their_twins_are_clean():
    for name, expected in HAZARDS:
        assert optim_found(sample(name)) == expected
        assert optim_found(sample(name.replace("_hazard", "_clean"))) == []


def test_the_messages_name_the_conversion_and_the_scalers_step():
    messages = {f.message for name, _ in HAZARDS for f in OPTIM.run(sample(name)) if f.rule == "PA405"}
    assert messages == {
        "`model.half()` makes the parameters fp16, and they are trained through GradScaler.step(optimizer) at "
        'line 16: GradScaler raises "Attempting to unscale FP16 gradients." at the first step (when --amp is set)',
        "`AutoModelForSequenceClassification.from_pretrained(..., torch_dtype=torch.float16)` makes the parameters "
        "fp16, and they are trained through a Trainer with fp16=True at line 11: GradScaler raises "
        '"Attempting to unscale FP16 gradients." at the first step'}


def test_a_scaler_on_self_with_a_deprecated_import_alias(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        from torch.cuda.amp import GradScaler as GS

        class Trainer:
            def __init__(self, model):
                self.model = model.to(torch.float16)
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self.scaler = GS()

            def optimizer_step(self):
                self.scaler.unscale_(self.optimizer)
                self.scaler.step(self.optimizer)
                self.scaler.update()
    """)
    assert ("PA405", 7, None) in found


def test_scaler_enabled_only_for_fp16_is_decided_from_the_dtype(tmp_path):
    """``GradScaler(enabled=(dtype == torch.float16))``: the hazard holds exactly when args.fp16 is."""
    found = optim_code(tmp_path, """
        import torch
        def main(args):
            dtype = torch.float16 if args.fp16 else torch.bfloat16
            model = Net().to(dtype)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda", enabled=(dtype == torch.float16))
            scaler.step(opt)
    """)
    assert [f for f in found if f[0] == "PA405"] == [("PA405", 5, "when args.fp16 is true")]


def test_a_flag_copied_into_a_name_is_named_as_the_flag(tmp_path):
    """As argparse spells it, where the script declares it."""
    found = optim_code(tmp_path, """
        import argparse
        import torch
        def main(args):
            use_amp = args.amp
            model = Net().half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler(enabled=use_amp)
            scaler.step(opt)
        parser = argparse.ArgumentParser()
        parser.add_argument("--amp", action="store_true")
        main(parser.parse_args())
    """)
    assert [f for f in found if f[0] == "PA405"] == [("PA405", 6, "when --amp is set")]


@pytest.mark.parametrize("scaler", [
    'torch.amp.GradScaler("cuda", enabled=False)',
    "ShardedGradScaler()",
])
def test_a_disabled_or_sharded_scaler_does_not_raise(tmp_path, scaler):
    found = optim_code(tmp_path, f"""
        import torch
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        def main():
            model = Net().half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = {scaler}
            scaler.step(opt)
    """)
    assert [f for f in found if f[0] == "PA405"] == []


def test_a_fused_optimizer_steps_without_unscale_but_an_explicit_unscale_raises(tmp_path):
    code = """
        import torch
        def main():
            model = Net().half()
            opt = torch.optim.AdamW(model.parameters(), fused=True)
            scaler = torch.amp.GradScaler()
            scaler.step(opt)
    """
    assert [f for f in optim_code(tmp_path, code) if f[0] == "PA405"] == []
    code += "        scaler.unscale_(opt)\n"
    assert [f for f in optim_code(tmp_path, code) if f[0] == "PA405"] == [("PA405", 4, None)]


def test_a_trainer_with_deepspeed_or_without_fp16_is_not_reported(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        from transformers import AutoModel, Trainer, TrainingArguments
        from trl import SFTTrainer
        def main(args, lora):
            model = AutoModel.from_pretrained("x", dtype=torch.float16)
            a = Trainer(model=model, args=TrainingArguments("o", fp16=True, deepspeed="ds.json"))
            b = Trainer(model=model, args=TrainingArguments("o", bf16=True))
            c = Trainer(model, TrainingArguments("o", fp16=args.fp16))
            d = SFTTrainer(model=model, args=TrainingArguments("o", fp16=True), peft_config=lora)
    """)
    assert [f for f in found if f[0] == "PA405"] == [("PA405", 6, "when args.fp16 is true")]
    # the Trainer that trains the fp16 weights without fp16=True builds an AdamW over them
    # (frameworks/hf_trainer.py): PA406/PA407 there, tested in test_training_frameworks.py
    assert {line for rule, line, _ in found if rule != "PA405"} == {8, 9}


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA405", tmp_path)
