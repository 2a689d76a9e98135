"""PA106 judges how much of the logits' 1/sqrt(d) is applied before the fp16 GEMM stores them:
the constant factors on q and k, and baddbmm's alpha (cuBLAS applies it to the fp32
accumulator before the fp16 store, CUDABlas.cpp bgemm_internal_cublas_half_helper)."""
import math

import pytest
import torch
from conftest import findings_of, sample, scanned_graph
from torch import nn

from precisionaudit.analysis import run_passes
from precisionaudit.capture.pytorch.capture import capture
from precisionaudit.core.target import Target
from precisionaudit.rules.engine import load_rules, run_rules

HEAD = 64  # head dim: the logits need 1/sqrt(64) = 0.125


class Logits(nn.Module):
    """q @ k^T (or baddbmm) with `q_scale` on q, `k_scale` on k, `alpha`, then `after`."""

    def __init__(self, q_scale=1.0, k_scale=1.0, after=1.0, alpha=None, einsum=False, inplace=False):
        super().__init__()
        self.qk = nn.Linear(HEAD, 2 * HEAD)
        self.q_scale, self.k_scale, self.after, self.alpha, self.einsum = q_scale, k_scale, after, alpha, einsum
        self.inplace = inplace

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        if self.q_scale != 1.0:
            q = q * self.q_scale
        if self.k_scale != 1.0:
            k = k * self.k_scale
        if self.alpha is not None:
            scores = torch.baddbmm(torch.zeros(x.shape[0], x.shape[1], x.shape[1]), q, k.transpose(-1, -2),
                                   beta=0, alpha=self.alpha)
        elif self.einsum:
            scores = torch.einsum("bqd,bkd->bqk", q, k)
        else:
            scores = q @ k.transpose(-1, -2)
        if self.after != 1.0 and self.inplace:
            scores = scores.float()  # Falcon's ALiBi path: upcast after the GEMM, then `*=`
            scores *= self.after
        elif self.after != 1.0:
            scores = scores * self.after
        return torch.softmax(scores, dim=-1)


AMP16 = Target("float16", "autocast", "cuda")


def _graph(model, target=AMP16):
    return run_passes(capture(lambda: model, lambda: (torch.randn(2, 8, HEAD),), target).graph)


def _scan(model, target=AMP16):
    (gemm,) = [a for _, a in _graph(model, target).nodes(data=True)
               if "attention" in a and a["attention"].feeds_softmax]
    return gemm


def _flagged(model, target=AMP16) -> bool:
    rules = [r for r in load_rules() if r.id == "PA106"]
    return bool(run_rules(_graph(model, target), rules, target, "m.py", "m"))


QUARTER = HEAD ** -0.25


@pytest.mark.parametrize("model,hazard", [
    (Logits(after=HEAD ** -0.5), True),  # all of the scale after the GEMM
    (Logits(q_scale=QUARTER, after=QUARTER), True),  # half of it (in log terms) on q, the rest after
    (Logits(q_scale=0.5, after=HEAD ** -0.5 / 0.5), True),  # a fixed q / 2 is too small for d=64
    (Logits(q_scale=HEAD ** -0.5), False),  # all of it on q
    (Logits(k_scale=HEAD ** -0.5), False),  # all of it on k
    (Logits(q_scale=QUARTER, k_scale=QUARTER), False),  # split on both (GPT-NeoX / Stable Diffusion)
    (Logits(q_scale=HEAD ** -0.5, after=0.5), False),  # the full scale first, then a temperature
    (Logits(after=2.0), False),  # nothing scales the stored logits down after the GEMM
    (Logits(alpha=HEAD ** -0.5), False),  # the scale as baddbmm's alpha, applied in fp32
    (Logits(alpha=HEAD ** -0.5, after=0.5), False),  # the full alpha, then a temperature
    (Logits(alpha=0.5, after=HEAD ** -0.5 / 0.5), True),  # an alpha too small to help, the rest after
    (Logits(alpha=1.0, after=HEAD ** -0.5), True),  # baddbmm with alpha=1, scaled after
    (Logits(q_scale=QUARTER, after=QUARTER, einsum=True), False),  # einsum: head dim unread, pre-scale trusted
    (Logits(after=HEAD ** -0.5, einsum=True), True),  # einsum with nothing before it
    (Logits(after=HEAD ** -0.5, inplace=True), True),  # upcast after the GEMM, scaled in place
], ids=["after-only", "quarter-then-quarter", "q-half", "q-full", "k-full", "split-sqrt",
        "full-then-temperature", "upscaled-after", "alpha-full", "alpha-full-then-temperature", "alpha-half", "alpha-one",
        "einsum-prescaled", "einsum-after-only", "inplace-after"])
def test_prescale_is_judged_against_one_over_sqrt_head_dim(model, hazard):
    assert _flagged(model) is hazard


def test_the_gemm_records_the_factors_before_and_after_it_and_the_head_dim():
    gemm = _scan(Logits(q_scale=0.5, k_scale=0.25, after=0.125))
    logits = gemm["attention"]
    assert (logits.scale_before, logits.scale_after, logits.head_dim) == (0.125, 0.125, HEAD)
    assert logits.scaled_before and logits.scaled_after


def test_baddbmm_alpha_is_seen_as_a_keyword_of_the_aten_op():
    gemm = _scan(Logits(alpha=0.125))
    assert gemm["op"] == "baddbmm" and gemm["out_dtype"] == "float16"
    assert gemm["keywords"] == {"beta": 0, "alpha": 0.125}
    assert gemm["attention"].scale_before == 0.125 and gemm["attention"].head_dim == HEAD


def test_bf16_logits_are_never_flagged():
    assert _flagged(Logits(q_scale=QUARTER, after=QUARTER), Target("bfloat16", "autocast", "cuda")) is False


def test_the_message_names_the_factor_before_and_the_one_left_after():
    (f,) = [f for f in findings_of(sample("pa106_prescaled_hazard.py")) if f.rule == "PA106"]
    assert (f.evidence["scale_before"], f.evidence["scale_after"]) == pytest.approx((QUARTER, QUARTER))
    assert (f.evidence["head_dim"], f.evidence["scale_needed"]) == (HEAD, 0.125)
    assert "x0.3536 applied before it and x0.3536 left after it (1/sqrt(64) = 0.125" in f.message


def test_baddbmm_with_alpha_one_names_the_scale_left_after_it():
    (f,) = [f for f in findings_of(sample("pa106_baddbmm_hazard.py")) if f.rule == "PA106"]
    assert (f.op, f.evidence["scale_before"], f.evidence["scale_after"]) == ("baddbmm", 1.0, pytest.approx(0.125))
    assert "with no scale before it and x0.125 left after it" in f.message


def test_the_baddbmm_clean_twin_is_clean_because_of_its_alpha():
    graph = scanned_graph(sample("pa106_baddbmm_clean.py"))
    (gemm,) = [a for _, a in graph.nodes(data=True) if "attention" in a and a["attention"].feeds_softmax]
    assert gemm["op"] == "baddbmm" and gemm["out_dtype"] == "float16"
    assert gemm["keywords"]["alpha"] == pytest.approx(1 / math.sqrt(HEAD))
    assert gemm["attention"].scale_after == 1.0
