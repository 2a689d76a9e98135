"""The AMP-protocol rules (PA401-PA404, PA408, PA409) on training scripts read statically:
each hazard sample fires at its line with its condition, each clean twin and each
idiom (the PyTorch AMP examples, accelerate, HF Trainer, Lightning) gives nothing, and
the ways real code is written (a scaler passed as a parameter, an aliased import, a
Trainer-like class, a flag) are read."""
import os
import textwrap

import pytest

from precisionaudit.rules.engine import load_rules
from precisionaudit.frontend.training import audit as audit_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples", "training")
AMP_RULES = ("PA401", "PA402", "PA403", "PA404", "PA408", "PA409")


def sample(name):
    return os.path.join(SAMPLES, name)


def line_of(path, text, nth=1):
    """The 1-based line of the ``nth`` line of ``path`` that contains ``text`` (that is
    ``text``, stripped, when ``text`` ends with a closing parenthesis: a statement)."""
    exact = text.endswith(")")
    hits = [i for i, line in enumerate(open(path, encoding="utf-8"), 1)
            if (line.strip() == text.strip() if exact else text in line)]
    return hits[nth - 1]


def audit(path, rules=AMP_RULES):
    return audit_file(str(path), [r for r in load_rules() if r.id in rules])


def found(path, rules=AMP_RULES):
    return sorted((f.rule, f.line, f.evidence.get("condition")) for f in audit(path, rules))


def script(tmp_path, text, name="train.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# ------------------------------------------------------------------- hazard samples and twins
def test_pa401_fires_at_the_clip_when_the_flag_enables_the_scaler():
    path = sample("pa401_clip_before_unscale_hazard.py")
    assert found(path) == [("PA401", line_of(path, "clip_grad_norm_("), "when --amp is set")]


def test_pa402_fires_at_each_broken_step_of_the_protocol():
    path = sample("pa402_scaler_step_protocol_hazard.py")
    assert found(path, ["PA402"]) == sorted([
        ("PA402", line_of(path, "self.scaler.update()"), "when fp16 is true"),  # every micro-step
        ("PA402", line_of(path, "optimizer.step()"), None),  # plain step beside scaler.step
        ("PA402", line_of(path, "scaler.step(optimizer)", 2), None),  # after an unscaled backward
        ("PA402", line_of(path, "scaler.step(optimizer)", 3), "when i % log_every == 0"),  # update skipped
    ])


def test_pa403_fires_for_a_flag_chosen_float16_and_for_cudas_default_dtype():
    path = sample("pa403_fp16_without_loss_scaling_hazard.py")
    assert found(path) == [("PA403", line_of(path, "loss.backward()", 1), "when --fp16 is set"),
                           ("PA403", line_of(path, "loss.backward()", 2), None)]


def test_pa404_fires_at_the_scaler_when_the_flag_picks_bfloat16():
    path = sample("pa404_scaler_under_bf16_hazard.py")
    assert found(path) == [("PA404", line_of(path, "GradScaler("), "when --fp16 is not set")]


def test_pa408_fires_at_the_backward_inside_autocast():
    path = sample("pa408_backward_under_autocast_hazard.py")
    assert found(path) == [("PA408", line_of(path, "scaler.scale(loss).backward()"), None)]


def test_pa409_fires_at_every_deprecated_use_whatever_the_import_spelling():
    path = sample("pa409_deprecated_amp_api_hazard.py")
    lines = [line_of(path, "@torch.cuda.amp.custom_fwd("), line_of(path, "@torch.cuda.amp.custom_bwd"),
             line_of(path, "GS(enabled"), line_of(path, "with autocast(use_amp):"),
             line_of(path, "with torch.cpu.amp.autocast():")]
    assert found(path) == [("PA409", line, None) for line in lines]
    by_line = {f.line: f for f in audit(path)}
    assert by_line[lines[2]].message.startswith("GS (torch.cuda.amp.GradScaler) is deprecated")
    assert 'torch.amp.GradScaler("cuda", ...)' in by_line[lines[2]].message


MINE = tuple(r.lower() for r in AMP_RULES) + ("amp_examples", "idioms")


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(SAMPLES) if n.endswith("_clean.py") and n.startswith(MINE)))
def test_clean_twins_and_idioms_give_no_finding(name):
    """Includes amp_examples_clean.py (the PyTorch AMP examples, as written there) and
    idioms_clean.py (accelerate, HF Trainer fp16=True, Lightning 16-mixed, a Trainer-like
    class with GradScaler("cuda", enabled=(dtype == torch.float16)))."""
    assert audit(sample(name)) == []


