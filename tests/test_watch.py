"""precisionaudit.watch in real CPU training loops: what it finds, that the plan it writes
fixes it, and that it never changes the run.

The expected facts come from the loops' design and from float16's arithmetic, not from the
watch: an exp overflows in float16 past log(65504) = 11.09 and in float32 past 88.7; a
softmax probability below float16's smallest subnormal 2^-24 is 0; GradScaler halves its
scale on every skipped step; half a bfloat16 ulp of 1.0 is 2^-8.
"""
import json
import math
import os

import pytest
import torch
from watch_loops import (OUTLIER_STEP, Entropy, Gated, NormNet, entropy_batch, gated_batch, train_bf16,
                         train_fp16)

import precisionaudit
from precisionaudit.frontend import WATCH, frontend_for
from precisionaudit.plan.watch import watch_plan
from precisionaudit.watch.log import read_log, summarize

STEPS = 20


def report_of(log_dir):
    report = summarize(read_log(str(log_dir)))
    return report, {f.rule: f for f in WATCH.findings(report, str(log_dir))}


@pytest.fixture(scope="module")
def gated_run(tmp_path_factory):
    log = tmp_path_factory.mktemp("gated") / "log"
    torch.manual_seed(0)
    losses, _ = train_fp16(Gated(), gated_batch, STEPS, log)
    return log, losses


@pytest.fixture(scope="module")
def entropy_run(tmp_path_factory):
    log = tmp_path_factory.mktemp("entropy") / "log"
    torch.manual_seed(0)
    losses, params = train_fp16(Entropy(), entropy_batch, STEPS, log)
    return log, losses, params


def test_the_outlier_batch_really_overflows_exp_in_float16_only():
    """The premise of the forward case, checked with torch alone."""
    torch.manual_seed(0)
    model = Gated()
    scores = model.gate.score(torch.relu(model.inp(gated_batch(OUTLIER_STEP))))
    assert scores.max() > math.log(65504) and scores.max() < math.log(torch.finfo(torch.float32).max)
    assert not torch.isfinite(torch.exp(scores.half())).all() and torch.isfinite(torch.exp(scores)).all()


def test_a_forward_overflow_mid_run_names_the_module_the_op_and_the_step(gated_run):
    log, losses = gated_run
    assert all(math.isfinite(v) for v in losses[:OUTLIER_STEP]) and not math.isfinite(losses[OUTLIER_STEP])
    report, findings = report_of(log)
    first = report["first_nonfinite"]
    assert (first["step"], first["rank"], first["phase"]) == (OUTLIER_STEP, 0, "forward")
    assert (first["module"], first["op"], first["aten"]) == ("gate", "exp", "aten.exp.default")
    assert first["dtype"] == "float16" and first["input_dtypes"] == ["float16"] and first["fp32_finite"] is True
    # the gate's own output is back in float16's range once exp runs in float32
    assert first["region"] == {"module": "gate", "ops": ["exp"], "back_in_range": True, "origin": None}
    assert findings["PA701"].severity == "error" and findings["PA701"].module == "gate"
    assert report["steps"] == STEPS and report["complete"]


def test_a_nan_gradient_behind_a_masked_log_is_found_in_the_backward(entropy_run):
    log, losses, _ = entropy_run
    assert all(math.isfinite(v) for v in losses)  # the forward stays finite
    report, findings = report_of(log)
    scaler = report["scaler"]
    assert scaler["skipped_steps"] == STEPS and scaler["longest_skip_streak"] == STEPS
    assert scaler["final_scale"] == 65536.0 * 0.5 ** STEPS  # GradScaler: backoff 0.5 per skip
    first = report["first_nonfinite"]
    assert first["phase"] == "backward" and first["step"] == 9  # the 10th skip: skip_streak
    assert (first["op"], first["node"], first["aten"]) == ("log", "LogBackward0", "aten.div.Tensor")
    assert first["fp32_finite"] is False  # 0/0 in float32 as well: the input was lost before
    assert first["region"]["ops"] == ["softmax", "log"]
    assert first["region"]["origin"] == {"op": "softmax", "module": "", "lost": "flushed to 0"}
    assert first["masked"]["aten"] == "aten.log.default"  # log(0) = -inf, masked by the where
    assert set(findings) == {"PA702", "PA703"}
    assert findings["PA703"].evidence["case"] == "collapsed"


