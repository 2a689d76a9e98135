"""`precisionaudit watch DIR` and `precisionaudit plan DIR`: the report of a watch log in each
format, exit codes, a job killed mid-run, bad directories; and that the watch stays light in
the user's process."""
import json
import os
import subprocess
import sys

import pytest
import torch
import yaml
from watch_loops import OUTLIER_STEP, Gated, gated_batch, train_fp16

import precisionaudit

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 16


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    log = tmp_path_factory.mktemp("cli") / "log"
    torch.manual_seed(0)
    train_fp16(Gated(), gated_batch, STEPS, log)
    return str(log)


def test_text_report_names_the_first_nonfinite_op_and_exits_1(cli, log):
    result = cli("watch", log)
    assert result.exit_code == 1, result.output
    assert f"first non-finite: step {OUTLIER_STEP}, rank 0, forward: aten.exp.default of exp in gate" in result.output
    assert "PA701 [error] nonfinite-activation gate" in result.output
    assert f"plan: precisionaudit plan {log} -o amp_plan.yaml" in result.output


def test_json_report_has_the_documented_fields(cli, log):
    result = cli("watch", log, "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert {"steps", "world_size", "first_nonfinite", "scaler", "modules", "parameters", "findings"} <= set(report)
    assert report["steps"] == STEPS and report["world_size"] == 1 and report["watch_version"] == 1
    assert {"step", "rank", "module", "op", "phase", "dtype", "fp32_finite"} <= set(report["first_nonfinite"])
    assert {"skipped_steps", "final_scale", "longest_skip_streak", "skip_modules"} <= set(report["scaler"])
    assert {"forward_absmax", "headroom", "grad_underflow_share"} <= set(report["modules"]["gate.score"])
    finding = report["findings"][0]
    assert finding["rule"] == "PA701" and finding["step"] == OUTLIER_STEP and finding["rank"] == 0
    assert {"rule", "name", "severity", "module", "message", "fingerprint"} <= set(finding)


def test_fail_on_sets_the_exit_code(cli, tmp_path):
    torch.manual_seed(0)
    train_fp16(Gated(), lambda s: gated_batch(s, outliers=False), 6, tmp_path / "clean")
    assert cli("watch", str(tmp_path / "clean")).exit_code == 0
    assert cli("watch", str(tmp_path / "clean"), "--fail-on", "info").exit_code == 0


def test_html_report_has_the_timeline_and_the_heat_maps(cli, log, tmp_path):
    pytest.importorskip("plotly")
    out = tmp_path / "watch.html"
    result = cli("watch", log, "--format", "html", "-o", str(out))
    assert result.exit_code == 1, result.output
    page = out.read_text()
    assert 'id="timeline"' in page and 'id="heat-headroom"' in page and 'id="heat-grad_underflow_share"' in page
    assert "nonfinite-loss" in page  # the trigger marked on the timeline
    assert 'data-rule="PA701"' in page


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "no such directory"),
    (lambda p: p, "not a precisionaudit.watch log (no events-rank*.jsonl files)"),
])
def test_a_missing_or_foreign_directory_is_one_line_and_exit_2(cli, tmp_path, make, message):
    (tmp_path / "notes.txt").write_text("not a log")
    result = cli("watch", str(make(tmp_path)))
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr
    assert result.stderr.startswith("precisionaudit: error: ")


def test_a_foreign_events_file_is_refused(cli, tmp_path):
    (tmp_path / "events-rank0.jsonl").write_text('{"event": "start", "format": "other"}\n')
    result = cli("watch", str(tmp_path))
    assert result.exit_code == 2 and "no start event" in result.stderr


