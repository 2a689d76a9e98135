"""PA407 no-fp32-master-weights: the dtype of the parameters an optimizer updates, read statically.
The hazard sample, its clean twin, the rule page's Example and Use instead, and the ways real
code is written."""
import textwrap

import pytest
from training_rules import OPTIM, assert_page_examples, sample

optim_found, optim_code = OPTIM.conditions, OPTIM.code_conditions


HAZARDS = [("pa407_no_fp32_master_weights_hazard.py", [("PA407", 11, None)])]


def test_the_hazard_samples_fire_at_their_lines_under_their_conditions_and_their_twins_are_clean():
    for name, expected in HAZARDS:
        assert optim_found(sample(name)) == expected
        assert optim_found(sample(name.replace("_hazard", "_clean"))) == []


def test_the_message_names_the_update_lost_to_rounding():
    (f,) = OPTIM.run(sample(HAZARDS[0][0]))
    assert "2^-8 = 0.0039 for a weight of 1.0" in f.message and f.severity == "warning"
    assert "{" not in f.message + f.fix["to"]


def test_bf16_parameters_never_underflow_eps_but_lose_small_updates(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        def main():
            model = Net().to(dtype=torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-8)
    """)
    assert found == [("PA407", 5, None)]


def test_the_dtype_follows_flags_if_branches_and_calls(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        from torch.optim import Adam

        def make(model, cfg):
            return Adam(model.parameters(), lr=cfg.lr)

        def main(args, cfg):
            if args.half_precision:
                dtype = torch.float16
            elif args.bf16:
                dtype = torch.bfloat16
            else:
                dtype = torch.float32
            model = Net()
            model.to("cuda", dtype)
            optimizer = make(model, cfg)
    """)
    # PA407 names the simplest path on which it holds (fp16 here; bf16 is another)
    assert found == [("PA406", 6, "when args.half_precision is true"), ("PA407", 6, "when args.half_precision is true")]


def test_a_submodule_of_a_converted_model_and_a_branch_that_trains_then_returns(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        def main(args):
            model = Net()
            model.config.use_cache = False
            if args.pure_bf16:
                model.bfloat16()
                opt = torch.optim.AdamW(model.encoder.parameters(), lr=1e-4)
                return train(model, opt)
    """)
    assert found == [("PA407", 8, "when args.pure_bf16 is true")]


def test_a_conversion_inside_an_if_is_conditional(tmp_path):
    found = optim_code(tmp_path, """
        import torch
        def main(config):
            model = Net()
            if config.pure_fp16:
                model.half()
            opt = torch.optim.Adam(model.parameters())
    """)
    assert ("PA406", 7, "when config.pure_fp16 is true") in found


@pytest.mark.parametrize("code", [
    # an inference copy only
    """
    model = Net()
    ema = copy.deepcopy(model).half()
    opt = torch.optim.Adam(model.parameters())
    """,
    # fp16 for inference, no optimizer
    """
    model = Net().half().eval()
    out = model(x)
    """,
    # converted back before the optimizer
    """
    model = Net().half()
    model.float()
    opt = torch.optim.Adam(model.parameters())
    """,
    # a PEFT wrapper: the trained adapters are not the converted weights
    """
    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16)
    model = get_peft_model(model, config)
    opt = torch.optim.AdamW(model.parameters())
    """,
    # quantized loading
    """
    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16, load_in_8bit=True)
    opt = torch.optim.AdamW(model.parameters())
    """,
    # a new fp32 head after the conversion, parameters frozen in a loop
    """
    model = Net().half()
    for p in model.parameters():
        p.requires_grad = False
    model.head = nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.head.parameters())
    """,
    # the dtype is a value the analysis cannot know
    """
    model = Net().to(getattr(torch, args.dtype))
    opt = torch.optim.AdamW(model.parameters())
    """,
    # converted only after training, for export
    """
    model = Net()
    opt = torch.optim.AdamW(model.parameters())
    train(model, opt)
    model.half()
    """,
    # DeepSpeed keeps fp32 master weights for the optimizer it is given
    """
    model = Net().half()
    optimizer = torch.optim.AdamW(model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds.json")
    """,
    # accelerate may run DeepSpeed from its config
    """
    model = AutoModelForCausalLM.from_pretrained("x", dtype=torch.bfloat16)
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters()))
    """,
    # transformers' PEFT integration: the trained parameters are the adapter's
    """
    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.float16)
    model.add_adapter(lora_config)
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters())
    """,
    # converted in an evaluation branch that returns
    """
    model = Net()
    if args.eval_only:
        model.half()
        evaluate(model)
        return
    opt = torch.optim.AdamW(model.parameters())
    """,
    # diffusers: frozen, converted, LoRA added, trainable parameters cast back to fp32
    """
    unet.requires_grad_(False)
    unet.to("cuda", dtype=torch.float16)
    cast_training_params(unet, dtype=torch.float32)
    opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, unet.parameters()))
    """,
    # tensors, not the model, are halved
    """
    model = Net()
    x = x.half()
    opt = torch.optim.Adam(model.parameters())
    """,
])
def test_idiomatic_or_unknown_code_gives_no_finding(tmp_path, code):
    body = textwrap.indent(textwrap.dedent(code), "    ")
    assert optim_code(tmp_path, "import copy\nimport torch\nfrom transformers import AutoModelForCausalLM\n"
                                f"def main(args, x, config, unet):\n{body}") == []


LIGHTNING = """
    import lightning as L
    import torch

    class LitModel(L.LightningModule):
        def configure_optimizers(self):
            return torch.optim.AdamW(self.model.parameters(), lr=1e-4)

    def main(args):
        trainer = L.Trainer(precision={precision}, max_epochs=1{strategy})
        trainer.fit(LitModel())
"""


@pytest.mark.parametrize("precision,strategy,expected", [
    ('"bf16-true"', "", [("PA407", 7, None)]),
    ('"16-true"', "", [("PA406", 7, None), ("PA407", 7, None)]),
    ('"bf16-true" if args.pure else "bf16-mixed"', ', strategy="ddp"', [("PA407", 7, "when args.pure is true")]),
    ('"bf16-mixed"', "", []),                      # fp32 weights under autocast
    ('"16-mixed"', "", []),
    ('"bf16-true"', ', strategy="deepspeed_stage_2"', []),   # DeepSpeed brings its own precision
])
def test_lightning_true_precisions_train_the_modules_own_low_precision_weights(tmp_path, precision, strategy, expected):
    """Lightning converts the module (HalfPrecision.convert_module) before configure_optimizers."""
    assert optim_code(tmp_path, LIGHTNING.format(precision=precision, strategy=strategy)) == expected


def test_an_optimizer_over_fp32_copies_of_half_parameters_is_silent(tmp_path):
    """The PyTorch forum's fix for Adam + half NaNs: fp32 master copies made in a
    comprehension; Adam updates those, so neither eps nor lost updates apply."""
    path = tmp_path / "master.py"
    path.write_text(
        "import torch\n"
        "def train(net):\n"
        "    net = net.half()\n"
        "    master = [p.detach().clone().float().requires_grad_(True) for p in net.parameters()]\n"
        "    opt = torch.optim.Adam(master, lr=1e-3)\n"
        "    half = [p for p in net.parameters()]\n"
        "    opt2 = torch.optim.Adam(half, lr=1e-3)\n")
    found = set(OPTIM.findings(path))
    assert found == {("PA406", 7), ("PA407", 7)}


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA407", tmp_path)