def test_each_hazard_sample_has_a_clean_twin():
    names = set(os.listdir(SAMPLES))
    hazards = [n for n in names if n.endswith("_hazard.py") and n.startswith(MINE)]
    assert {n.split("_")[0] for n in hazards} >= {r.lower() for r in AMP_RULES}
    assert all(n.replace("_hazard", "_clean") in names for n in hazards)


# ------------------------------------------------------------------- how real code is written
def test_an_aliased_scaler_import_and_module_alias_are_resolved(tmp_path):
    path = script(tmp_path, """\
        import torch
        import torch.nn.utils as nu
        from torch.cuda.amp import GradScaler as GS

        def train(model, optimizer, data):
            scaler = GS()
            for x in data:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x).sum()
                scaler.scale(loss).backward()
                nu.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
        """)
    assert found(path) == [("PA401", 11, None), ("PA409", 6, None)]


def test_a_scaler_passed_as_a_parameter_keeps_what_its_maker_knew(tmp_path):
    """Called from main: the scaler is enabled by --amp. Walked alone (nobody in the file
    calls it), a parameter used as a scaler is taken as enabled."""
    called = script(tmp_path, """\
        import argparse
        import torch

        def train_one_epoch(model, loader, optimizer, scaler):
            for x in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x).sum()
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
                scaler.step(optimizer)
                scaler.update()

        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--amp", action="store_true")
            args = parser.parse_args()
            model = torch.nn.Linear(2, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            train_one_epoch(model, [], optimizer, torch.amp.GradScaler("cuda", enabled=args.amp))

        main()
        """)
    assert found(called, ["PA401"]) == [("PA401", 9, "when --amp is set")]
    alone = script(tmp_path, called.read_text().split("def main")[0], "alone.py")
    assert found(alone, ["PA401"]) == [("PA401", 9, None)]


def test_a_scaler_disabled_for_sure_gives_no_clip_finding(tmp_path):
    path = script(tmp_path, """\
        import torch

        def train(model, optimizer, data):
            scaler = torch.amp.GradScaler("cuda", enabled=False)
            for x in data:
                loss = model(x).sum()
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
        """)
    assert found(path) == []


def test_a_trainer_like_class_is_followed_across_its_methods(tmp_path):
    """self.scaler made in __init__ (enabled by a flag), scaled in training_step, clipped
    in optimizer_step, which runs every `accum` iterations of fit."""
    path = script(tmp_path, """\
        import torch

        class Trainer:
            def __init__(self, model, optimizer, args):
                self.model, self.optimizer = model, optimizer
                self.scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)
                self.accum = args.accum

            def training_step(self, batch):
                with torch.autocast("cuda", dtype=torch.float16, enabled=self.scaler.is_enabled()):
                    loss = self.model(batch).sum()
                self.scaler.scale(loss).backward()

            def optimizer_step(self):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()

            def fit(self, loader):
                for i, batch in enumerate(loader):
                    self.training_step(batch)
                    if (i + 1) % self.accum == 0:
                        self.optimizer_step()
        """)
    (finding,) = audit(path)
    assert (finding.rule, finding.line, finding.module) == ("PA401", 15, "Trainer.optimizer_step")
    assert finding.evidence["condition"] == "when args.fp16 is true"


def test_a_branch_on_a_flag_decides_whether_the_backward_was_scaled(tmp_path):
    path = script(tmp_path, """\
        import torch

        def train(model, opt, data, args):
            scaler = torch.amp.GradScaler()
            for x in data:
                with torch.autocast("cuda", enabled=args.amp):
                    loss = model(x).sum()
                if args.amp:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if args.amp:
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
        """)
    assert found(path) == [("PA401", 12, "when args.amp is true")]


def test_gradient_accumulation_with_unscale_on_every_micro_step(tmp_path):
    path = script(tmp_path, """\
        import torch

        def train(model, optimizer, loader, accum):
            scaler = torch.amp.GradScaler("cuda")
            for i, x in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x).sum() / accum
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % accum == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """)
    assert found(path) == [("PA402", 9, None)]


def test_a_loop_over_optimizers_before_one_update_is_the_documented_protocol(tmp_path):
    path = script(tmp_path, """\
        import torch

        def train(models, optimizers, loader, loss_fn):
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = sum(loss_fn(m(x)) for m in models)
                scaler.scale(loss).backward()
                for optimizer in optimizers:
                    scaler.unscale_(optimizer)
                    scaler.step(optimizer)
                scaler.update()
        """)
    assert found(path) == []