def test_the_softmax_really_flushes_to_zero_in_float16_and_not_in_float32():
    torch.manual_seed(0)
    model = Entropy().eval()
    logits = model.fc(model.norm(entropy_batch(9))) * 12
    assert (torch.softmax(logits.half(), -1) == 0).any() and (torch.softmax(logits, -1) > 0).all()


@pytest.mark.parametrize("run, batches", [("gated_run", gated_batch), ("entropy_run", entropy_batch)])
def test_the_plan_of_the_log_makes_the_rerun_clean(run, batches, request, tmp_path):
    log = request.getfixturevalue(run)[0]
    report, _ = report_of(log)
    plan, header = watch_plan(report, WATCH.findings(report, str(log)), str(log))
    assert plan.overrides and plan.target == {"dtype": "float16", "mode": "autocast", "device": "cpu"}
    first = report["first_nonfinite"]
    assert f"step {first['step']}, rank 0" in header[1] and first["aten"] in header[1]
    torch.manual_seed(0)
    model = Gated() if run == "gated_run" else Entropy()
    rerun = tmp_path / "rerun"
    losses, _ = train_fp16(model, batches, STEPS, rerun, plan=plan)
    assert all(math.isfinite(v) for v in losses)
    report, findings = report_of(rerun)
    assert report["first_nonfinite"] is None and findings == {}
    assert report["scaler"]["longest_skip_streak"] < 10


def test_pure_bfloat16_layernorm_updates_are_all_lost(tmp_path):
    losses = train_bf16(NormNet(), 12, tmp_path / "log")
    assert all(math.isfinite(v) for v in losses)
    report, findings = report_of(tmp_path / "log")
    # Adam's updates are about lr = 1.5e-3, below half a bfloat16 ulp of the gain 1.0 (2^-8)
    assert 1.5e-3 < 2.0 ** -8
    assert report["parameters"]["norm.weight"]["update_lost_share"] == 1.0
    assert report["parameters"]["norm.weight"]["dtype"] == "bfloat16"
    lost = [f for f in WATCH.findings(report, str(tmp_path / "log")) if f.rule == "PA706"]
    assert len(lost) == 1  # one cause, one finding: the parameters listed, the largest share first
    shares = [p["share"] for p in lost[0].evidence["parameters"]]
    assert "norm.weight" in [p["name"] for p in lost[0].evidence["parameters"]] and shares == sorted(shares, reverse=True)
    assert lost[0].severity == "error" and lost[0].evidence["case"] == "stalled"
    plan, _ = watch_plan(report, list(findings.values()), str(tmp_path / "log"))
    assert plan.master_weights == "float32" or "norm" in plan.keep_fp32_modules
    assert report["run"]["mode"] == "pure" and report["run"]["dtype"] == "bfloat16"


def test_the_clean_twin_has_no_finding_and_bit_identical_losses_with_and_without_the_watch(tmp_path):
    """No outlier: nothing to find; and the watch (samples every 5 steps) changes nothing."""
    def batches(step):
        return gated_batch(step, outliers=False)

    torch.manual_seed(0)
    watched, watched_params = train_fp16(Gated(), batches, STEPS, tmp_path / "log")
    torch.manual_seed(0)
    plain, plain_params = train_fp16(Gated(), batches, STEPS)
    assert watched == plain
    assert all(torch.equal(a, b) for a, b in zip(watched_params, plain_params))
    report, findings = report_of(tmp_path / "log")
    assert findings == {} and report["first_nonfinite"] is None and report["triggers"] == []
    assert {s for s in range(0, STEPS, 5)} <= {e["step"] for e in report["exchanges"]}


def test_a_replay_leaves_the_run_exactly_as_it_was(entropy_run):
    """Dropout and BatchNorm in the replayed model: the generator and the running statistics
    are put back, the gradients are not touched."""
    _, watched, watched_params = entropy_run
    torch.manual_seed(0)
    plain, plain_params = train_fp16(Entropy(), entropy_batch, STEPS)
    assert watched == plain
    assert all(torch.equal(a, b) for a, b in zip(watched_params, plain_params))


