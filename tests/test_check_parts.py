"""The check's parts on hand-computed cases: metrics, tolerance, loss-scale arithmetic,
GEMM FLOP counting, and the round-to-dtype emulation of fp16 kernels CPU lacks."""
import math
import os

import numpy as np
import pytest
import torch

import precisionaudit
from precisionaudit.check.metrics import compare, divergence
from precisionaudit.check.pytorch.divergence import user_line
from precisionaudit.check.pytorch.flops import GemmFlops
from precisionaudit.check.pytorch.grads import GradHistogram
from precisionaudit.check.tolerance import tolerance_for
from precisionaudit.runtime.pytorch.cuda_autocast import emulated_cuda_autocast
from precisionaudit.runtime.pytorch.emulation import EmulatedKernels
from precisionaudit.runtime.pytorch.execution import named_outputs

FP16 = tolerance_for("float16")


@pytest.fixture(params=["torch", "numpy"])
def array(request):
    """The same metrics on torch tensors (PyTorch check) and numpy arrays (ONNX check)."""
    if request.param == "torch":
        return torch.tensor
    return lambda values: np.asarray(values, dtype=np.float32)


def test_metrics_of_one_wrong_element(array):
    m = compare("0", array([1.0, 2.0, 3.0, 4.0]), array([1.0, 2.0, 3.0, 4.5]), FP16)
    assert (m["max_abs"], m["max_rel"], m["mean_rel"]) == (0.5, 0.125, 0.05)
    assert m["cosine"] == pytest.approx(32 / math.sqrt(30 * 34.25), rel=1e-5)
    assert m["snr_db"] == pytest.approx(10 * math.log10(30 / 0.25), rel=1e-5)
    assert m["status"] == "exceeds_tolerance"  # 0.5 > 0.01 + 0.01 * 4


def test_the_bound_scales_with_the_output_not_the_element(array):
    m = compare("0", array([100.0, 0.001]), array([100.0, 0.051]), FP16)
    assert m["status"] == "ok"  # 0.05 <= 0.01 + 0.01 * 100, though 50x off elementwise


def test_non_finite_values_are_counted_and_decide_the_status(array):
    m = compare("0", array([1.0] * 4), array([1.0, float("inf"), float("nan"), 1.0]), FP16)
    assert (m["nonfinite"], m["status"], m["max_abs"]) == (2, "nonfinite", 0.0)


def test_an_inf_the_reference_holds_too_is_no_divergence(array):
    ref = array([[1.0, float("-inf")], [2.0, 3.0]])  # a -inf attention mask
    assert divergence([ref], [array([[1.0, float("-inf")], [2.0, 3.0]])], FP16) == (0.0, 0, None)
    rel, bad, kind = divergence([ref], [array([[1.0, float("-inf")], [float("inf"), 3.0]])], FP16)
    assert (bad, kind) == (1, "nonfinite")
    rel, bad, kind = divergence([ref], [array([[1.0, float("-inf")], [2.0, 3.3]])], FP16)
    assert (rel, bad, kind) == (pytest.approx(0.1, rel=1e-5), 0, "exceeds_tolerance")  # 0.3 / 3
    assert divergence([ref], [ref[0]], FP16) is None


def test_the_user_line_skips_frames_of_every_stage_of_the_package():
    """apply_plan's wrappers (precisionaudit/apply) sit between the user's forward and the
    probe: the line named must be the user's, not ours."""
    ours = os.path.join(os.path.dirname(precisionaudit.__file__), "apply", "pytorch.py")
    scope = {}
    exec(compile("def wrapper(fn):\n    return fn()\n", ours, "exec"), scope)
    line = scope["wrapper"](user_line)  # this line is the user's
    assert line.endswith(f"test_check_parts.py:{_line_of('this line is the user')}")


def _line_of(text: str) -> int:
    with open(__file__) as fh:
        return next(i for i, row in enumerate(fh, 1) if text in row and "_line_of" not in row)


def test_top1_agreement_is_the_share_of_rows_with_the_same_argmax(array):
    m = compare("0", array([[1.0, 0.0], [0.0, 1.0]]), array([[0.0, 1.0], [0.0, 1.0]]), FP16)
    assert m["top1_agreement"] == 0.5


