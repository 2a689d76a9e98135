"""The HTML report: one self-contained page (scan --format html, check --html FILE), for a
static scan, a value-aware scan (--data) and a check.

The DOM is read with the standard library's parser; when a Chromium is installed the pages
are also opened in it, headless and with every host unresolvable, and the test asserts on
the DOM after its scripts ran, on the browser's console, and keeps a screenshot in the
test's tmp dir.
"""
import json
import math
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

pytest.importorskip("plotly")

from precisionaudit.analysis.facts import CalibrationFacts  # noqa: E402
from precisionaudit.core.numerics import Target  # noqa: E402
from precisionaudit.core.findings import Finding  # noqa: E402
from precisionaudit.ir.graph import OpNode, add_op, new_graph  # noqa: E402
from precisionaudit.report.html import SEVERITY_COLORS, TINTS, measured_ranges, module_tree  # noqa: E402
from precisionaudit.rules.docs import rule_url  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "sample_models")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Dom(HTMLParser):
    """Elements as (tag, attrs) in document order, the text of each table row, script bodies."""

    def __init__(self, text):
        super().__init__()
        self.elements, self.rows, self.scripts = [], [], []
        self._row = self._script = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "tr":
            self._row = {"attrs": attrs, "cells": [], "links": []}
        elif tag in ("td", "th") and self._row is not None:
            self._row["cells"].append("")
        elif tag == "a" and self._row is not None:
            self._row["links"].append(attrs.get("href"))
        elif tag == "script":
            self._script = ""

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "script":
            self.scripts.append(self._script)
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script += data
        elif self._row is not None and self._row["cells"]:
            self._row["cells"][-1] += data

    def ids(self):
        return [a["id"] for _, a in self.elements if "id" in a]


def _no_external_resources(dom: Dom):
    for tag, attrs in dom.elements:
        assert not (tag in ("script", "img", "iframe") and attrs.get("src")), (tag, attrs)
        assert not (tag == "link" and attrs.get("href")), (tag, attrs)


@pytest.fixture
def project(gate_project):
    return gate_project


def test_scan_page_holds_the_findings_and_a_tree_per_model(project, cli):
    data = json.loads(cli("scan", "--isolated", "--format", "json", "model.py", "clean.py").stdout)
    result = cli("scan", "--isolated", "--format", "html", "-o", "report.html", "model.py", "clean.py")
    assert result.exit_code == 1 and result.stdout == ""
    dom = Dom((project / "report.html").read_text())
    rows = [r for r in dom.rows if "data-rule" in r["attrs"]]
    assert [(r["attrs"]["data-rule"], r["attrs"]["data-node"]) for r in rows] == \
        [(f["rule"], f["node"]) for f in data["findings"]]
    assert all(r["links"] == [rule_url(r["attrs"]["data-rule"])] for r in rows)
    assert rows[0]["cells"][0] == "error" and rows[0]["cells"][2] == "model.py:12:18"
    assert {"findings", "tree-0", "tree-1"} <= set(dom.ids())
    _no_external_resources(dom)
    assert len(dom.scripts[0]) > 1_000_000 and "Plotly" in dom.scripts[0]  # plotly.js, inlined
    assert "Plotly.newPlot('tree-0'" in dom.scripts[-1]


def test_a_message_cannot_end_the_script_early():
    graph = new_graph()
    add_op(graph, OpNode(name="softmax", op="softmax", target="t", module="a.b"))
    finding = Finding(rule="PA101", name="n", severity="error", path="m.py", line=1, model="m.py:m",
                      node="softmax", op="softmax", module="a.b", message="</script><b>x</b>")
    from precisionaudit.report.html import _script_json

    assert "</script>" not in _script_json(module_tree(graph, [finding], "m.py"))