def test_a_job_killed_mid_run_leaves_a_log_that_reads(cli, tmp_path):
    """The job dies at step 14 without close(): the events written up to then are the log,
    a last line cut off mid-write is left out."""
    log = tmp_path / "log"
    run = subprocess.run([sys.executable, os.path.join(HERE, "watch_loops.py"), "gated", str(log), "40",
                          "--kill-at", "14"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    with open(log / "events-rank0.jsonl", "a") as fh:
        fh.write('{"event": "sample", "step": 15, "mod')  # a write the kill cut off
    result = cli("watch", str(log), "--format", "json")
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["complete"] is False and report["steps"] >= OUTLIER_STEP + 1
    assert report["first_nonfinite"]["step"] == OUTLIER_STEP and not os.path.exists(log / "summary.json")
    assert "the job ended before close()" in cli("watch", str(log)).output


def test_plan_of_the_log_is_a_plan_file_apply_plan_and_check_take(cli, log, tmp_path):
    out = tmp_path / "amp_plan.yaml"
    result = cli("plan", log, "-o", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.startswith(f"# precisionaudit plan {log}: from the watch log of {STEPS} step(s)")
    assert f"first non-finite: step {OUTLIER_STEP}, rank 0, forward: aten.exp.default of exp in gate" in text
    plan = yaml.safe_load(text)
    assert plan["overrides"] == [{"module": "gate", "ops": ["exp"], "dtype": "float32", "rules": ["PA701"],
                                  "reason": f"first non-finite at step {OUTLIER_STEP}, rank 0: aten.exp.default "
                                            "(forward) in gate"}]
    handle = precisionaudit.apply_plan(Gated(), str(out))  # the file as written, no conversion
    handle.remove()


def test_plan_of_a_log_refuses_model_options(cli, log):
    result = cli("plan", log, "--prune")
    assert result.exit_code == 2 and "the log is the evidence" in result.stderr
    result = cli("explain", log)
    assert result.exit_code == 2 and "a watch log has no model to explain" in result.stderr


def test_importing_the_watch_pulls_in_no_scanner_capture_or_networkx():
    """The watch runs in the user's process: what ``import precisionaudit.watch`` and its first
    use bring in is torch, the core vocabulary, the op names, and the watch itself."""
    code = ("import sys, torch\nbefore = set(sys.modules)\nimport precisionaudit\n"
            "model = torch.nn.Linear(2, 2)\n"
            "w = precisionaudit.watch(model, torch.optim.SGD(model.parameters(), lr=0.1), log_dir=sys.argv[1])\n"
            "model(torch.ones(1, 2)).sum().backward(); w.step(); w.close()\n"
            "print('\\n'.join(sorted(m for m in set(sys.modules) - before)))")
    import tempfile

    with tempfile.TemporaryDirectory() as log:
        result = subprocess.run([sys.executable, "-c", code, log], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    imported = result.stdout.split()
    ours = {m for m in imported if m.startswith("precisionaudit")}
    assert "networkx" not in imported and "precisionaudit.watch.monitor" in ours
    # the package, the core vocabulary, the op names of the runtime layer, the watch itself
    assert {m.split(".")[1] for m in ours if "." in m} == {"core", "runtime", "watch"}, ours
    assert not {m for m in ours if m.startswith("precisionaudit.runtime.") and not m.startswith(
        ("precisionaudit.runtime.pytorch.ops", "precisionaudit.runtime.pytorch"))}


def test_reading_a_log_and_planning_from_it_need_no_torch(log, tmp_path):
    """`watch DIR` and `plan DIR` read JSON: they run where torch cannot be imported."""
    pytest.importorskip("onnxconverter_common")  # test_torch_free's module needs the onnx extra
    from test_torch_free import run_cli

    result = run_cli("watch", log, "--format", "json")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["first_nonfinite"]["op"] == "exp"
    result = run_cli("plan", log, "-o", tmp_path / "plan.yaml")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load((tmp_path / "plan.yaml").read_text())["overrides"][0]["ops"] == ["exp"]


def gated_model_file(path):
    """The run's model as a model file, with the outlier batch as its example input."""
    import inspect

    import watch_loops

    path.write_text("import torch\nfrom torch import nn\n\n\n" + inspect.getsource(watch_loops.Gate) + "\n\n"
                    + inspect.getsource(watch_loops.Gated) + f"""

def get_model():
    torch.manual_seed(0)
    return Gated()


def get_example_inputs():
    return (torch.randn(8, 16, generator=torch.Generator().manual_seed({1000 + OUTLIER_STEP})) * 30,)
""")
    return path


def test_check_passes_with_the_plan_the_log_wrote(cli, log, tmp_path):
    """The model of the run (as a model file, with the outlier batch as its example input)
    under CPU autocast: float16 alone is not finite, with the watch's plan it is."""
    model = gated_model_file(tmp_path / "gated.py")
    assert cli("plan", log, "-o", str(tmp_path / "amp_plan.yaml")).exit_code == 0
    result = cli("check", str(model), "--plan", str(tmp_path / "amp_plan.yaml"), "--device", "cpu",
                 "--format", "json")
    report = json.loads(result.stdout)
    baseline, planned = report["variants"][1], report["variants"][2]
    assert baseline["status"] == "nonfinite" and planned["status"] != "nonfinite", report
    assert result.exit_code == (0 if report["passed"] else 1)


@pytest.fixture(scope="module")
def bf16_page(tmp_path_factory):
    """The page of a pure-bfloat16 run whose LayerNorm gain's updates all round away."""
    pytest.importorskip("plotly")
    from click.testing import CliRunner
    from watch_loops import NormNet, train_bf16

    from precisionaudit.cli import main

    folder = tmp_path_factory.mktemp("bf16")
    train_bf16(NormNet(), 12, folder / "log")
    page = folder / "watch.html"
    CliRunner().invoke(main, ["watch", str(folder / "log"), "--format", "html", "-o", str(page)],
                       catch_exceptions=False)
    return page


def test_the_page_charts_lost_updates_and_headroom_in_bits(bf16_page):
    """Issue 43: lost updates had no chart, and the headroom map was one flat colour under
    bfloat16 (a linear scale against 3.4e38). Lost updates get a heat map per parameter;
    headroom is in bits left: log2(3.39e38 / max |output|), some 120 bits here."""
    from test_html_report import Dom, _figure

    dom = Dom(bf16_page.read_text())
    lost = _figure(dom, "heat-update_lost_share")["data"][0]
    row = lost["y"].index("norm.weight")
    assert all(v == 1.0 for v in lost["z"][row])  # every sampled step: all of the gain's updates lost
    headroom = _figure(dom, "heat-headroom")["data"][0]
    cells = [v for r in headroom["z"] for v in r if v is not None]
    assert 100 < min(cells) and max(cells) < 140 and max(cells) - min(cells) > 2  # not one flat colour
    assert headroom["colorbar"]["title"]["text"] == "bits"


def test_the_watch_page_renders_in_headless_chromium(bf16_page, tmp_path):
    from test_html_report import CHROMIUM, _open

    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    dom, console = _open(bf16_page, tmp_path, "watch")
    assert console == [], console
    for plot in ("timeline", "heat-headroom", "heat-update_lost_share"):  # plotly drew into each div
        div = dom.split(f'id="{plot}"', 1)[1].split('id="', 1)[0]
        assert 'class="main-svg"' in div, plot