def test_a_file_that_mentions_no_amp_word_is_not_analysed(tmp_path):
    path = script(tmp_path, "def f(x):\n    return x + 1\n")
    assert found(path) == []


@pytest.mark.parametrize("flags,expected", [(3, 1), (12, 0)])
def test_too_many_paths_give_silence_not_a_guess(tmp_path, flags, expected):
    """Each flag may unscale: 2**flags paths reach the clip. Three are walked (the clip is
    reported on the one path where no flag unscaled); twelve exceed the cap: silence."""
    branches = "".join(f"        if args.f{i}:\n            scaler.unscale_(opt)\n" for i in range(flags))
    path = script(tmp_path, "import torch\n\ndef train(scaler, opt, model, data, args):\n    for x in data:\n"
                  "        scaler.scale(model(x)).backward()\n" + branches +
                  "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                  "        scaler.step(opt)\n        scaler.update()\n")
    hits = found(path, ["PA401"])
    assert len(hits) == expected
    if expected:
        assert hits[0][2] == " and ".join(f"args.f{i} is false" for i in range(flags)).join(["when ", ""])


# ------------------------------------------------------------------- templates
@pytest.mark.parametrize("rule,name", [
    ("PA401", "pa401_clip_before_unscale_hazard.py"), ("PA402", "pa402_scaler_step_protocol_hazard.py"),
    ("PA403", "pa403_fp16_without_loss_scaling_hazard.py"), ("PA404", "pa404_scaler_under_bf16_hazard.py"),
    ("PA408", "pa408_backward_under_autocast_hazard.py"), ("PA409", "pa409_deprecated_amp_api_hazard.py")])
def test_the_messages_and_fixes_are_filled_by_the_check(rule, name):
    """Bundled rules format strictly: a placeholder nothing fills would raise."""
    findings = audit(sample(name), [rule])
    assert findings
    for f in findings:
        assert "{" not in f.message and not any("{" in str(v) for v in f.fix.values())
        assert f.fix["action"] == "edit"
        # --fix applies PA401's inserts and PA409's rewrites; every other fix is said in words
        assert f.fix["autofix"] is (rule in ("PA401", "PA409"))


# ------------------------------------------------------------------- --fix
def _fixed(path):
    from precisionaudit.training.fix import fixed_source
    from precisionaudit.training.source import read_script

    return fixed_source(read_script(str(path)))


@pytest.mark.parametrize("name,rule", [("pa409_deprecated_amp_api_hazard.py", "PA409"),
                                       ("pa401_clip_before_unscale_hazard.py", "PA401")])
def test_fix_rewrites_the_hazard_into_code_the_rule_accepts(tmp_path, name, rule):
    import ast

    original = open(sample(name), encoding="utf-8").read()
    assert all(f.fix.get("autofix") for f in audit(sample(name), [rule]))
    new = _fixed(sample(name))
    ast.parse(new)
    fixed = tmp_path / name
    fixed.write_text(new)
    assert audit(fixed, [rule]) == []
    # only the findings' lines (and the deprecated import they come from) change, and PA401
    # adds one line: every other line, comments and blank lines included, is the same
    import difflib

    allowed = {f.line for f in audit(sample(name), [rule])}
    allowed |= {i for i, line in enumerate(original.splitlines(), 1) if line.startswith("from torch.cuda.amp")}
    ops = difflib.SequenceMatcher(a=original.splitlines(), b=new.splitlines(), autojunk=False).get_opcodes()
    changed = {i + 1 for tag, i1, i2, _, _ in ops if tag in ("replace", "delete") for i in range(i1, i2)}
    inserted = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag == "insert")
    assert changed <= allowed
    assert inserted == (1 if rule == "PA401" else 0)


def test_fix_of_pa409_spells_the_device_and_keeps_the_argument_meaning():
    new = _fixed(sample("pa409_deprecated_amp_api_hazard.py"))
    assert "from torch.amp import GradScaler as GS, autocast" in new
    assert 'scaler = GS("cuda", enabled=use_amp)' in new
    assert 'with autocast("cuda", enabled=use_amp):  # positional: enabled' in new
    assert '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")' in new
    assert '@torch.amp.custom_bwd(device_type="cuda")' in new
    assert 'with torch.amp.autocast("cpu"):' in new


