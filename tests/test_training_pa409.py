"""PA409 deprecated-amp-api: the AMP protocol of a training step, read statically (the step walk's
events). The hazard sample, its clean twin, the rule page's Example and Use instead, and the
ways real code is written."""
from training_rules import amp_audit, amp_found, assert_page_examples, fixed, line_of, sample, write


def test_the_clean_twin_gives_no_finding():
    assert amp_audit(sample("pa409_deprecated_amp_api_clean.py")) == []


def test_pa409_fires_at_every_deprecated_use_whatever_the_import_spelling():
    path = sample("pa409_deprecated_amp_api_hazard.py")
    lines = [line_of(path, "@torch.cuda.amp.custom_fwd("), line_of(path, "@torch.cuda.amp.custom_bwd"),
             line_of(path, "GS(enabled"), line_of(path, "with autocast(use_amp):"),
             line_of(path, "with torch.cpu.amp.autocast():")]
    assert amp_found(path) == [("PA409", line, None) for line in lines]
    by_line = {f.line: f for f in amp_audit(path)}
    assert by_line[lines[2]].message.startswith("GS (torch.cuda.amp.GradScaler) is deprecated")
    assert 'torch.amp.GradScaler("cuda", ...)' in by_line[lines[2]].message


def test_fix_of_pa409_spells_the_device_and_keeps_the_argument_meaning():
    new = fixed(sample("pa409_deprecated_amp_api_hazard.py"))
    assert "from torch.amp import GradScaler as GS, autocast" in new
    assert 'scaler = GS("cuda", enabled=use_amp)' in new
    assert 'with autocast("cuda", enabled=use_amp):  # positional: enabled' in new
    assert '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")' in new
    assert '@torch.amp.custom_bwd(device_type="cuda")' in new
    assert 'with torch.amp.autocast("cpu"):' in new


def test_a_name_used_as_a_value_is_reported_but_not_rewritten(tmp_path):
    path = write(tmp_path, """\
        import torch
        from torch.cuda.amp import autocast

        ctx = autocast if torch.cuda.is_available() else None
        with autocast():
            pass
        """)
    findings = amp_audit(path, ["PA409"])
    assert [(f.line, f.fix["autofix"]) for f in findings] == [(4, False), (5, False)]
    assert fixed(path) == path.read_text()


def test_a_fallback_for_an_old_torch_is_not_a_deprecated_use(tmp_path):
    """accelerate's own code: the old name only where the installed torch is too old for
    the new one (an import fallback, a version check)."""
    path = write(tmp_path, """\
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
    assert amp_found(path, ["PA409"]) == [("PA409", 16, None)]


def test_fixing_some_findings_never_rewrites_a_name_without_its_import():
    """--fix of chosen findings: a use of ``GS`` chosen without the other uses of the names
    its import binds stays as it is (``GS("cuda")`` on torch.cuda.amp.GradScaler would pass
    "cuda" as init_scale); an attribute use is rewritten alone."""
    from precisionaudit.training.fix import fixed_source
    from precisionaudit.training.source import read_script

    path = sample("pa409_deprecated_amp_api_hazard.py")
    findings = amp_audit(path, ["PA409"])
    scaler = [f for f in findings if f.evidence["name"].startswith("GS ")]
    cpu = [f for f in findings if f.evidence["name"] == "torch.cpu.amp.autocast"]
    original = open(path, encoding="utf-8").read()
    assert fixed_source(read_script(path), scaler) == original
    new = fixed_source(read_script(path), cpu)
    assert [line for line in new.splitlines() if line not in original.splitlines()] == [
        '    with torch.amp.autocast("cpu"):']


def test_pa409_is_silent_on_fallbacks_for_an_old_torch_as_lightning_and_timm_write_them(tmp_path):
    """Lightning's `new if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()` and
    timm's `try: torch.amp.GradScaler(device=...) except (AttributeError, TypeError): ...` keep
    the old name for an old torch only (both were false positives on the installed libraries);
    an old name in a handler of an unrelated try is still a use."""
    path = write(tmp_path, """\
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
    assert amp_found(path) == [("PA409", 22, None)]


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA409", tmp_path)


def test_a_name_only_referred_to_is_a_deprecated_name_and_the_fix_points_at_its_import(tmp_path):
    """mmengine's tests: a deprecated class in ``isinstance`` warns nowhere (torch warns on a
    call), so the message does not claim a FutureWarning; the fix is where the name comes
    from (its import, or the torch.amp spelling)."""
    path = write(tmp_path, """\
        import torch
        from torch.cuda.amp import GradScaler

        def check(scaler):
            assert isinstance(scaler, GradScaler)
            assert isinstance(scaler, torch.cuda.amp.GradScaler)
        """)
    by_line = {f.line: f for f in amp_audit(path, ["PA409"])}
    assert sorted(by_line) == [5, 6]
    assert by_line[5].message == ("GradScaler (torch.cuda.amp.GradScaler) is a deprecated name (it warns only when "
                                  "called, and goes with torch.cuda.amp): use torch.amp.GradScaler")
    assert by_line[5].fix["to"] == "import GradScaler from torch.amp instead (line 2)"
    assert by_line[6].fix["to"] == "use torch.amp.GradScaler"
    assert not any(f.fix["autofix"] for f in by_line.values())