def test_the_modules_are_sampled_every_every_steps(gated_run):
    log, _ = gated_run
    ranks = read_log(str(log))
    sampled = [e["step"] for e in ranks[0] if e["event"] == "sample"]
    # every 5 steps, and the step after the trigger at OUTLIER_STEP
    assert sampled == [0, 5, 10, OUTLIER_STEP + 1, 15]
    before = next(e for e in ranks[0] if e["event"] == "sample" and e["step"] == 10)
    gate = before["modules"]["gate.score"]
    assert gate["dtype"] == "float16" and gate["headroom"] == pytest.approx(gate["forward_absmax"] / 65504)
    assert set(before["modules"]) == {"", "inp", "gate", "gate.score", "gate.value", "out"}


def test_the_summary_is_written_by_close(gated_run):
    log, _ = gated_run
    with open(os.path.join(log, "summary.json")) as fh:
        summary = json.load(fh)
    assert summary["steps"] == STEPS and summary["first_nonfinite"]["op"] == "exp"


def test_a_directory_of_watch_events_is_the_watch_logs_frontend(gated_run, tmp_path):
    assert frontend_for(str(gated_run[0])) is WATCH
    assert frontend_for(str(tmp_path), entry=None) is not WATCH  # an empty directory is no log


# --------------------------------------------------------------------------- bad input
def test_an_unwritable_log_dir_is_a_clear_error_at_watch(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    model = Gated()
    with pytest.raises(precisionaudit.watch.log.WatchLogError, match="cannot write the log in .*file/log"):
        precisionaudit.watch(model, torch.optim.SGD(model.parameters(), lr=0.1), log_dir=str(blocker / "log"))


def test_a_model_that_is_not_a_module_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="model must be a torch.nn.Module .*not function"):
        precisionaudit.watch(lambda x: x, None, log_dir=str(tmp_path))


def test_an_optimizer_that_is_not_one_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="optimizer must be a torch.optim.Optimizer"):
        precisionaudit.watch(Gated(), object(), log_dir=str(tmp_path))


def test_precisionaudit_watch_is_callable_before_and_after_its_package_is_imported(tmp_path):
    import precisionaudit.watch.log  # noqa: F401  (binds precisionaudit.watch to the package)

    model = Gated()
    with precisionaudit.watch(model, torch.optim.SGD(model.parameters(), lr=0.1), log_dir=str(tmp_path)) as w:
        assert isinstance(w, precisionaudit.watch.Watch)
    assert w.closed


def test_a_step_without_a_loss_is_an_unknown_loss_not_a_nonfinite_one(tmp_path):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with precisionaudit.watch(model, opt, log_dir=str(tmp_path), every=2) as watch:
        for _ in range(3):
            opt.zero_grad()
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
            watch.step()  # the model returns no .loss
    report, findings = report_of(tmp_path)
    assert report["loss"]["0"] == {"nonfinite_steps": [], "nonfinite_count": 0, "last": None, "logged": 0}
    assert report["steps"] == 3 and findings == {}


# --------------------------------------------------------------------------- issue 43
def test_a_failure_float32_cannot_fix_is_named_so_and_never_planned(tmp_path):
    """A masked mean over a row with nothing kept is 0/0: NaN in float32 as in float16. The
    finding says it is not a precision failure, with the operands (0/0), suggests a guard, and
    the plan writes no override for it (the header says so)."""
    from watch_loops import MaskedMean, empty_row_batch

    log = tmp_path / "log"
    losses, _ = train_fp16(MaskedMean(), empty_row_batch, 4, log)
    assert math.isfinite(losses[1]) and math.isnan(losses[2])
    report, findings = report_of(log)
    first = report["first_nonfinite"]
    assert (first["op"], first["fp32_finite"], first["region"]) == ("div", False, None)
    assert first["operands"] == [0.0, 0.0]
    pa701 = findings["PA701"]
    assert "not a precision failure: float32 gives the same inf/NaN from the same inputs (div(0, 0))" in pa701.message
    assert "mask the empty rows" in pa701.fix["to"] and "plan" not in pa701.fix and pa701.severity == "error"
    plan, header = watch_plan(report, list(findings.values()), str(log))
    assert plan.overrides == [] and any(line.startswith("not planned: PA701") for line in header)
    assert "PA703" not in findings or "not a precision failure" in findings["PA703"].fix["to"]


