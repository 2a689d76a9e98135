"""The frameworks that own the training step (training/frameworks/, read by step/owned.py):
Lightning's manual optimization, Fabric, accelerate, DeepSpeed, the HF Trainer's optimizer
and Keras's compile. Each case is written as the framework's own examples write it; a
hazard fires where the framework really leaves the gradients scaled (or the weights fp16),
and the same code under a precision that does not scale, or written the framework's way,
gives nothing."""
import pytest
from training_rules import AMP_RULES, Audit, fixed, write

from precisionaudit.training import frameworks
from precisionaudit.training.frameworks import hf_trainer, keras

AMP = Audit(*AMP_RULES)
ALL = Audit(*AMP_RULES, "PA405", "PA406", "PA407", "PA431")

LIGHTNING = """\
    import torch
    import lightning as L


    class LitModel(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            loss = self.model(batch)
            opt.zero_grad()
            self.manual_backward(loss)
            CLIP
            opt.step()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    TRAINER
    """
TORCH_CLIP = "torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)"
LIGHTNING_CLIP = 'self.clip_gradients(opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")'


def lightning(tmp_path, clip, trainer):
    return write(tmp_path, LIGHTNING.replace("CLIP", clip).replace("TRAINER", trainer))


@pytest.mark.parametrize("clip", [TORCH_CLIP, LIGHTNING_CLIP])
def test_a_clip_between_manual_backward_and_step_under_16_mixed_clips_scaled_gradients(tmp_path, clip):
    """``self.clip_gradients`` too: in manual optimization it calls no unscale_ (Lightning
    #18089); the message names the framework call and the hook that works."""
    path = lightning(tmp_path, clip, 'trainer = L.Trainer(precision="16-mixed")')
    [finding] = AMP.run(path)
    assert (finding.rule, finding.line, finding.evidence.get("condition")) == ("PA401", 15, None)
    assert "after self.manual_backward(loss) under precision='16-mixed'" in finding.message
    assert "MixedPrecision.optimizer_step" in finding.message
    assert "on_before_optimizer_step" in finding.fix["to"] and not finding.fix["autofix"]


@pytest.mark.parametrize("trainer", ['trainer = L.Trainer(precision="bf16-mixed")', "trainer = L.Trainer()",
                                     "trainer = L.Trainer(precision=32)", 'trainer = L.Trainer(precision="16-true")'])
def test_no_scaled_gradients_where_the_precision_does_not_scale(tmp_path, trainer):
    assert AMP.findings(lightning(tmp_path, TORCH_CLIP, trainer)) == []


def test_without_a_trainer_in_the_file_the_finding_says_under_which_precision(tmp_path):
    assert AMP.conditions(lightning(tmp_path, TORCH_CLIP, "")) == [
        ("PA401", 15, "when the Trainer's precision is '16-mixed'")]


def test_a_clip_in_the_hook_after_lightnings_unscale_is_clean(tmp_path):
    text = LIGHTNING.replace("CLIP", "pass").replace("TRAINER", 'trainer = L.Trainer(precision="16-mixed")')
    text = text.replace("        def configure_optimizers", "        def on_before_optimizer_step(self, optimizer):\n"
                        "            self.clip_gradients(optimizer, gradient_clip_val=0.5)\n\n"
                        "        def configure_optimizers")
    assert AMP.findings(write(tmp_path, text)) == []


def test_a_plain_backward_before_lightnings_step_is_a_step_of_unscaled_gradients(tmp_path):
    text = LIGHTNING.replace("self.manual_backward(loss)", "loss.backward()").replace("CLIP", "pass")
    path = write(tmp_path, text.replace("TRAINER", "trainer = L.Trainer(precision=16)"))
    [finding] = AMP.run(path)
    assert (finding.rule, finding.line) == ("PA402", 16)
    assert "Lightning's loss scaler under precision=16" in finding.message
    assert finding.fix["to"].startswith("call self.manual_backward(loss)")
    raw = text.replace("self.optimizers()", "self.optimizers(use_pl_optimizer=False)")
    assert AMP.findings(write(tmp_path, raw.replace("TRAINER", "trainer = L.Trainer(precision=16)"))) == []