def test_tree_colours_flagged_ops_by_their_worst_finding_and_tints_their_modules():
    graph = new_graph()
    for name, module in (("linear", "blocks.0.mlp"), ("exp", "blocks.0.attn"), ("softmax", "blocks.0.attn"),
                         ("linear_1", "head")):
        add_op(graph, OpNode(name=name, op=name.split("_")[0], target="t", module=module))

    def finding(node, severity):
        return Finding(rule="PA105", name="n", severity=severity, path="m.py", line=1, model="m.py:m",
                       node=node, op=node, module="blocks.0.attn", message=f"{node} {severity}")

    trace = module_tree(graph, [finding("exp", "warning"), finding("exp", "error"),
                                finding("softmax", "info")], "m.py").data[0]
    color = dict(zip(trace.ids, trace.marker.colors))
    parent = dict(zip(trace.ids, trace.parents))
    assert color["m:blocks.0.attn::exp"] == SEVERITY_COLORS["error"]
    assert color["m:blocks.0.attn::softmax"] == SEVERITY_COLORS["info"]
    assert color["m:blocks.0.attn"] == color["m:blocks.0"] == color["m:"] == TINTS["error"]
    assert color["m:head"] == color["m:blocks.0.mlp"] != TINTS["error"]
    assert parent["m:blocks.0.attn::exp"] == "m:blocks.0.attn" and parent["m:blocks.0"] == "m:blocks"
    value = dict(zip(trace.ids, trace.values))
    assert value["m:blocks.0.attn"] == 0 and value["m:blocks.0.mlp"] == 1  # flagged ops are own tiles


def test_measured_ranges_are_plotted_against_the_dtype_range():
    graph = new_graph()
    add_op(graph, OpNode(name="exp", op="exp", target="t"))
    graph.nodes["exp"]["calibration"] = CalibrationFacts({"max_abs": 9e4, "min_nonzero": 1e-9}, key="exp",
                                                         nonfinite_first=False)
    add_op(graph, OpNode(name="mul", op="mul", target="t"))
    add_op(graph, OpNode(name="add", op="add", target="t"))  # no fp32 reference: the target run's values
    graph.nodes["add"]["calibration"] = CalibrationFacts(None, key="add", nonfinite_first=False,
                                                         target={"max_abs": 3.0, "min_nonzero": 0.5})
    figure = measured_ranges(graph, "float16")
    assert list(figure.data[0].x) == ["exp", "add"] and list(figure.data[0].y) == [9e4, 3.0]
    assert {s.y0 for s in figure.layout.shapes} == {65504.0, 2.0**-14}
    # each limit's label sits on its line: plotly places annotations on a log axis in log10 units
    assert {a.text: a.y for a in figure.layout.annotations} == pytest.approx(
        {"float16 max 65504": math.log10(65504), "float16 min normal 6.10352e-05": -14 * math.log10(2)})
    assert measured_ranges(new_graph(), "float16") is None


def test_check_page_has_the_variants_the_growth_and_the_gradient_histogram(tmp_path, cli):
    out = tmp_path / "check.html"
    result = cli("check", os.path.join(SAMPLES, "check_variance.py"), "--grad", "--format", "json",
                 "--html", out)
    report = json.loads(result.stdout)
    dom = Dom(out.read_text())
    variants = [r["attrs"]["data-variant"] for r in dom.rows if "data-variant" in r["attrs"]]
    assert variants[0] == "reference" and "baseline" in variants
    assert {"verdict", "variants", "growth", "gradients"} <= set(dom.ids())
    verdict = "passed" if report["passed"] else "FAILED"
    assert any(a.get("id") == "verdict" and a.get("class") == f"verdict-{verdict.lower()}"
               for _, a in dom.elements)
    hist = report["gradients"]["histogram"]
    assert sum(hist["count"]) == report["gradients"]["values"]
    _no_external_resources(dom)


