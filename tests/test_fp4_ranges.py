"""The measured FP4 rules (PA613-PA617): the range pass's FP4 counts (capture/pytorch/fp4_ranges.py)
on hand-made operands, the facts on the nodes, and the rules on their samples with --data example."""
import pytest
import torch
from conftest import sample

from precisionaudit.capture.pytorch import fp4_ranges
from precisionaudit.core.target import Target
from precisionaudit.core.values import ValueOptions
from precisionaudit.rules.checks.pa617_fp4_wgrad_error import wgrad_ranking
from precisionaudit.rules.engine import load_rules
from precisionaudit.runtime.pytorch import fp4
from precisionaudit.scanner import scan

DATA = ValueOptions(data="example")
#: rule -> (hazard, clean, format the hazard is for, module it names)
CASES = {"PA613": ("pa613_fp4_scale_range_hazard.py", "pa613_fp4_scale_range_clean.py", "nvfp4", "proj"),
         "PA614": ("pa614_fp4_zeros_hazard.py", "pa614_fp4_zeros_clean.py", "nvfp4", "proj"),
         "PA615": ("pa615_fp4_outlier_hazard.py", "pa615_fp4_outlier_clean.py", "nvfp4", "block.up"),
         "PA616": ("pa616_fp4_sqnr_hazard.py", "pa616_fp4_sqnr_clean.py", "mxfp4", "block.up"),
         "PA617": ("pa617_fp4_wgrad_hazard.py", "pa617_fp4_wgrad_clean.py", "nvfp4", "proj")}
FP4_RULES = {f"PA61{i}" for i in range(1, 8)}


def _scan(name, fmt):
    rules = [r for r in load_rules() if r.id in FP4_RULES]
    results, found = scan([sample(name)], Target.named(fmt), rules, values=DATA)
    assert results[0].status == "ok", results[0].error
    return results[0], found


@pytest.fixture(scope="module")
def scanned():
    """Each sample scanned once under its hazard's format (the clean twins under both)."""
    runs = {}
    for hazard, clean, fmt, _ in CASES.values():
        runs[hazard, fmt] = _scan(hazard, fmt)
        for f in ("nvfp4", "mxfp4"):
            runs[clean, f] = _scan(clean, f)
    return runs


# --------------------------------------------------------------------------- the counts
def test_the_round_trip_counted_is_the_checks_own_quantization():
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    for fmt in ("nvfp4", "mxfp4"):
        c = fp4_ranges.operand_counts(x, fmt, "input")
        back = fp4.quantize_dequantize(x, fmt)
        assert c["noise"] == pytest.approx(float((back - x).double().square().sum()), rel=1e-6)
        assert c["signal"] == pytest.approx(float(x.double().square().sum()), rel=1e-9)


def test_blocks_below_the_scale_window_and_hollow_blocks_are_counted():
    """Row 0: amax 1 (the tensor's). Row 1 (1/40000): a subnormal E4M3 scale. Row 2 (1e-6): a
    scale of 0, its 16 values lost. Row 3: 1.0 then fifteen 0.02, which round to 0 under the
    block's scale (1/24 of 1 is 0.042): a hollow block. Row 4: all 0, no block counted."""
    rows = [[1.0] * 16, [1 / 40000] * 16, [1e-6] * 16, [1.0] + [0.02] * 15, [0.0] * 16]
    c = fp4_ranges.operand_counts(torch.tensor(rows), "nvfp4", "input")
    assert (c["blocks"], c["subnormal"], c["flushed"], c["hollow"]) == (4, 1, 1, 2)
    assert (c["nonzero"], c["zeros"]) == (64, 16 + 15)
    mx = fp4_ranges.operand_counts(torch.tensor([[7.0] + [1.0] * 31, [6.0] + [1.0] * 31]), "mxfp4", "input")
    assert mx["floor_clips"] == 1 and mx["subnormal"] == mx["flushed"] == 0


