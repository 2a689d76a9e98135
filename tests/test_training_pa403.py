"""PA403 fp16-without-loss-scaling: the AMP protocol of a training step, read statically (the step
walk's events). The hazard sample, its clean twin, the rule page's Example and Use instead, and
the ways real code is written."""
from training_rules import AMP_RULES, Audit, amp_found, amp_lines, assert_page_examples, line_of, sample, write


def test_the_clean_twin_gives_no_finding_and_the_message_is_filled():
    seen = Audit(*AMP_RULES).pair("pa403_fp16_without_loss_scaling", amp_lines("pa403_fp16_without_loss_scaling_hazard.py"))
    assert seen["PA403"].fix["autofix"] is False


def test_pa403_fires_for_a_flag_chosen_float16_and_for_cudas_default_dtype():
    path = sample("pa403_fp16_without_loss_scaling_hazard.py")
    assert amp_found(path) == [("PA403", line_of(path, "loss.backward()", 1), "when --fp16 is set"),
                           ("PA403", line_of(path, "loss.backward()", 2), None)]


def test_an_optional_scaler_and_a_context_chosen_by_a_flag(tmp_path):
    """``GradScaler() if args.fp16 else None`` then ``if scaler is not None``: the two
    branches follow the flag, and an autocast context kept in a variable is a region."""
    clean = write(tmp_path, """\
        import contextlib
        import torch

        def train(model, optimizer, data, args):
            scaler = torch.amp.GradScaler("cuda") if args.fp16 else None
            ctx = torch.autocast("cuda", dtype=torch.float16) if args.fp16 else contextlib.nullcontext()
            for x in data:
                with ctx:
                    loss = model(x).sum()
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                else:
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
        """)
    assert amp_found(clean) == []
    hazard = write(tmp_path, clean.read_text().replace('torch.amp.GradScaler("cuda") if args.fp16 else None',
                                                        'torch.amp.GradScaler("cuda") if args.scale else None'),
                    "hazard.py")
    assert amp_found(hazard) == [("PA403", 14, "when args.fp16 is true and args.scale is false")]


def test_the_pages_example_fires_and_its_use_instead_is_clean(tmp_path):
    assert_page_examples("PA403", tmp_path)