def test_fix_of_pa401_inserts_unscale_before_the_clip_with_the_stepped_optimizer():
    new = _fixed(sample("pa401_clip_before_unscale_hazard.py")).splitlines()
    at = next(i for i, line in enumerate(new) if "clip_grad_norm_(" in line)
    assert new[at - 1] == "        scaler.unscale_(optimizer)"
    assert new[at - 2] == "        # clips scaled gradients: unscale_ is missing"


def test_a_name_used_as_a_value_is_reported_but_not_rewritten(tmp_path):
    path = script(tmp_path, """\
        import torch
        from torch.cuda.amp import autocast

        ctx = autocast if torch.cuda.is_available() else None
        with autocast():
            pass
        """)
    findings = audit(path, ["PA409"])
    assert [(f.line, f.fix["autofix"]) for f in findings] == [(4, False), (5, False)]
    assert _fixed(path) == path.read_text()


@pytest.mark.parametrize("name", ["pa409_deprecated_amp_api_clean.py", "amp_examples_clean.py",
                                  "pa402_scaler_step_protocol_hazard.py"])
def test_a_file_with_nothing_to_fix_comes_back_byte_identical(name):
    assert _fixed(sample(name)) == open(sample(name), encoding="utf-8").read()


def test_auditing_and_fixing_a_training_script_imports_no_torch():
    """The pre-commit hook's cost: a training script is parsed, never imported, and torch
    (a 1-2 s import) is refused in this interpreter as on a machine without it."""
    import subprocess
    import sys

    code = textwrap.dedent(f"""
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(name)

        sys.meta_path.insert(0, NoTorch())
        from precisionaudit.rules.engine import load_rules
        from precisionaudit.frontend.training import audit as audit_file
        from precisionaudit.training.fix import fixed_source
        from precisionaudit.training.source import read_script
        path = {sample("pa401_clip_before_unscale_hazard.py")!r}
        print(len(audit_file(path, [r for r in load_rules() if r.id == "PA401"])), "scaler.unscale_(optimizer)" in fixed_source(read_script(path)))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "True"]


def test_an_optional_scaler_and_a_context_chosen_by_a_flag(tmp_path):
    """``GradScaler() if args.fp16 else None`` then ``if scaler is not None``: the two
    branches follow the flag, and an autocast context kept in a variable is a region."""
    clean = script(tmp_path, """\
        import contextlib
        import torch

        def train(model, optimizer, data, args):
            scaler = torch.amp.GradScaler("cuda") if args.fp16 else None
            ctx = torch.autocast("cuda", dtype=torch.float16) if args.fp16 else contextlib.nullcontext()
            for x in data:
                with ctx:
                    loss = model(x).sum()
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                else:
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
        """)
    assert found(clean) == []
    hazard = script(tmp_path, clean.read_text().replace('torch.amp.GradScaler("cuda") if args.fp16 else None',
                                                        'torch.amp.GradScaler("cuda") if args.scale else None'),
                    "hazard.py")
    assert found(hazard) == [("PA403", 14, "when args.fp16 is true and args.scale is false")]


def test_a_fallback_for_an_old_torch_is_not_a_deprecated_use(tmp_path):
    """accelerate's own code: the old name only where the installed torch is too old for
    the new one (an import fallback, a version check)."""
    path = script(tmp_path, """\
        import torch
        from accelerate.utils import is_torch_version

        if is_torch_version(">=", "2.4.0"):
            from torch.amp import GradScaler
        else:
            from torch.cuda.amp import GradScaler

        def make(scaler: GradScaler = None, **kwargs):
            if is_torch_version(">=", "2.3"):
                return torch.amp.GradScaler("cuda", **kwargs)
            else:
                return torch.cuda.amp.GradScaler(**kwargs)

        def old(**kwargs):
            return torch.cuda.amp.GradScaler(**kwargs)
        """)
    assert found(path, ["PA409"]) == [("PA409", 16, None)]


def test_fixing_some_findings_never_rewrites_a_name_without_its_import():
    """--fix of chosen findings: a use of ``GS`` chosen without the other uses of the names
    its import binds stays as it is (``GS("cuda")`` on torch.cuda.amp.GradScaler would pass
    "cuda" as init_scale); an attribute use is rewritten alone."""
    from precisionaudit.training.fix import fixed_source
    from precisionaudit.training.source import read_script

    path = sample("pa409_deprecated_amp_api_hazard.py")
    findings = audit(path, ["PA409"])
    scaler = [f for f in findings if f.evidence["name"].startswith("GS ")]
    cpu = [f for f in findings if f.evidence["name"] == "torch.cpu.amp.autocast"]
    original = open(path, encoding="utf-8").read()
    assert fixed_source(read_script(path), scaler) == original
    new = fixed_source(read_script(path), cpu)
    assert [line for line in new.splitlines() if line not in original.splitlines()] == [
        '    with torch.amp.autocast("cpu"):']


@pytest.mark.parametrize("text", [
    "def f(:\n    pass\n",  # no AMP word: the prefilter spares the analysis, not the parse
    "import torch\nscaler = torch.amp.GradScaler(\n",  # no step word: likewise
    "import torch\nscaler.scale(loss).backward()\nif x\n"])  # analysed
def test_a_file_that_does_not_parse_is_a_usage_error_naming_its_line(tmp_path, text):
    """Whether or not the prefilter spares it the analysis: one line, file and line."""
    from precisionaudit.core.errors import UsageError

    path = tmp_path / "broken.py"
    path.write_text(text)
    with pytest.raises(UsageError, match=r"broken.py:\d+:\d+: cannot parse"):
        audit(path)


def test_syntax_newer_than_the_interpreter_is_not_an_error_when_libcst_reads_it(tmp_path):
    """The prefilter's syntax check uses CPython's parser; a construct it does not know
    (a 3.12 ``type`` alias under 3.11) is left to LibCST, as the analysed files are."""
    path = tmp_path / "aliases.py"
    path.write_text("type Vector = list[float]\n\n\ndef norm(v: Vector) -> float:\n    return sum(x * x for x in v)\n")
    assert audit(path) == []


def test_a_skipped_step_that_drops_its_gradients_is_not_an_accumulation(tmp_path):
    """LVSM #19's fix: on a too-large gradient norm the step is skipped, but update() and
    zero_grad() still run - nothing accumulates, so update() there is right."""
    path = script(tmp_path, """\
        import torch

        def main(config, model, optimizer, loader):
            scaler = torch.amp.GradScaler("cuda", enabled=config.use_amp)
            for batch in loader:
                with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=(config.use_amp)):
                    loss = model(batch)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if grad_norm > config.skip_norm:
                    print("skipping")
                else:
                    scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
        """)
    assert found(path) == []


def test_a_dtype_table_lookup_keeps_its_entries_apart(tmp_path):
    """``DTYPES[cf.dtype]`` is each entry under its key, and two keys never hold at once:
    a scaler made only when the dtype is float16 is clean; one made always fires for bf16.
    The dtype is set in a method the training method calls (followed: it sets self.*)."""
    text = """\
        import torch
        DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

        class Trainer:
            def init(self, cf):
                self.dtype = DTYPES[cf.dtype]

            def run(self, cf, model, loader, optimizer):
                self.init(cf)
                SCALER
                for x in loader:
                    with torch.autocast("cuda", dtype=self.dtype):
                        loss = model(x).sum()
                    self.scaler.scale(loss).backward()
                    self.scaler.step(optimizer)
                    self.scaler.update()
        """
    clean = script(tmp_path, text.replace("SCALER", 'self.scaler = torch.amp.GradScaler("cuda", '
                                                    'enabled=self.dtype == torch.float16)'), "clean.py")
    assert found(clean) == []
    hazard = script(tmp_path, text.replace("SCALER", 'self.scaler = torch.amp.GradScaler("cuda")'), "hazard.py")
    assert found(hazard) == [("PA404", 10, "when cf.dtype == 'bf16'")]


def test_pa409_is_silent_on_fallbacks_for_an_old_torch_as_lightning_and_timm_write_them(tmp_path):
    """Lightning's `new if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()` and
    timm's `try: torch.amp.GradScaler(device=...) except (AttributeError, TypeError): ...` keep
    the old name for an old torch only (both were false positives on the installed libraries);
    an old name in a handler of an unrelated try is still a use."""
    path = script(tmp_path, """\
        import torch
        _TORCH_GREATER_EQUAL_2_4 = True


        class Plugin:
            def __init__(self, device):
                self.scaler = torch.amp.GradScaler(device=device) if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()


        class NativeScaler:
            def __init__(self, device="cuda"):
                try:
                    self._scaler = torch.amp.GradScaler(device=device)
                except (AttributeError, TypeError):
                    self._scaler = torch.cuda.amp.GradScaler()


        def make():
            try:
                import apex  # noqa: F401
            except ImportError:
                return torch.cuda.amp.GradScaler()
        """)
    assert found(path) == [("PA409", 22, None)]