def test_integer_outputs_are_incomparable_but_said_equal_or_not():
    for ref, same, other in ((torch.tensor([1, 2]), torch.tensor([1, 2]), torch.tensor([1, 3])),
                             (np.array([1, 2]), np.array([1, 2]), np.array([1, 3]))):
        m = compare("ids", ref, same, FP16)
        assert (m["status"], m["equal"]) == ("incomparable", True)
        assert "int64 tensor" in m["reason"]
        assert compare("ids", ref, other, FP16)["equal"] is False


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_metrics_in_chunks_of_rows_equal_those_of_the_whole_tensor(monkeypatch, kind):
    """compare works through big outputs (GPT-2's logits) a few rows at a time; the metrics
    are those of the whole float64 tensors, non-finite elements left out of the errors."""
    from precisionaudit.check import metrics

    torch.manual_seed(0)
    ref = torch.randn(6, 5, 11) * 10
    got = (ref + torch.randn(6, 5, 11) * 0.05).half()
    got[1, 2, 3], got[4, 0, 0] = float("inf"), float("nan")
    tol = tolerance_for("float16")
    given = (ref, got) if kind == "torch" else (ref.numpy(), got.numpy())
    whole = compare("x", *given, tol)
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 25)  # 2 rows of 11 a chunk: 15 chunks
    chunked = compare("x", *given, tol)
    r, a = ref.double(), got.double()
    finite = torch.isfinite(a)
    diff = (a[finite] - r[finite]).abs()
    rows_ok = finite.all(-1)
    for entry in (whole, chunked):
        assert entry["nonfinite"] == 2 and entry["status"] == "nonfinite"
        assert entry["max_abs"] == pytest.approx(float(diff.max()), rel=1e-5)
        assert entry["mean_rel"] == pytest.approx(float(diff.sum() / r[finite].abs().sum()), rel=1e-5)
        cos = float((r[finite] * a[finite]).sum() / (r[finite].norm() * a[finite].norm()))
        assert entry["cosine"] == pytest.approx(cos, rel=1e-6)
        agree = float(((a.argmax(-1) == r.argmax(-1)) & rows_ok).double().mean())
        assert entry["top1_agreement"] == pytest.approx(agree)


def test_outputs_are_named_by_their_path():
    out = {"logits": torch.zeros(1), "past": (torch.zeros(1), torch.zeros(1))}
    assert [n for n, _ in named_outputs(out)] == ["logits", "past.0", "past.1"]
    assert [n for n, _ in named_outputs(torch.zeros(1))] == ["0"]


def test_bf16_tolerances_are_looser_than_fp16():
    bf16 = tolerance_for("bfloat16")
    assert bf16.atol > FP16.atol and bf16.rtol > FP16.rtol and bf16.cosine < FP16.cosine
    assert tolerance_for("float16", atol=0.5).atol == 0.5


def test_fp8_is_judged_by_snr_with_no_max_abs_bound_unless_one_is_given():
    from precisionaudit.check.metrics import compare
    from precisionaudit.core.errors import UsageError

    fp8 = tolerance_for("float8")
    assert (fp8.atol, fp8.rtol, fp8.snr_db, fp8.gemm_snr_db) == (None, None, 20.0, 25.0) and fp8.bound(5.0) is None
    ref = torch.linspace(-1, 1, 1000)
    noise = torch.where(torch.arange(1000) % 2 == 0, 1.0, -1.0)  # orthogonal to ref: SNR set by its size
    # SNR = 10 log10(sum ref^2 / sum e^2): e = 0.05 of ref's RMS is 26 dB, 0.2 is 14 dB
    rms = ref.square().mean().sqrt()
    good, bad = compare("y", ref, ref + 0.05 * rms * noise, fp8), compare("y", ref, ref + 0.2 * rms * noise, fp8)
    assert good["snr_db"] == pytest.approx(26.02, abs=0.01) and good["status"] == "ok"
    assert bad["snr_db"] == pytest.approx(13.98, abs=0.01) and bad["status"] == "exceeds_tolerance"
    assert good["bound"] is None
    # --atol alone adds a max-abs bound (rtol counts 0); --snr moves the bar
    atol = tolerance_for("float8", atol=0.01)
    assert compare("y", ref, ref + 0.05 * rms * noise, atol)["status"] == "exceeds_tolerance"
    # at 14 dB the cosine is 1 / sqrt(1 + 0.2^2) = 0.9806: the 0.995 floor binds once --snr is lowered
    lowered = compare("y", ref, ref + 0.2 * rms * noise, tolerance_for("float8", snr=10))
    assert lowered["cosine"] == pytest.approx(1 / 1.04 ** 0.5, abs=1e-4) and lowered["status"] == "exceeds_tolerance"
    assert compare("y", ref, ref + 0.2 * rms * noise, tolerance_for("float8", snr=10, cosine=0.98))["status"] == "ok"
    assert tolerance_for("float16", snr=30).snr_db == 30 and FP16.snr_db is None
    with pytest.raises(UsageError, match="--gemm-snr judges FP8 GEMMs"):
        tolerance_for("bfloat16", gemm_snr=20)
    with pytest.raises(UsageError, match="--snr nan"):
        tolerance_for("float8", snr=float("nan"))


