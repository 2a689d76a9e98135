"""The training stage's one value model (training/guards.py, lookup.py): a value under a
guard, one backward lookup of what a name holds, and one wording of a condition, so that
both strategies (the step walk and the lookup) name a flag the same way, as argparse spells
it where the script declares it and as written where it does not."""
import textwrap

import pytest
from training_rules import Audit, write

from precisionaudit.training.guards import Atom, Possible, equals, simplify, words

ALL = Audit("PA403", "PA407", "PA421")

SCRIPT = textwrap.dedent("""\
    import argparse
    import torch
    from torch.distributed.fsdp import MixedPrecision

    def main(args):
        dtype = torch.float16 if args.fp16 else torch.float32
        policy = MixedPrecision(param_dtype=dtype)
        model = Net().to(dtype)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in data:
            with torch.autocast("cuda", dtype=dtype):
                loss = model(x).sum()
            loss.backward()
            opt.step()
    """)
DECLARED = 'parser = argparse.ArgumentParser()\nparser.add_argument("--fp16", action="store_true")\n'


@pytest.mark.parametrize("declared,words", [(True, "--fp16 is set"), (False, "args.fp16 is true")])
def test_the_walk_and_the_lookup_name_one_flag_one_way(tmp_path, declared, words):
    """PA403 (the walk), PA407 (the optimizer's parameters) and PA421 (the FSDP policy)
    under one flag: one wording, ``--fp16`` only where argparse declares it."""
    path = write(tmp_path, SCRIPT + (DECLARED if declared else ""))
    conditions = {rule: condition for rule, _, condition in ALL.conditions(path)}
    assert conditions == {"PA403": f"when {words}", "PA407": f"when {words}", "PA421": f"when {words}"}


def test_a_flag_read_from_a_parse_args_result_of_any_name_is_the_flag(tmp_path):
    path = write(tmp_path, SCRIPT.replace("def main(args):", "def main(cfg):").replace("args.fp16", "cfg.fp16")
                 + DECLARED + "main(parser.parse_args())\ncfg = parser.parse_args()\n")
    assert ("PA407", 9, "when --fp16 is set") in ALL.conditions(path)


@pytest.mark.parametrize("guard,expected", [
    (frozenset(), None),
    (frozenset({("args.fp16", True)}), "when --fp16 is set"),
    (frozenset({("args.fp16", False), ("use_bf16", True)}), "when --fp16 is not set and use_bf16 is true"),
    (frozenset({("(i + 1) % accum == 0", False)}), "when not ((i + 1) % accum == 0)"),
    (frozenset({("cf.dtype ==", "bf16")}), "when cf.dtype == 'bf16'"),
])
def test_words(guard, expected):
    assert words(guard, {"args.fp16": "--fp16"}) == expected


def test_guards_that_differ_in_one_literal_merge_to_what_they_share():
    a, b = frozenset({("x", True), ("y", True)}), frozenset({("x", False), ("y", True)})
    assert simplify([a, b]) == frozenset({("y", True)})
    assert simplify([a, frozenset()]) is None
    assert Possible(1, a).given(frozenset({("x", False)})) is None
    assert Atom("x") == Atom("x") and Atom("x") != Atom("y")


def test_one_unknown_never_equals_two_constants_on_one_path(tmp_path):
    """``if x == "fp16": scaler = ...`` and ``if x == "bf16": autocast(bf16)`` cannot both
    hold: the scaler never scales a bf16-only loss (no PA404). Equal to one constant and
    different from another may hold at once: the scaler scales a loss computed in fp32 when
    x is neither, and PA404's bf16 case needs x == "bf16" (still silent)."""
    path = write(tmp_path, """\
        import torch

        def train(model, optimizer, data, args):
            scaler = None
            if args.precision == "fp16":
                scaler = torch.amp.GradScaler("cuda")
            for x in data:
                if args.precision == "bf16":
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = model(x)
                else:
                    loss = model(x)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    loss.backward()
                    optimizer.step()
        """)
    assert Audit("PA404").conditions(path) == []
    bf16_scaler = path.read_text().replace('if args.precision == "fp16":', 'if args.precision != "fp16":')
    path.write_text(bf16_scaler)
    assert Audit("PA404").conditions(path) == [("PA404", 6, 'when args.precision == \'bf16\'')]


def test_equality_literals_contradict_and_merge_as_one_comparison():
    fp16, bf16, not_fp16 = equals("x", "fp16"), equals("x", "bf16"), equals("x", "fp16", False)
    assert Possible(1, fp16).given(bf16) is None
    assert Possible(1, fp16).given(not_fp16) is None
    assert Possible(1, bf16).given(not_fp16) is not None
    assert simplify([fp16 | {("y", True)}, not_fp16 | {("y", True)}]) == frozenset({("y", True)})
    assert words(bf16 | not_fp16, {}) == "when x == 'bf16'"
    assert words(not_fp16 | equals("x", "fp32", False), {}) == "when x != 'fp16' and x != 'fp32'"
    assert words(equals("args.dtype", "bf16"), {"args.dtype": "--dtype"}) == "when --dtype is 'bf16'"
    assert words(equals("args.dtype", "bf16", False), {"args.dtype": "--dtype"}) == "when --dtype is not 'bf16'"


MASTER = Audit("PA407")


def test_a_dtype_named_by_a_string_is_that_dtype(tmp_path):
    """``getattr(torch, cfg.dtype)`` with a config class's default, and a dict of dtypes
    looked up with a flag's value: the dtype under the condition that the value is the one
    declared (the user may pass another)."""
    path = write(tmp_path, """\
        import torch
        from dataclasses import dataclass

        @dataclass
        class Config:
            dtype: str = "bfloat16"

        def train(cfg, model):
            model = model.to(getattr(torch, cfg.dtype))
            opt = torch.optim.AdamW(model.parameters())
        """)
    assert MASTER.conditions(path) == [("PA407", 10, "when cfg.dtype == 'bfloat16'")]
    path.write_text(path.read_text() + "train(Config(dtype='float32'), None)\n")
    assert MASTER.conditions(path) == []  # built with another dtype: the default is not what runs
    path = write(tmp_path, """\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--precision", default="fp16")
        args = parser.parse_args()
        DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
        model = Net().to({"bf16": torch.bfloat16, "fp32": torch.float32}[args.precision])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        other = Net().to(DTYPES[args.precision])
        opt2 = torch.optim.SGD(other.parameters(), lr=0.1)
        """, "flags.py")
    assert MASTER.conditions(path) == [("PA407", 9, "when --precision is 'bf16'"),
                                       ("PA407", 11, "when --precision is 'fp16'")]


def test_a_model_made_by_a_helper_a_factory_or_passed_to_a_class_is_followed(tmp_path):
    path = write(tmp_path, """\
        import torch
        from transformers import AutoModelForCausalLM

        def load_model(name, dtype):
            return AutoModelForCausalLM.from_pretrained(name, torch_dtype=dtype)

        class Runner:
            def __init__(self, model):
                self.model = model

            def build(self, name):
                self.net = load_model(name, torch.bfloat16)

            def fit(self):
                a = torch.optim.AdamW(self.model.parameters())
                b = torch.optim.AdamW(self.net.parameters())

        Runner(model=make_model("gpt2", dtype=torch.float16))
        """)
    assert MASTER.findings(path) == [("PA407", 15), ("PA407", 16)]
    messages = [f.message for f in MASTER.run(path)]
    assert "float16 parameters (made float16 at line 18)" in messages[0]
    assert "bfloat16 parameters (made bfloat16 at line 5)" in messages[1]
