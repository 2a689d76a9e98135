"""PA401 clip-before-unscale: the AMP protocol of a training step, read statically (the step walk's
events). The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""
from training_rules import amp_audit, amp_found, assert_page_examples, fixed, line_of, sample, write


def test_the_hazard_sample_fires_at_the_clip_when_the_flag_enables_the_scaler_and_its_twin_is_clean():
    path = sample("pa401_clip_before_unscale_hazard.py")
    assert amp_found(path) == [("PA401", line_of(path, "clip_grad_norm_("), "when --amp is set")]
    (finding,) = amp_audit(path, ["PA401"])
    assert finding.fix["autofix"] is True and "{" not in finding.message + finding.fix["to"]
    assert amp_audit(sample("pa401_clip_before_unscale_clean.py")) == []


def test_pa401_fires_at_the_clip_when_the_flag_enables_the_scaler():
    path = sample("pa401_clip_before_unscale_hazard.py")
    assert amp_found(path) == [("PA401", line_of(path, "clip_grad_norm_("), "when --amp is set")]


def test_an_aliased_scaler_import_and_module_alias_are_resolved(tmp_path):
    path = write(tmp_path, """\
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
    assert amp_found(path) == [("PA401", 11, None), ("PA409", 6, None)]


def test_a_scaler_passed_as_a_parameter_keeps_what_its_maker_knew(tmp_path):
    """Called from main: the scaler is enabled by --amp. Walked alone (nobody in the file
    calls it), a parameter used as a scaler is taken as enabled."""
    called = write(tmp_path, """\
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
    assert amp_found(called, ["PA401"]) == [("PA401", 9, "when --amp is set")]
    alone = write(tmp_path, called.read_text().split("def main")[0], "alone.py")
    assert amp_found(alone, ["PA401"]) == [("PA401", 9, None)]


def test_a_scaler_disabled_for_sure_gives_no_clip_finding(tmp_path):
    path = write(tmp_path, """\
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
    assert amp_found(path) == []


def test_a_trainer_like_class_is_followed_across_its_methods(tmp_path):
    """self.scaler made in __init__ (enabled by a flag), scaled in training_step, clipped
    in optimizer_step, which runs every `accum` iterations of fit."""
    path = write(tmp_path, """\
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
    (finding,) = amp_audit(path)
    assert (finding.rule, finding.line, finding.module) == ("PA401", 15, "Trainer.optimizer_step")
    assert finding.evidence["condition"] == "when args.fp16 is true"


def test_a_branch_on_a_flag_decides_whether_the_backward_was_scaled(tmp_path):
    path = write(tmp_path, """\
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
    assert amp_found(path) == [("PA401", 12, "when args.amp is true")]


def test_an_unscale_guarded_by_the_scalers_own_stage_unscales_on_both_branches(tmp_path):
    """allennlp's guard against a second ``unscale_`` (PR #5426): ``OptState.UNSCALED`` is what
    ``GradScaler.unscale_`` records for the optimizer, so where the test says the stage is
    UNSCALED the gradients were unscaled already (by ``rescale``), and where it says not, the
    guarded ``unscale_`` runs: the clip after it is clean either way. A test of another stage
    says nothing about unscaling, and the clip is still reported."""
    code = """\
        import torch
        from torch.amp.grad_scaler import OptState

        class Trainer:
            def __init__(self, model, optimizer, grad_norm, clip_value):
                self.model, self.optimizer = model, optimizer
                self.grad_norm, self.clip_value = grad_norm, clip_value
                self.scaler = torch.amp.GradScaler("cuda")

            def rescale(self):
                if self.grad_norm is not None:
                    self.scaler.unscale_(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_norm)

            def clip(self):
                state = self.scaler._per_optimizer_states[id(self.optimizer)]
                if state["stage"] is not OptState.{stage}:
                    self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_value_(self.model.parameters(), self.clip_value)

            def step(self, loss):
                self.scaler.scale(loss).backward()
                self.rescale()
                self.clip()
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """
    assert amp_found(write(tmp_path, code.replace("{stage}", "UNSCALED"))) == []
    equal = code.replace('is not OptState.{stage}:', '== OptState.UNSCALED:\n                    pass\n                else:')
    assert amp_found(write(tmp_path, equal, "equal.py")) == []
    assert [(r, line) for r, line, _ in amp_found(write(tmp_path, code.replace("{stage}", "READY"), "ready.py"))] \
        == [("PA401", 19)]


def test_fix_of_pa401_inserts_unscale_before_the_clip_with_the_stepped_optimizer():
    new = fixed(sample("pa401_clip_before_unscale_hazard.py")).splitlines()
    at = next(i for i, line in enumerate(new) if "clip_grad_norm_(" in line)
    assert new[at - 1] == "        scaler.unscale_(optimizer)"
    assert new[at - 2] == "        # clips scaled gradients: unscale_ is missing"


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA401", tmp_path)