def test_underflow_shares_and_the_recommended_loss_scale():
    h = GradHistogram()
    h.add(torch.tensor([2.0 ** -30, 2.0 ** -20, 2.0 ** -10, 1.0, 0.0]))
    assert h.values == 4  # zeros are not underflow
    assert h.underflow(1.0) == {"zero": 0.25, "subnormal": 0.25}
    assert h.recommended_scale() == 2.0 ** 15  # 1.0 * 2^16 = 65536 would overflow fp16
    assert h.underflow(2.0 ** 15) == {"zero": 0.0, "subnormal": 0.25}


def test_a_gemm_whose_flop_formula_fails_is_counted_as_uncounted(monkeypatch):
    from torch.utils.flop_counter import flop_registry

    def broken(*args, **kwargs):
        raise ValueError("no formula for these arguments")

    monkeypatch.setitem(flop_registry, torch.ops.aten.mm, broken)
    with GemmFlops() as counter:
        torch.ones(4, 8) @ torch.ones(8, 2)
        torch.bmm(torch.ones(1, 4, 8), torch.ones(1, 8, 2))
    assert counter.uncounted == {"mm": 1}
    assert counter.by_dtype == {"float32": 2 * 4 * 8 * 2}  # the bmm


def test_intermediates_past_the_budget_are_a_note(cli, monkeypatch):
    import json

    from conftest import sample

    from precisionaudit.check.pytorch import divergence as probe

    monkeypatch.setattr(probe, "BUDGET_ELEMENTS", 64)
    report = json.loads(cli("check", sample("check_clean.py"), "--format", "json").stdout)
    assert any("results past the" in n and "not compared with the reference" in n for n in report["notes"])


def test_tiny_outputs_count_for_the_memory_they_hold(monkeypatch):
    """An 8-value output costs ~740 bytes kept: counted by its values alone, a loop of tiny ops
    held gigabytes under a 128 MiB budget."""
    from precisionaudit.check.pytorch import divergence as probe

    monkeypatch.setattr(probe, "BUDGET_ELEMENTS", 10 * (8 + probe.KEPT_OVERHEAD_ELEMENTS))

    class ManyTinyOps(torch.nn.Module):
        def forward(self, x):
            for _ in range(100):
                x = x + 1
            return x

    model, x = ManyTinyOps(), torch.randn(2, 4)
    with probe.Probe(model, tol=None) as kept:
        model(x)
    assert len(kept.ops) == 10 and kept.over_budget["ops"] == 90


def test_gemm_flops_are_counted_in_the_dtype_autocast_chose():
    lin = torch.nn.Linear(64, 128)
    with GemmFlops() as flops, emulated_cuda_autocast(torch.float16):
        lin(torch.randn(4, 64)).softmax(-1)
    assert dict(flops.by_dtype) == {"float16": 2 * 4 * 64 * 128} and flops.low_share() == 1.0


def test_fp16_lstm_without_a_cpu_kernel_is_computed_in_fp32_and_rounded():
    lstm, x = torch.nn.LSTM(8, 8), torch.randn(5, 2, 8)
    with emulated_cuda_autocast(torch.float16), pytest.raises(RuntimeError):
        lstm(x)
    emulated = set()
    with EmulatedKernels(emulated), emulated_cuda_autocast(torch.float16):
        out, _ = lstm(x)
    assert out.dtype == torch.float16 and emulated == {"mkldnn_rnn_layer"}
    assert torch.allclose(out.float(), lstm(x)[0], atol=5e-3)


def test_round_to_dtype_lets_real_fp16_failures_through():
    with EmulatedKernels(), pytest.raises(RuntimeError, match="overflow"):
        torch.zeros(2, dtype=torch.float16).masked_fill(torch.ones(2, dtype=torch.bool), -1e9)


def test_the_docs_document_the_default_tolerances():
    """docs/plan-and-check.md's table holds float16, bfloat16 and float8; the FP4 targets' are in docs/fp4.md."""
    import os
    import re

    from precisionaudit.check.tolerance import DEFAULTS

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = []
    for page, dtypes in (("docs/plan-and-check.md", "float16|bfloat16|float8"), ("docs/fp4.md", "nvfp4|mxfp4")):
        with open(os.path.join(root, page)) as fh:
            rows += re.findall(rf"^\| ({dtypes}) \|" + r" ([\d.e-]+) \|" * 5 + "$", fh.read(), re.M)
    assert {d: tuple(None if x == "-" else float(x) for x in v) for d, *v in rows} == {
        d: (t.atol, t.rtol, t.cosine, t.snr_db, t.gemm_snr_db) for d, t in DEFAULTS.items()}


def test_a_variant_model_is_keyed_by_the_plans_content_not_its_identity():
    from precisionaudit.check.pytorch.runner import plan_key
    from precisionaudit.plan.file import parse_plan

    def read(module):
        return parse_plan({"version": 1, "target": {"dtype": "float16"}, "overrides": [{"module": module}]}, "p.yaml")

    assert plan_key(read("a")) == plan_key(read("a")) != plan_key(read("b"))
    assert plan_key(None) is None
