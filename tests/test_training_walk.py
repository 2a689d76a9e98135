"""The walk of a training step (training/step/): paths split on what cannot be known and
merge where they know the same; calls into the file's own functions are followed; ``try``
handlers are walked; too many paths give silence, not a guess. The rules' own tests are in
test_training_pa40N.py."""
import pytest
from training_rules import amp_found, write


def test_a_file_that_mentions_no_amp_word_is_not_analysed(tmp_path):
    path = write(tmp_path, "def f(x):\n    return x + 1\n")
    assert amp_found(path) == []


@pytest.mark.parametrize("flags,expected", [(3, 1), (12, 0)])
def test_too_many_paths_give_silence_not_a_guess(tmp_path, flags, expected):
    """Each flag may unscale: 2**flags paths reach the clip. Three are walked (the clip is
    reported on the one path where no flag unscaled); twelve exceed the cap: silence."""
    branches = "".join(f"        if args.f{i}:\n            scaler.unscale_(opt)\n" for i in range(flags))
    path = write(tmp_path, "import torch\n\ndef train(scaler, opt, model, data, args):\n    for x in data:\n"
                  "        scaler.scale(model(x)).backward()\n" + branches +
                  "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                  "        scaler.step(opt)\n        scaler.update()\n")
    hits = amp_found(path, ["PA401"])
    assert len(hits) == expected
    if expected:
        assert hits[0][2] == " and ".join(f"args.f{i} is false" for i in range(flags)).join(["when ", ""])



def test_an_except_handler_is_walked_from_where_the_try_began(tmp_path):
    """A scaler.step in a handler (a fallback step) is an AMP event like any other: here it
    follows an unscaled backward (PA402); the body's own step does not count on that path."""
    path = write(tmp_path, """\
        import torch

        def train(model, optimizer, data):
            scaler = torch.amp.GradScaler("cuda")
            for x in data:
                loss = model(x).sum()
                try:
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                except RuntimeError:
                    loss.backward()
                    scaler.step(optimizer)
                scaler.update()
        """)
    assert amp_found(path, ["PA402"]) == [("PA402", 12, None)]


def test_an_elif_chain_is_one_test_after_another(tmp_path):
    path = write(tmp_path, """\
        import torch

        def train(model, optimizer, data, args):
            scaler = torch.amp.GradScaler("cuda")
            for x in data:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x).sum()
                if args.a:
                    scaler.scale(loss).backward()
                elif args.b:
                    loss.backward()
                else:
                    scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """)
    assert amp_found(path, ["PA402", "PA403"]) == [("PA402", 14, "when args.a is false and args.b is true"),
                                                  ("PA403", 11, None)]


def test_a_helper_defined_inside_the_step_is_walked_where_it_is_called(tmp_path):
    path = write(tmp_path, """\
        import torch

        def train(model, optimizer, data, scaler):
            def clip():
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

            for x in data:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(x)
                scaler.scale(loss).backward()
                clip()
                scaler.step(optimizer)
                scaler.update()
        """)
    assert amp_found(path, ["PA401"]) == [("PA401", 5, None)]
    path.write_text(path.read_text().replace("        clip()\n", "        scaler.unscale_(optimizer)\n        clip()\n"))
    assert amp_found(path, ["PA401"]) == []