def test_without_plotly_the_html_report_is_one_line_before_any_work(project, cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    result = cli("scan", "--format", "html", "-o", "r.html", "model.py")
    assert result.exit_code == 2 and "pip install 'precisionaudit[html]'" in result.stderr
    assert not (project / "r.html").exists()


# --------------------------------------------------------------------------- a real browser
def _open(page, tmp_path, name):
    """(DOM after the scripts ran, console lines) of ``page`` in headless Chromium, no network;
    a screenshot is kept as tmp_path/<name>.png."""
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=10000",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1800"]
    url = f"file://{page}"
    shot = tmp_path / f"{name}.png"
    dumped = subprocess.run([*base, "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", "--dump-dom",
                             url], capture_output=True, text=True, timeout=120, check=True)
    console = [line for line in dumped.stderr.splitlines() if "CONSOLE" in line]
    assert shot.stat().st_size > 20_000  # a page with plots, not a blank one
    return dumped.stdout, console


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_scan_and_check_pages_render_in_headless_chromium(project, cli, tmp_path):
    cli("scan", "--isolated", "--format", "html", "-o", project / "scan.html", "model.py", "clean.py")
    cli("check", os.path.join(SAMPLES, "check_variance.py"), "--grad", "--html", project / "check.html")
    for name, plots in (("scan", ("tree-0", "tree-1")), ("check", ("growth", "gradients"))):
        dom, console = _open(project / f"{name}.html", tmp_path, name)
        assert console == [], console
        for plot in plots:  # plotly drew into the div: it holds its SVG
            div = dom.split(f'id="{plot}"', 1)[1].split('id="', 1)[0]
            assert 'class="main-svg"' in div, plot
        if name == "scan":
            assert "treemap" in dom and "masked_fill (masked_fill)" in dom


# --------------------------------------------------------------------------- a value-aware scan
@pytest.fixture(scope="module")
def ranges_page(tmp_path_factory):
    """The page of a value-aware scan (--data): attention logits that pass 65504 only on the
    model's calibration batches (PA301)."""
    from click.testing import CliRunner

    from precisionaudit.cli import main

    page = tmp_path_factory.mktemp("ranges") / "ranges.html"
    result = CliRunner().invoke(main, ["scan", "--isolated", "--format", "html", "-o", str(page),
                                       os.path.join(SAMPLES, "pa301_attention_hazard.py"),
                                       "--data", "calibration_batches"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    return page


def _figure(dom: Dom, div_id: str) -> dict:
    """The plotly figure the page draws into ``div_id``, as the JSON it inlined."""
    call = next(line for line in dom.scripts[-1].splitlines() if f"Plotly.newPlot('{div_id}'" in line)
    return json.loads(call.split("})(", 1)[1].rsplit(");", 1)[0])


def test_value_aware_scan_plots_each_measured_op_against_the_dtype_range(ranges_page):
    dom = Dom(ranges_page.read_text())
    overflow = [r for r in dom.rows if r["attrs"].get("data-rule") == "PA301"]
    assert len(overflow) == 1 and overflow[0]["cells"][0] == "error"
    assert {"findings", "tree-0", "ranges-0"} <= set(dom.ids())
    figure = _figure(dom, "ranges-0")
    measured = dict(zip(figure["data"][0]["x"], figure["data"][0]["y"]))
    node = overflow[0]["attrs"]["data-node"]
    assert measured[node] > 65504  # the op PA301 names is plotted above the float16 limit
    assert max(v for n, v in measured.items() if n != node) < measured[node]
    assert 65504.0 in {s["y0"] for s in figure["layout"]["shapes"]}
    assert figure["layout"]["yaxis"]["type"] == "log"
    _no_external_resources(dom)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_value_aware_scan_page_renders_in_headless_chromium(ranges_page, tmp_path):
    dom, console = _open(ranges_page, tmp_path, "ranges")
    assert console == [], console
    for plot in ("tree-0", "ranges-0"):
        div = dom.split(f'id="{plot}"', 1)[1].split('id="', 1)[0]
        assert 'class="main-svg"' in div, plot
    for label in ("float16 max 65504", "float16 min normal 6.10352e-05"):  # drawn on the chart
        assert f'data-unformatted="{label}"' in dom, label
