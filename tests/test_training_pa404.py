"""PA404 scaler-under-bf16: the AMP protocol of a training step, read statically (the step walk's
events). The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""
from training_rules import AMP_RULES, Audit, amp_found, amp_lines, assert_page_examples, line_of, sample, write


def test_the_clean_twin_gives_no_finding_and_the_message_is_filled():
    seen = Audit(*AMP_RULES).pair("pa404_scaler_under_bf16", amp_lines("pa404_scaler_under_bf16_hazard.py"))
    assert seen["PA404"].fix["autofix"] is False


def test_pa404_fires_at_the_scaler_when_the_flag_picks_bfloat16():
    path = sample("pa404_scaler_under_bf16_hazard.py")
    assert amp_found(path) == [("PA404", line_of(path, "GradScaler("), "when --fp16 is not set")]


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
    clean = write(tmp_path, text.replace("SCALER", 'self.scaler = torch.amp.GradScaler("cuda", '
                                                    'enabled=self.dtype == torch.float16)'), "clean.py")
    assert amp_found(clean) == []
    hazard = write(tmp_path, text.replace("SCALER", 'self.scaler = torch.amp.GradScaler("cuda")'), "hazard.py")
    assert amp_found(hazard) == [("PA404", 10, "when cf.dtype == 'bf16'")]


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA404", tmp_path)