def test_two_losses_backward_before_two_lightning_steps_unscale_with_a_changed_scale(tmp_path):
    """Each LightningOptimizer.step updates the scale: the second optimizer's gradients were
    scaled before the first step's update. Backward-then-step per optimizer is clean."""
    code = """\
        import lightning as L

        class GAN(L.LightningModule):
            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                self.manual_backward(self.g_loss(batch))
                self.manual_backward(self.d_loss(batch))
                opt_g.step()
                opt_d.step()

        trainer = L.Trainer(precision="16-mixed")
        """
    assert AMP.code(tmp_path, code) == [("PA402", 9)]
    d_backward, g_step = "self.manual_backward(self.d_loss(batch))", "opt_g.step()"
    alternated = code.replace(f"{d_backward}\n                {g_step}", f"{g_step}\n                {d_backward}")
    assert AMP.code(tmp_path, alternated) == []


def test_a_half_module_fit_by_a_16_mixed_trainer_raises_in_its_grad_scaler(tmp_path):
    code = """\
        import pytorch_lightning as pl

        def train(config):
            model = Model(**config)
            model.half()
            trainer = pl.Trainer(max_epochs=3, precision=PRECISION)
            trainer.fit(model=model)
        """
    assert ALL.code(tmp_path, code.replace("PRECISION", "16")) == [("PA405", 5)]
    assert ALL.code(tmp_path, code.replace("PRECISION", '"16-mixed"')) == [("PA405", 5)]
    assert ALL.code(tmp_path, code.replace("PRECISION", '"bf16-mixed"')) == []


FABRIC = """\
    import torch
    from lightning.fabric import Fabric

    fabric = Fabric(precision="16-mixed")
    model, optimizer = fabric.setup(model, optimizer)
    for batch in loader:
        loss = model(batch)
        fabric.backward(loss)
        CLIP
        optimizer.step()
    """


