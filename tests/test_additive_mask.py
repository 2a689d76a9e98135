"""PA114: an additive mask near the dtype's most negative value, added to fp16 scores."""
import importlib.util
import textwrap

import pytest
import torch
from conftest import findings_of, sample

from precisionaudit import apply_plan
from precisionaudit.core.numerics import Target
from precisionaudit.plan.pytorch import make_plan
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

HAZARD = "pa114_additive_mask_hazard.py"


def pa114(path, **kw):
    return [f for f in findings_of(path, **kw) if f.rule == "PA114"]


def line_of(path, text):
    with open(path) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line)


@pytest.mark.parametrize("mode", ["autocast", "pure"])
def test_finfo_min_mask_added_to_fp16_scores_is_a_warning_on_its_line(mode):
    (f,) = pa114(sample(HAZARD), mode=mode)
    assert (f.severity, f.op, f.line) == ("warning", "add", line_of(sample(HAZARD), "scores + additive_mask"))
    # -65504 + s rounds to -inf once s < -16 (65504 + half of the spacing 32 = 65520)
    assert (f.evidence["mask_low"], f.evidence["overflow_below"]) == (-65504.0, -16.0)
    assert f.evidence["softmax_line"] == line_of(sample(HAZARD), "scores.softmax")


def test_bfloat16_has_the_range_to_absorb_the_scores():
    assert pa114(sample(HAZARD), dtype="bfloat16") == [] == pa114(sample(HAZARD), dtype="bfloat16", mode="pure")


@pytest.mark.parametrize("clean", ["pa114_additive_mask_clean.py", "pa107_mask_clean.py"])
@pytest.mark.parametrize("mode", ["autocast", "pure"])
def test_finfo_min_set_by_masked_fill_is_silent(clean, mode):
    assert pa114(sample(clean), mode=mode) == []


# the hazard's attention with one line changed: (the line, whether PA114 fires in fp16 pure)
MODEL = """
import torch
from torch import nn

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(32, 64)

    def forward(self, x, keep):
        q, k = self.qk(x).chunk(2, dim=-1)
        scores = q @ k.transpose(-2, -1) * 32 ** -0.5
        allowed = keep[:, None, :] & torch.ones(8, 8, dtype=torch.bool).tril()
        {line}
        return scores.softmax(-1).float()

def get_model():
    return Attention()

def get_example_inputs():
    return (torch.randn(2, 8, 32), torch.ones(2, 8, dtype=torch.bool))
"""
FINFO_MASK = "torch.where(allowed, torch.zeros((), dtype=scores.dtype), torch.finfo(scores.dtype).min)"
VARIANTS = {
    "fp16 mask": (f"scores = scores + {FINFO_MASK}", True),
    "mask subtracted": (f"scores = scores - {FINFO_MASK.replace('.min', '.max').replace('allowed,', '~allowed,')}",
                        True),
    "torch.full mask": ("scores = scores + torch.full_like(scores, torch.finfo(scores.dtype).min).masked_fill(allowed, 0)",
                        True),
    "mask added in float32": (f"scores = scores.float() + {FINFO_MASK}.float()", False),
    "clamped before the softmax": (f"scores = torch.max(scores + {FINFO_MASK}, "
                                   "torch.tensor(torch.finfo(scores.dtype).min))", False),
    "scores bounded to [-10, 10]": (f"scores = 10 * torch.tanh(scores) + {FINFO_MASK}", False),
    "-1e4 mask (needs scores below -55520)": ("scores = scores + torch.where(allowed, 0.0, -1e4).half()", False),
    "no softmax after it": (f"scores = scores.softmax(-1) * (scores + {FINFO_MASK}).sigmoid()", False),
    # an encoder's key-padding mask masks a whole row only for a sequence that is all padding
    "padding-only mask": (f"scores = scores + {FINFO_MASK.replace('allowed', 'keep[:, None, :]')}", False),
    "finfo.min added as a scalar": ("scores = scores + torch.finfo(scores.dtype).min", True),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_what_fires_and_what_does_not(tmp_path, variant):
    line, fires = VARIANTS[variant]
    path = tmp_path / "attention.py"
    path.write_text(MODEL.replace("{line}", line))
    assert bool(pa114(str(path), mode="pure")) is fires


def test_the_plan_adds_in_float32_and_the_fully_masked_row_stays_finite(tmp_path):
    """Scores of -20 in the rows a causal mask and left padding mask entirely: fp16 gives -inf
    there and a NaN softmax; the planned addition in fp32 gives -65524 and a uniform row."""
    path = tmp_path / "masked_row.py"
    path.write_text(textwrap.dedent(f"""
        import torch
        from torch import nn

        class Scores(nn.Module):
            def forward(self, scores, attention_mask):
                allowed = attention_mask.bool()[:, None, :] & torch.ones(4, 4, dtype=torch.bool).tril()
                mask = {FINFO_MASK}
                return (scores + mask).softmax(-1)

        def get_model():
            return Scores()

        def get_example_inputs():
            return (torch.full((2, 4, 4), -20.0), torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]]))
        """))
    target = Target("float16", "pure", "cuda")
    results, findings = scan([str(path)], target, load_rules())
    plan, _ = make_plan(findings, target, results[0].graph)
    assert [(o.module, o.ops, o.rules) for o in plan.overrides] == [("", ["add"], ["PA114"])]
    spec = importlib.util.spec_from_file_location("masked_row", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net, (scores, keep) = module.get_model(), module.get_example_inputs()
    scores = scores.half()
    before = net(scores, keep)
    with apply_plan(net, plan, compilable=False):
        after = net(scores, keep)
    # the second sequence's first two queries see only its two pad tokens
    assert before[1, :2].isnan().all() and before[0].isfinite().all() and before[1, 2:].isfinite().all()
    assert after.isfinite().all() and torch.allclose(after[1, :2].float(), torch.full((2, 4), 0.25))