def test_one_overflowing_linear_in_a_residual_net_is_planned_alone(tmp_path, cli):
    """Issue 43: block 3's fc2 overflows float16 while the float32 residual stream it feeds holds
    the value (autocast's usual picture). The plan was ``module: ''``, ``ops: [linear]``: every
    Linear of the model (14 of 14) in float32. It is now that one call at the block, where its
    float32 result lands in the residual add: 1 Linear of 14, and the rerun is clean."""
    from watch_loops import Residual

    log = tmp_path / "log"
    losses, _ = train_fp16(Residual(), entropy_batch, 3, log)
    assert not any(math.isfinite(v) for v in losses)
    report, findings = report_of(log)
    assert report["first_nonfinite"]["module"] == Residual.OVERFLOWING
    plan, header = watch_plan(report, list(findings.values()), str(log))
    assert [(o.module, o.ops) for o in plan.overrides] == [("blocks.3", ["linear#2"])]
    assert any("keeps 1 of 14 Linear modules in float32" in line for line in header)
    plan_file = tmp_path / "plan.yaml"
    assert cli("plan", log, "-o", plan_file).exit_code == 0
    rerun, _ = train_fp16(Residual(), entropy_batch, 3, tmp_path / "rerun", plan=str(plan_file))
    assert all(math.isfinite(v) for v in rerun)
    assert summarize(read_log(str(tmp_path / "rerun")))["first_nonfinite"] is None
    model_file = tmp_path / "residual.py"
    model_file.write_text("import sys\nsys.path.insert(0, %r)\nfrom watch_loops import Residual, entropy_batch\n\n\n"
                          "def get_model():\n    return Residual()\n\n\ndef get_example_inputs():\n"
                          "    return (entropy_batch(0),)\n" % os.path.dirname(os.path.abspath(__file__)))
    checked = json.loads(cli("check", model_file, "--plan", plan_file, "--format", "json").stdout)
    baseline, planned = checked["variants"][1:]
    assert baseline["status"] == "nonfinite" and planned["status"] == "ok"
    assert planned["linear_modules_low_precision"] == {"low": 13, "total": 14}


def test_the_micro_batch_that_failed_is_the_one_replayed(tmp_path):
    """Gradient accumulation over 4 micro-batches, only the second one an outlier: the replay
    of the last micro-batch found nothing; the step's micro-batches are now replayed in order
    and the second is named."""
    torch.manual_seed(0)
    model = Gated()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    with precisionaudit.watch(model, opt, scaler, log_dir=str(tmp_path), every=5) as watch:
        for step in range(2):
            opt.zero_grad()
            for micro in range(4):
                outlier = step == 1 and micro == 1
                x = gated_batch(OUTLIER_STEP if outlier else micro + 4 * step)
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = model(x) / 4
                scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            watch.step(loss)
    report, findings = report_of(tmp_path)
    first = report["first_nonfinite"]
    assert (first["step"], first["micro_batch"], first["micro_batches"], first["op"]) == (1, 1, 4, "exp")
    assert "(rank 0, micro-batch 2 of 4)" in findings["PA701"].message


def test_a_nonfinite_loss_with_no_op_found_is_still_an_error(tmp_path, cli):
    """The loss turns -inf outside the watched model (a log(0) added in the loss function, with
    no gradient: the scaler does not skip, nothing triggers a replay): `watch DIR` exited 0 on
    that run. It is now PA710, an error."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    with precisionaudit.watch(model, opt, scaler, log_dir=str(tmp_path), every=5) as watch:
        for step in range(4):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(entropy_batch(step))
            loss = out.float().pow(2).mean() + (torch.log(torch.zeros(())) if step == 2 else 0.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            watch.step(loss)
    report, findings = report_of(tmp_path)
    assert report["first_nonfinite"] is None and set(findings) >= {"PA710"}
    pa710 = findings["PA710"]
    assert pa710.severity == "error" and pa710.evidence["step"] == 2 and pa710.evidence["replay"] == "not run"
    assert "the loss of step 2 (rank 0) was inf/NaN, and it was not replayed" in pa710.message
    assert cli("watch", tmp_path).exit_code == 1


def test_collectives_and_allocations_are_never_rerun_nor_an_origin():
    from precisionaudit.watch.attribution import in_float32, op_kind

    gather = torch.ops._c10d_functional.all_gather_into_tensor.default
    assert op_kind(gather) == "communication" and in_float32(gather, (torch.ones(2).half(), 2, "0"), {}) is None
    assert op_kind(torch.ops.aten.empty.memory_format) == "allocation"
    assert in_float32(torch.ops.aten.empty.memory_format, ([2],), {"dtype": torch.float16}) is None
    assert op_kind(torch.ops.aten.view.default) == "view" and op_kind(torch.ops.aten.exp.default) is None
