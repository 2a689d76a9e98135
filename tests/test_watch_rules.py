"""The sampled rules of precisionaudit.watch, each on a hazard loop and its clean twin:
PA704 (headroom precursor), PA705 (gradient underflow at the scale in use), PA709
(optimizer-state underflow). Expected values from float16's limits: largest 65504,
smallest normal 2^-14, smallest subnormal 2^-24."""
import torch
from torch import nn

import precisionaudit
from precisionaudit.frontend import WATCH
from precisionaudit.watch.log import read_log, summarize


class Wide(nn.Module):
    """fc's outputs are ``weight * 16`` on inputs of ones: 1200 * 16 = 19200, 29% of 65504."""

    def __init__(self, weight: float):
        super().__init__()
        self.fc = nn.Linear(16, 4, bias=False)
        nn.init.constant_(self.fc.weight, weight)

    def forward(self, x):
        return self.fc(x).mean() * 1e-4


def run(model, log, steps=4, scaler=None, optimizer=None, dtype=torch.float16, autocast=True, x=None):
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.ones(8, 16) if x is None else x
    with precisionaudit.watch(model, optimizer, scaler, log_dir=str(log), every=2) as watch:
        for _ in range(steps):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=dtype, enabled=autocast):
                loss = model(x.to(dtype) if not autocast else x)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            watch.step(loss)
    report = summarize(read_log(str(log)))
    return report, {(f.rule, f.module): f for f in WATCH.findings(report, str(log))}


def test_pa704_an_output_near_float16s_largest_value(tmp_path):
    report, findings = run(Wide(1200.0), tmp_path / "hazard", scaler=torch.amp.GradScaler("cpu"))
    assert report["modules"]["fc"]["forward_absmax"] == 19200.0
    assert report["modules"]["fc"]["headroom"] == 19200.0 / 65504
    assert findings[("PA704", "fc")].severity == "warning"
    _, clean = run(Wide(1.0), tmp_path / "clean", scaler=torch.amp.GradScaler("cpu"))
    assert not any(rule == "PA704" for rule, _ in clean)


class Tiny(nn.Module):
    """d loss / d output = 1e-6 per element: the gradients are float16 subnormals (between
    2^-24 and 2^-14) unless the loss is scaled."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x).sum() * 1e-6


def test_pa705_gradients_below_the_smallest_normal_at_a_scale_of_one(tmp_path):
    torch.manual_seed(0)
    stuck = torch.amp.GradScaler("cpu", init_scale=1.0, growth_interval=10 ** 9)
    report, findings = run(Tiny(), tmp_path / "hazard", scaler=stuck, x=torch.randn(8, 16))
    assert report["modules"]["fc"]["grad_underflow_share"] == 1.0  # 0 < |g| * 1 < 2^-14 everywhere
    assert findings[("PA705", "fc")].evidence["scale"] == 1.0
    torch.manual_seed(0)
    report, clean = run(Tiny(), tmp_path / "clean", scaler=torch.amp.GradScaler("cpu"), x=torch.randn(8, 16))
    assert report["modules"]["fc"]["grad_underflow_share"] == 0.0  # at 2^16 they are normal
    assert not any(rule == "PA705" for rule, _ in clean)


def test_pa709_exp_avg_sq_underflows_in_float16(tmp_path):
    """Pure float16 Adam: g ~ 1e-3, (1 - 0.999) g^2 ~ 1e-9 is below float16's smallest
    subnormal 6e-8: exp_avg_sq stays 0. In bfloat16 (float32's range) it does not."""
    def loop(dtype, log):
        torch.manual_seed(0)
        model = Tiny().to(dtype)
        model.forward = lambda x: model.fc(x).mean() * 1e-1
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-3)
        return run(model, log, optimizer=opt, dtype=dtype, autocast=False, x=torch.randn(8, 16))

    report, findings = loop(torch.float16, tmp_path / "hazard")
    weight = report["parameters"]["fc.weight"]
    assert weight["state_dtype"] == "float16" and weight["state_underflow_share"] > 0.9
    assert findings[("PA709", "fc")].severity == "warning"
    _, clean = loop(torch.bfloat16, tmp_path / "clean")
    assert not any(rule == "PA709" for rule, _ in clean)