def test_weights_are_counted_in_16x16_tiles_under_nvfp4():
    w = torch.zeros(32, 32)
    w[0, 0], w[1:16, :16] = 6.0, 0.2  # one tile: 6 and 0.2s, which round to 0 under its scale
    c = fp4_ranges.operand_counts(w, "nvfp4", "weight")
    assert (c["blocks"], c["hollow"], c["zeros"]) == (1, 1, 15 * 16)


def test_per_channel_sums_name_the_outlier_and_its_block():
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(2))
    x[:, 7] *= 200
    c = fp4_ranges.operand_counts(x, "nvfp4", "input", per_channel=True)
    err = (c["error_sq"] / c["sq"]).sqrt()
    assert err[:16].median() > 0.8 and err[16:].median() < 0.2  # channel 7's block lost, the rest kept


# --------------------------------------------------------------------------- the rules
@pytest.mark.parametrize("rule", sorted(CASES))
def test_hazard_fires_and_clean_twins_are_silent(scanned, rule):
    hazard, clean, fmt, module = CASES[rule]
    hits = [f for f in scanned[hazard, fmt][1] if f.rule == rule]
    worst = "info" if rule == "PA614" else "warning"  # PA614 says why values vanish: info
    assert [f.module for f in hits if f.severity == worst] == [module]
    for f in hits:  # strict templates: every placeholder filled with a real value
        assert "{" not in f.message + " ".join(str(v) for v in f.fix.values())
    for f in ("nvfp4", "mxfp4"):
        assert not scanned[clean, f][1], (clean, f, [(x.rule, x.message) for x in scanned[clean, f][1]])


def test_the_scale_window_hides_from_the_sqnr(scanned):
    """PA613's hazard: 15% of the input's blocks below E4M3's normal scales, while the input's
    SQNR (energy-weighted: the large tokens) is as good as a Gaussian's."""
    (hit,) = [f for f in scanned[CASES["PA613"][0], "nvfp4"][1] if f.rule == "PA613"]
    assert hit.evidence["share"] > 0.1 and "20." in hit.message


def test_the_wgrad_error_is_ranked_and_the_hazard_is_the_worst(scanned):
    result, found = scanned[CASES["PA617"][0], "nvfp4"]
    ranking = wgrad_ranking(result.graph)
    assert [m for m, _ in ranking] == ["proj", "out"]
    assert ranking[0][1] < 8 and ranking[1][1] > 14
    (hit,) = [f for f in found if f.rule == "PA617"]
    assert hit.evidence["rank"] == 1 and "the worst of the 2 Linears" in hit.message
    clean, _ = scanned[CASES["PA617"][1], "nvfp4"]
    assert min(s for _, s in wgrad_ranking(clean.graph)) > 14


def test_mxfp4_loses_what_nvfp4_keeps(scanned):
    """PA616's hazard: MXFP4's input SQNR below torchao's 13 dB floor, NVFP4's 8 dB higher."""
    result, _ = scanned[CASES["PA616"][0], "mxfp4"]
    mx = next(a["fp4_range"] for _, a in result.graph.nodes(data=True) if a.get("module") == "block.up" and
              "fp4_range" in a)
    nv_result, _ = _scan(CASES["PA616"][0], "nvfp4")
    nv = next(a["fp4_range"] for _, a in nv_result.graph.nodes(data=True) if a.get("module") == "block.up" and
              "fp4_range" in a)
    assert mx.sqnr_db("input") < 13 and nv.sqnr_db("input") > mx.sqnr_db("input") + 6


def test_weights_alone_measure_the_weights(tmp_path):
    """--weights without --data: the weights' counts, no inputs and no Wgrad."""
    import importlib.util

    from safetensors.torch import save_file

    spec = importlib.util.spec_from_file_location("m", sample("pa615_fp4_outlier_clean.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in module.get_model().state_dict().items()}, str(path))
    results, _ = scan([sample("pa615_fp4_outlier_clean.py")], Target.named("nvfp4"), [],
                      values=ValueOptions(weights=str(path)))
    facts = [a["fp4_range"] for _, a in results[0].graph.nodes(data=True) if "fp4_range" in a]
    assert facts and all(f.weight and f.input is None and f.wgrad is None for f in facts)
    assert all(18 < f.sqnr_db("weight") < 21 for f in facts)
