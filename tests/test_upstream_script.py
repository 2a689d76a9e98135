"""bench/upstream.py's pure parts: reading constraints.txt's pins, comparing versions, and
picking the failures out of pytest's and zoo_bench's output. The script itself (a venv of the
newest releases) is run by hand, not here; its --dry-run installs nothing."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import upstream  # noqa: E402


def test_pins_are_read_by_name_skipping_comments_and_ranges():
    text = ("# a comment == 1.0\n"
            "\n"
            "Jinja2==3.1.6\n"
            "torch == 2.13.0  # the CPU build\n"
            "numpy>=2\n"
            "pydantic_core==2.50.5 ; python_version >= '3.11'\n"
            "uvicorn[standard]==0.30.0\n"
            "--index-url https://example.org/simple\n")
    assert upstream.read_pins(text) == {"Jinja2": "3.1.6", "torch": "2.13.0", "pydantic_core": "2.50.5",
                                        "uvicorn": "0.30.0"}


def test_the_checkouts_constraints_are_all_exact_pins():
    with open(upstream.CONSTRAINTS, encoding="utf-8") as f:
        text = f.read()
    requirements = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    pins = upstream.read_pins(text)
    assert len(pins) == len(requirements) and pins["torch"] == "2.13.0"


def test_versions_compare_as_releases():
    assert upstream.same_version("2.13.0", "2.13.0+cpu")
    assert upstream.same_version("1.0", "1.0.0")
    assert upstream.same_version("2026.9.0", "2026.09.0")
    assert not upstream.same_version("5.23.0", "5.24.0")
    assert not upstream.same_version("1.0", "1.0.1")
    assert not upstream.same_version("1.0.0", "1.0.0rc1")
    assert not upstream.same_version("0.10.5", "0.1.5")


def test_moved_lists_changed_and_missing_pins_matching_names_as_pip_does():
    pins = {"Jinja2": "3.1.6", "torch": "2.13.0", "pydantic_core": "2.50.5", "onnx": "1.23.2"}
    installed = {"jinja2": "3.2.0", "torch": "2.13.0+cpu", "pydantic-core": "2.50.5", "numpy": "9.0"}
    assert upstream.moved(pins, installed) == [("Jinja2", "3.1.6", "3.2.0"), ("onnx", "1.23.2", "not installed")]


def test_failures_are_picked_out_of_the_outputs():
    pytest_lines = ["....F.", "=========================== short test summary info ============================",
                    "FAILED tests/test_zoo.py::test_x[gpt2] - AssertionError: judged nowhere",
                    "ERROR tests/test_a.py - ImportError", "1 failed, 1 error, 4 passed in 1.0s"]
    assert upstream.failing_tests(pytest_lines) == pytest_lines[2:4]
    zoo_lines = ["| gpt2 | float16 autocast | fake | 40 | PA106 1 | 1 | 0.2 | 500 |",
                 "  float16:pure: this site's code changed: judge it again (PA106 in a.py:3 (f): judged as `x`, now `y`) [gpt2: ...]",
                 "  float16:pure: judged nowhere (PA108 at b.py:9 (g): `loss`) [bert: ...]",
                 "  float16:pure: judged false (PA105 at c.py:1 (h)) [clip: ...]",
                 "false positives, float16:pure: 1 of 3 distinct sites (33%); changed (judge again) 1; unjudged 1",
                 "scan errors: t5 float16:pure"]
    assert upstream.sites_to_judge(zoo_lines) == [line.strip() for line in zoo_lines[1:4] + zoo_lines[5:]]


def test_dry_run_plans_without_installing(capsys, tmp_path):
    venv = tmp_path / "venv"
    assert upstream.main(["--dry-run", "--zoo", "--venv", str(venv)]) == 0
    out = capsys.readouterr().out
    assert not venv.exists()
    assert "--upgrade-strategy eager" in out and "torch==2.13.0" in out and "zoo_bench.py" in out
    assert "constraints.txt" not in out.split("would run:", 1)[1].split("pins in")[0]
