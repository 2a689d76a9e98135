"""PA402 scaler-step-protocol: the AMP protocol of a training step, read statically (the step
walk's events). The hazard sample, its clean twin, the rule page's Example and Use instead, and
the ways real code is written."""
from training_rules import amp_audit, amp_found, assert_page_examples, line_of, sample, write


def test_the_clean_twin_gives_no_finding():
    assert amp_audit(sample("pa402_scaler_step_protocol_clean.py")) == []
    assert all(f.fix["autofix"] is False and "{" not in f.message + f.fix["to"]
               for f in amp_audit(sample("pa402_scaler_step_protocol_hazard.py"), ["PA402"]))


def test_pa402_fires_at_each_broken_step_of_the_protocol():
    path = sample("pa402_scaler_step_protocol_hazard.py")
    assert amp_found(path, ["PA402"]) == sorted([
        ("PA402", line_of(path, "self.scaler.update()"), "when fp16 is true"),  # every micro-step
        ("PA402", line_of(path, "optimizer.step()"), None),  # plain step beside scaler.step
        ("PA402", line_of(path, "scaler.step(optimizer)", 2), None),  # after an unscaled backward
        ("PA402", line_of(path, "scaler.step(optimizer)", 3), "when i % log_every == 0"),  # update skipped
    ])


def test_gradient_accumulation_with_unscale_on_every_micro_step(tmp_path):
    path = write(tmp_path, """\
        import torch

        def train(model, optimizer, loader, accum):
            scaler = torch.amp.GradScaler("cuda")
            for i, x in enumerate(loader):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x).sum() / accum
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if (i + 1) % accum == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """)
    assert amp_found(path) == [("PA402", 9, None)]


def test_a_loop_over_optimizers_before_one_update_is_the_documented_protocol(tmp_path):
    path = write(tmp_path, """\
        import torch

        def train(models, optimizers, loader, loss_fn):
            scaler = torch.amp.GradScaler("cuda")
            for x in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = sum(loss_fn(m(x)) for m in models)
                scaler.scale(loss).backward()
                for optimizer in optimizers:
                    scaler.unscale_(optimizer)
                    scaler.step(optimizer)
                scaler.update()
        """)
    assert amp_found(path) == []


def test_a_skipped_step_that_drops_its_gradients_is_not_an_accumulation(tmp_path):
    """LVSM #19's fix: on a too-large gradient norm the step is skipped, but update() and
    zero_grad() still run - nothing accumulates, so update() there is right."""
    path = write(tmp_path, """\
        import torch

        def main(config, model, optimizer, loader):
            scaler = torch.amp.GradScaler("cuda", enabled=config.use_amp)
            for batch in loader:
                with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=(config.use_amp)):
                    loss = model(batch)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if grad_norm > config.skip_norm:
                    print("skipping")
                else:
                    scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
        """)
    assert amp_found(path) == []


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA402", tmp_path)