def test_fabric_scales_in_backward_and_its_own_clip_unscales(tmp_path):
    path = write(tmp_path, FABRIC.replace("CLIP", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"))
    [finding] = AMP.run(path)
    assert (finding.rule, finding.line) == ("PA401", 9) and "fabric.clip_gradients" in finding.fix["to"]
    clean = FABRIC.replace("CLIP", "fabric.clip_gradients(model, optimizer, max_norm=1.0)")
    assert AMP.findings(write(tmp_path, clean)) == []


ACCELERATE = """\
    import torch
    from accelerate import Accelerator

    def main(args):
        accelerator = Accelerator(mixed_precision=PRECISION, gradient_accumulation_steps=args.accumulation)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(batch)
                accelerator.backward(loss)
                CLIP
                optimizer.step()
                optimizer.zero_grad()
    """


def accelerate(tmp_path, clip, precision='"fp16"'):
    return write(tmp_path, ACCELERATE.replace("PRECISION", precision).replace("CLIP", clip))


def test_torchs_clip_after_accelerator_backward_under_fp16_is_fixed_into_accelerates(tmp_path):
    path = accelerate(tmp_path, "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
                      '"fp16"').read_text().replace(", gradient_accumulation_steps=args.accumulation", "")
    path = write(tmp_path, path)
    [finding] = AMP.run(path)
    assert (finding.rule, finding.line) == ("PA401", 11) and finding.fix["autofix"]
    assert "after accelerator.backward(loss) under mixed_precision='fp16'" in finding.message
    new = fixed(path)
    assert "accelerator.clip_grad_norm_(model.parameters(), 1.0)" in new
    assert AMP.findings(write(tmp_path, new, "fixed.py")) == []


def test_no_autofix_where_a_micro_step_reaches_the_clip(tmp_path):
    """Under accumulation, accelerate's clip on a micro-step raises (PA402): the rewrite would
    trade one finding for another, so it is not made."""
    path = accelerate(tmp_path, "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    assert not any(f.fix["autofix"] for f in AMP.run(path))
    assert fixed(path) == path.read_text()


def test_accelerates_clip_on_every_micro_step_unscales_twice_before_an_update(tmp_path):
    path = accelerate(tmp_path, "accelerator.clip_grad_norm_(model.parameters(), 1.0)")
    [finding] = AMP.run(path)
    assert (finding.rule, finding.line, finding.evidence["condition"]) == (
        "PA402", 11, "when accelerator.sync_gradients is false")
    assert "unscale_() has already been called" in finding.message
    guarded = "if accelerator.sync_gradients:\n                    accelerator.clip_grad_norm_(model.parameters(), 1.0)"
    assert AMP.findings(accelerate(tmp_path, guarded)) == []


@pytest.mark.parametrize("precision", ['"bf16"', '"no"'])
def test_accelerate_without_fp16_scales_nothing(tmp_path, precision):
    for clip in ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
                 "accelerator.clip_grad_norm_(model.parameters(), 1.0)"):
        assert AMP.findings(accelerate(tmp_path, clip, precision)) == []


def test_an_accelerator_made_elsewhere_scales_when_its_config_says_fp16(tmp_path):
    code = """\
        import torch
        import accelerate

        def train_one_epoch(accelerator, model, optimizer, loader):
            for batch in loader:
                accelerator.backward(model(batch))
                torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
                optimizer.step()
        """
    assert AMP.code_conditions(tmp_path, code) == [("PA401", 7, "when accelerate's mixed_precision is 'fp16'")]
    named = ACCELERATE.replace("PRECISION", "args.mixed_precision").replace(
        ", gradient_accumulation_steps=args.accumulation", "").replace(
        "CLIP", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    assert AMP.code_conditions(tmp_path, named) == [("PA401", 11, "when args.mixed_precision == 'fp16'")]


def test_accelerate_prepares_an_optimizer_over_fp16_weights_for_its_grad_scaler(tmp_path):
    code = """\
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator(mixed_precision="fp16")
        unet = UNet2DConditionModel.from_pretrained(name, subfolder="unet")
        vae = AutoencoderKL.from_pretrained(name, subfolder="vae")
        vae.to(accelerator.device, dtype=torch.float16)
        unet.to(accelerator.device, dtype=WEIGHTS)
        optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-5)
        unet, optimizer = accelerator.prepare(unet, optimizer)
        """
    assert Audit("PA405").code(tmp_path, code.replace("WEIGHTS", "torch.float16")) == [("PA405", 8)]
    assert Audit("PA405").code(tmp_path, code.replace("WEIGHTS", "torch.float32")) == []


def test_parameters_chosen_by_a_flag_keep_the_flag_and_the_paths_merge(tmp_path):
    """diffusers' research LoRA script (#2780 / PR #2795): the optimizer takes the text
    encoder's parameters only ``if args.train_text_encoder``, so casting the text encoder to
    fp16 only when it is not trained is clean, and casting it always holds when it is trained.
    The U-Net, in both branches' parameters and in both ``prepare`` calls, is reported with
    no condition on the flag."""
    code = """\
        import itertools
        import torch
        from accelerate import Accelerator

        def main(args, unet, text_encoder, loader):
            accelerator = Accelerator(mixed_precision="fp16")
            CAST
            params = (itertools.chain(unet.parameters(), text_encoder.parameters())
                      if args.train_text_encoder else unet.parameters())
            optimizer = torch.optim.AdamW(params, lr=1e-4)
            if args.train_text_encoder:
                unet, text_encoder, optimizer = accelerator.prepare(unet, text_encoder, optimizer)
            else:
                unet, optimizer = accelerator.prepare(unet, optimizer)
        """
    pa405 = Audit("PA405")
    guarded = "if not args.train_text_encoder:\n                text_encoder.to(accelerator.device, dtype=torch.float16)"
    assert pa405.code(tmp_path, code.replace("CAST", guarded)) == []
    always = "text_encoder.to(accelerator.device, dtype=torch.float16)"
    assert pa405.code_conditions(tmp_path, code.replace("CAST", always), "always.py") == [
        ("PA405", 7, "when args.train_text_encoder is true")]
    unet = "unet.to(accelerator.device, dtype=torch.float16)"
    assert pa405.code_conditions(tmp_path, code.replace("CAST", unet), "unet.py") == [("PA405", 7, None)]


DEEPSPEED = """\
    import torch
    import deepspeed

    def main(model, loader):
        ds_config = {"train_batch_size": 8, "PRECISION": {"enabled": True}}
        engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                       config=CONFIG)
        for batch in loader:
            loss = engine(batch)
            engine.backward(loss)
            torch.nn.utils.clip_grad_norm_(engine.parameters(), 1.0)
            engine.step()
    """


@pytest.mark.parametrize("precision,config,expected", [
    ("fp16", "ds_config", [("PA401", 11, None)]),
    ("bf16", "ds_config", []),
    ("fp16", "args.deepspeed_config", [("PA401", 11, "when the DeepSpeed config enables fp16")]),
])
def test_a_torch_clip_between_engine_backward_and_step_clips_scaled_gradients(tmp_path, precision, config, expected):
    path = write(tmp_path, DEEPSPEED.replace("PRECISION", precision).replace("CONFIG", config))
    assert AMP.conditions(path) == expected
    if expected:
        assert '"gradient_clipping"' in AMP.run(path)[0].fix["to"]


def test_the_deepspeed_config_is_read_from_the_json_file_the_script_names(tmp_path):
    write(tmp_path, '{"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0}}', "ds.json")
    path = write(tmp_path, DEEPSPEED.replace("CONFIG", '"ds.json"'))
    assert AMP.findings(path) == [("PA401", 11)]
    write(tmp_path, '{"train_batch_size": 8, "bf16": {"enabled": true}}', "ds.json")
    assert AMP.findings(path) == []


def test_deepspeeds_other_scaled_backward_and_its_loud_plain_one(tmp_path):
    """``engine.scale(loss).backward()`` leaves scaled gradients like ``engine.backward``; a
    plain ``loss.backward()`` under fp16 raises inside DeepSpeed (not reported)."""
    scaled = DEEPSPEED.replace("PRECISION", "fp16").replace("CONFIG", "ds_config").replace(
        "engine.backward(loss)", "engine.scale(loss).backward()")
    assert AMP.code(tmp_path, scaled) == [("PA401", 11)]
    plain = scaled.replace("engine.scale(loss).backward()", "loss.backward()").replace(
        "            torch.nn.utils.clip_grad_norm_(engine.parameters(), 1.0)\n", "")
    assert AMP.code(tmp_path, plain) == []


def test_an_engine_made_by_a_helper_of_the_file_and_a_clip_imported_by_name(tmp_path):
    """DALLE-pytorch's ``maybe_distribute`` returns ``deepspeed.initialize(...)`` (or what it
    was given): its result is the engine. The clip imported by name (``from torch.nn.utils
    import clip_grad_norm_``) is reported like torch's attribute spelling; an accelerator a
    helper returns is one too, and a helper that returns no maker makes nothing."""
    code = """\
        import deepspeed
        from torch.nn.utils import clip_grad_norm_

        def maybe_distribute(args=None, model=None, **kwargs):
            if not args.deepspeed:
                return (model, None, None, None)
            return deepspeed.initialize(args=args, model=model, **kwargs)

        def main(args, model, loader):
            (distr, opt, _, _) = maybe_distribute(args=args, model=model, config_params={"fp16": {"enabled": True}})
            for batch in loader:
                loss = distr(batch)
                distr.backward(loss)
                clip_grad_norm_(distr.parameters(), 0.5)
                distr.step()
        """
    assert AMP.code_conditions(tmp_path, code) == [("PA401", 14, "when the DeepSpeed config enables fp16")]
    unrelated = code.replace("return deepspeed.initialize(args=args, model=model, **kwargs)",
                             "return (model, None, None, None)")
    assert AMP.code(tmp_path, unrelated, "plain.py") == []
    accelerate = """\
        import torch
        from accelerate import Accelerator
        from torch.nn.utils import clip_grad_norm_

        def get_accelerator(args):
            return Accelerator(mixed_precision="fp16")

        def main(args, model, optimizer, loader):
            accelerator = get_accelerator(args)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                accelerator.backward(model(batch))
                clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
        """
    [finding] = AMP.run(write(tmp_path, accelerate, "accelerate_helper.py"))
    assert (finding.rule, finding.line) == ("PA401", 13)
    assert "accelerator.clip_grad_norm_(model.parameters(), 1.0)" in fixed(tmp_path / "accelerate_helper.py")


TRAINER = """\
    import torch
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", dtype=WEIGHTS)
    args = TrainingArguments(output_dir="out", ARGS)
    trainer = Trainer(model=model, args=args, train_dataset=train_ds)
    """


@pytest.mark.parametrize("weights,args,expected", [
    ("torch.float16", "num_train_epochs=1", [
        ("PA406", 6, "when the Trainer's default optim is adamw_torch (torch < 2.8)"), ("PA407", 6, None)]),
    ("torch.float16", 'optim="adamw_torch"', [("PA406", 6, None), ("PA407", 6, None)]),
    ("torch.float16", 'optim="adamw_torch_fused"', [("PA407", 6, None)]),
    ("torch.bfloat16", "bf16=True", [("PA407", 6, None)]),
    ("torch.float16", 'optim="adamw_bnb_8bit"', []),  # not torch.optim's
    ("torch.float16", 'deepspeed="ds.json"', []),  # DeepSpeed keeps fp32 master weights
    ("torch.float32", "bf16=True", []),
])
def test_the_trainer_builds_an_adamw_over_the_weights_it_is_given(tmp_path, weights, args, expected):
    path = write(tmp_path, TRAINER.replace("WEIGHTS", weights).replace("ARGS", args))
    assert ALL.conditions(path) == expected
    for finding in ALL.run(path):
        assert "built by the Trainer at line 6" in finding.message


def test_a_trainer_given_its_optimizer_builds_none(tmp_path):
    text = TRAINER.replace("WEIGHTS", "torch.float16").replace("ARGS", "num_train_epochs=1").replace(
        "train_dataset=train_ds", "train_dataset=train_ds, optimizers=(opt, None)")
    assert ALL.findings(write(tmp_path, text)) == []


KERAS_GAN = """\
    import tensorflow as tf
    from tensorflow import keras

    keras.mixed_precision.set_global_policy("mixed_float16")


    class GAN(keras.Model):
        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile(SUPER)
            self.d_optimizer = d_optimizer
            self.loss_fn = loss_fn

        def train_step(self, real_images):
            with tf.GradientTape() as tape:
                d_loss = self.loss_fn(labels, self.discriminator(real_images))
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            OPTIMIZER.apply_gradients(zip(grads, self.discriminator.trainable_weights))
    """


def test_a_compile_override_that_keeps_its_optimizers_leaves_them_unscaled(tmp_path):
    path = write(tmp_path, KERAS_GAN.replace("SUPER", "").replace("OPTIMIZER", "self.d_optimizer"))
    [finding] = Audit("PA431").run(path)
    assert finding.line == 16 and "self.d_optimizer, kept by the compile() override" in finding.message
    for passed, optimizer in (("optimizer=d_optimizer", "self.d_optimizer"), ("", "self.optimizer")):
        clean = KERAS_GAN.replace("SUPER", passed).replace("OPTIMIZER", optimizer)
        assert Audit("PA431").findings(write(tmp_path, clean)) == []


def test_every_table_entry_cites_the_framework_function_it_encodes():
    for framework in frameworks.step_frameworks():
        entries = [*framework.apis.values(), *framework.optimizer.values()]
        assert entries and framework.precisions and framework.remedy.get("PA401")
        for api in entries:
            assert api.source.split(" ", 1)[0].endswith(".py"), (framework.name, api.method, api.source)
        assert any(p.scales for p in framework.precisions.values())
    assert hf_trainer.SOURCE and hf_trainer.OPTIMS["adamw_torch_fused"] == ("AdamW", True)
    assert keras.SOURCE.startswith("keras/src/trainers/trainer.py")
