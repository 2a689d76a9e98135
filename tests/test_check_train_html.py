"""``check --train --html FILE``: one self-contained page with the loss curves of every
variant, the loss scale with its skipped steps, and the updates lost per module. The page is
parsed back (its tables, and the plotly figures' JSON) and held to the JSON report of the
same run and to what the training physically does."""
import json
import os
import textwrap

import pytest
from conftest import sample

pytest.importorskip("plotly")

from test_html_report import CHROMIUM, Dom, _no_external_resources, _open  # noqa: E402

NORM = sample("pa304_norm_hazard.py")
PURE_BF16 = ("--dtype", "bfloat16", "--mode", "pure", "--steps", "10")


def figures(page: str) -> dict:
    """div id -> the plotly figure (data, layout) that the page draws into it."""
    out = {}
    for chunk in page.split("Plotly.newPlot(")[1:]:
        div = chunk.split(",", 1)[0].strip("'\"")
        payload = chunk.split("})(", 1)[1]
        out[div] = json.loads(payload[:payload.index(");\n")].replace("<\\/", "</"))
    return out


def traces(figure) -> dict:
    return {t["name"]: t for t in figure["data"]}


@pytest.fixture(scope="module")
def norm_page(tmp_path_factory):
    """The pure-bf16 norm stall with the plan that keeps the norm in fp32: (json, page)."""
    from click.testing import CliRunner

    from precisionaudit.cli import main

    folder = tmp_path_factory.mktemp("train_html")
    plan, page = folder / "amp_plan.yaml", folder / "train.html"
    plan.write_text("version: 1\nkeep_fp32_modules: [norm]\n")
    result = CliRunner().invoke(main, ["check", NORM, "--train", *PURE_BF16, "--plan", str(plan), "--format",
                                       "json", "--html", str(page)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), page


def test_the_page_draws_each_variants_loss_curve_as_the_report_measured_it(norm_page):
    report, page = norm_page
    text = page.read_text()
    loss = traces(figures(text)["loss"])
    assert list(loss) == ["reference (float32)", "baseline (bfloat16)", "planned (bfloat16)"]
    for variant in report["variants"]:
        curve = loss[f"{variant['name']} ({variant['dtype']})"]
        assert curve["y"] == variant["loss"] and curve["x"] == list(range(10))
    dom = Dom(text)
    assert [r["attrs"]["data-variant"] for r in dom.rows if r["attrs"].get("data-status")] == \
        ["reference", "baseline", "planned"]
    assert any(a.get("id") == "verdict" and a.get("class") == "verdict-passed" for _, a in dom.elements)
    _no_external_resources(dom)


def test_the_updates_lost_per_module_are_the_measured_shares(norm_page):
    """At lr 1e-4 every update of a bf16 norm gain of 1.0 is below half an ulp (0.0039): all
    are lost in the baseline and none once the plan keeps the norm in fp32."""
    report, page = norm_page
    text = page.read_text()
    bars = traces(figures(text)["updates-lost"])
    assert set(bars) == {"baseline (bfloat16)", "planned (bfloat16)"}
    for variant in report["variants"][1:]:
        bar = bars[f"{variant['name']} ({variant['dtype']})"]
        assert dict(zip(bar["x"], bar["y"])) == {m["module"]: m["updates_lost"] for m in variant["modules"]}
    baseline = dict(zip(bars["baseline (bfloat16)"]["x"], bars["baseline (bfloat16)"]["y"]))
    planned = dict(zip(bars["planned (bfloat16)"]["x"], bars["planned (bfloat16)"]["y"]))
    assert set(baseline) == {"inp", "norm", "out"}
    assert baseline["norm"] == 1.0 and planned["norm"] == 0.0
    assert 0.0 < baseline["inp"] < 0.5  # a linear's weights mostly move in bf16
    cells = {(r["attrs"]["data-variant"], r["attrs"]["data-module"]): r["cells"] for r in Dom(text).rows
             if "data-module" in r["attrs"]}
    assert cells[("baseline", "norm")][1:4] == ["norm", "RMSNorm", "100.0%"]
    assert cells[("planned", "norm")][3] == "0.0%"
    assert "PA304" in text and 'id="no-loss-scale"' in text  # the finding; pure bf16 scales nothing


def test_the_verdict_is_a_sentence_about_the_last_variant(norm_page, tmp_path, cli):
    _, page = norm_page
    verdict = next(text for attrs, text in _texts(page.read_text()) if attrs.get("id") == "verdict")
    assert verdict == "PASSED: the planned variant is within tolerance"
    failing = tmp_path / "failing.html"
    cli("check", NORM, "--train", *PURE_BF16, "--html", failing)
    verdict = next(text for attrs, text in _texts(failing.read_text()) if attrs.get("id") == "verdict")
    assert verdict == "FAILED: the baseline variant diverges"


def _texts(page: str):
    """(attributes, text) of each <p> of the page."""
    import html
    import re

    for attrs, text in re.findall(r"<p ([^>]*)>(.*?)</p>", page):
        yield dict(re.findall(r'(\w[\w-]*)="([^"]*)"', attrs)), html.unescape(text)


def test_the_measure_a_finding_is_about_is_charted_and_no_other(tmp_path, cli):
    """fp16 autocast without a scaler (PA306): 96% of the first Linear's gradient elements
    flush to 0 while no update is lost to rounding. The page charts the gradients flushed per
    module, as the report measured them, and draws no updates-lost chart of zeros."""
    page = tmp_path / "flushed.html"
    result = cli("check", sample("pa306_no_scaler_hazard.py"), "--train", "--dtype", "float16", "--mode",
                 "autocast", "--steps", "10", "--format", "json", "--html", page)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert {f["rule"] for f in report["findings"]} == {"PA306"}
    assert {f["evidence"]["measure"] for f in report["findings"]} == {"grad_flushed"}
    drawn = figures(page.read_text())
    assert "grad-flushed" in drawn and "updates-lost" not in drawn and "state-underflow" not in drawn
    baseline = report["variants"][1]
    bars = traces(drawn["grad-flushed"])["baseline (float16)"]
    assert dict(zip(bars["x"], bars["y"])) == {m["module"]: m["grad_flushed"] for m in baseline["modules"]}
    # gradients of about 1e-8 at the last Linear's fp16 output are below 2^-24: most flush
    assert dict(zip(bars["x"], bars["y"]))["a"] > 0.5
    assert all(m["updates_lost"] == 0.0 for m in baseline["modules"])


SKIPPING = textwrap.dedent("""\
    import torch


    def get_model():
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 16))


    def get_example_inputs():
        return (torch.randn(64, 32),)


    def get_loss(outputs, inputs):
        return outputs.float().pow(2).mean() * 1e3


    def get_grad_scaler():  # a scale far too large: the first steps overflow fp16 and are skipped
        return torch.amp.GradScaler("cpu", init_scale=2.0 ** 20)
    """)


def test_the_loss_scale_is_drawn_per_step_with_the_skipped_steps_marked(tmp_path, cli):
    model, page = tmp_path / "skipping.py", tmp_path / "train.html"
    model.write_text(SKIPPING)
    result = cli("check", model, "--train", "--dtype", "float16", "--mode", "autocast", "--steps", "12",
                 "--format", "json", "--html", page)
    assert result.exit_code in (0, 1), result.output
    scale = json.loads(result.stdout)["variants"][1]["loss_scale"]
    trajectory, skipped = scale["trajectory"], scale["skipped_steps"]
    assert skipped[:1] == [0] and len(skipped) < 12  # some steps skipped, then the scale fits
    plot = traces(figures(page.read_text())["loss-scale"])
    line, marks = plot["baseline (float16) loss scale"], plot["baseline (float16) skipped steps"]
    assert line["y"] == trajectory and marks["x"] == skipped
    assert marks["y"] == [trajectory[i] for i in skipped]
    for i in skipped[:-1]:  # GradScaler's backoff: each skipped step halves the next step's scale
        if i + 1 < len(trajectory):
            assert trajectory[i + 1] == trajectory[i] / 2
    row = next(r for r in Dom(page.read_text()).rows if r["attrs"].get("data-variant") == "baseline")
    assert row["cells"][-1] == str(len(skipped))


def test_without_plotly_the_training_page_is_one_line_before_any_training(tmp_path, cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    result = cli("check", NORM, "--train", *PURE_BF16, "--html", tmp_path / "t.html")
    assert result.exit_code == 2 and "pip install 'precisionaudit[html]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "t.html").exists()


def test_a_training_page_into_a_missing_folder_is_refused_before_training(tmp_path, cli):
    result = cli("check", NORM, "--train", *PURE_BF16, "--html", tmp_path / "no" / "t.html")
    assert result.exit_code == 2 and "folder" in result.stderr and "does not exist" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_the_training_page_renders_in_headless_chromium(norm_page, tmp_path):
    _, page = norm_page
    dom, console = _open(page, tmp_path, "train")
    assert console == [], console
    for plot in ("loss", "updates-lost"):  # plotly drew into the div: it holds its SVG
        div = dom.split(f'id="{plot}"', 1)[1].split('id="', 1)[0]
        assert 'class="main-svg"' in div, plot
    assert os.path.getsize(page) > 1_000_000  # plotly.js inlined: nothing is loaded
