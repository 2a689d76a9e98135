"""The fuzz harness of issue 11: one judge for any command line, and a tally of its verdicts.

:func:`judge` runs one command in-process (click's runner) in a scratch folder and says how
it ended: ``ok`` (exit 0/1) or ``error`` (exit 2, last line ``precisionaudit: error: ...``),
or a defect: ``traceback`` (without --debug), ``internal`` ("internal error" on bad input),
``hang`` (past the time limit), ``changed`` (a file it did not write to was modified or
removed), ``half-written`` (an output left behind by a failed run, an output or a JSON/SARIF
report that does not parse), ``leftover`` (a file nobody asked for, e.g. a staging file),
``exit N`` or ``unclear`` (exit 2 without the one-line error).

:data:`TALLY` counts every verdict the fuzz tests see; tests/conftest.py prints it at the
end of the run, bench/fuzz.py as a table.
"""
from __future__ import annotations

import collections
import hashlib
import json
import os
import signal
import threading

OK = {"ok", "error"}
#: the summary's columns: verdict → what the issue calls it
DEFECTS = {"traceback": "tracebacks", "internal": "internal errors", "hang": "hangs",
           "changed": "user files changed", "half-written": "outputs half-written",
           "leftover": "files left behind", "exit": "other exit codes", "unclear": "unclear errors"}


#: caches the tools keep for themselves: Python's, and the training findings cache a scan
#: keeps beside its settings (settings key ``cache-dir``, docs/settings.md)
OWN_CACHES = ("__pycache__", ".precisionaudit_cache")


def snapshot(folder: str) -> dict[str, str]:
    """sha256 of every regular file under ``folder`` (the caches of ``OWN_CACHES`` left out)."""
    digests = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in OWN_CACHES]
        for name in files:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as fh:
                    digests[path] = hashlib.sha256(fh.read()).hexdigest()
    return digests


def _parses(path: str, kind: str | None) -> bool:
    """Whether a written output is whole: it parses as what it is (``plan``, ``onnx``,
    ``json``; None: any text)."""
    try:
        if kind == "onnx":
            import onnx

            onnx.checker.check_model(onnx.load(path, format="protobuf"))  # whatever its name says
        elif kind == "json":
            with open(path, encoding="utf-8") as fh:
                json.load(fh)
        elif kind == "plan":
            from precisionaudit.plan.file import load_plan

            load_plan(path)
    except Exception:  # noqa: BLE001 - whatever fails, the file is not whole
        return False
    return True


def report_format(argv) -> str | None:
    """``json`` or ``sarif`` when that is the report's format (click takes the last --format)."""
    formats = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--format"]
    return formats[-1] if formats and formats[-1] in ("json", "sarif") else None


def judge(argv: list[str], workdir: str, outputs: dict | None = None, limit_s: float = 60.0) -> tuple[str, str]:
    """(verdict, detail) of ``precisionaudit *argv`` run with ``workdir`` holding its files.

    ``outputs``: {path: kind} of the files it was asked to write (kind: ``plan``, ``onnx``,
    ``json`` or None); every other file under ``workdir`` is the user's and must come out
    unchanged. The time limit is a watchdog thread that sends SIGINT to the main thread (it
    interrupts a blocking open() too), so that the command's own --timeout, which owns
    SIGALRM, cannot disarm it."""
    from click.testing import CliRunner

    from precisionaudit.cli import main

    outputs = {os.path.abspath(p): kind for p, kind in (outputs or {}).items()}
    before = snapshot(workdir)
    done, hung = threading.Event(), threading.Event()
    main_thread = threading.main_thread().ident

    def watchdog():
        while not done.wait(limit_s if not hung.is_set() else 1.0):
            hung.set()
            signal.pthread_kill(main_thread, signal.SIGINT)

    thread = threading.Thread(target=watchdog, daemon=True)
    try:
        thread.start()
        result = CliRunner().invoke(main, argv)
    except KeyboardInterrupt:
        result = None
    finally:
        done.set()
        thread.join()
    if hung.is_set():
        return "hang", f"over {limit_s:g} s"
    return _verdict(result, argv, workdir, before, outputs)


def _verdict(result, argv, workdir, before, outputs) -> tuple[str, str]:
    err = result.stderr
    last = err.strip().splitlines()[-1] if err.strip() else ""
    after = snapshot(workdir)
    changed = [p for p, digest in before.items() if p not in outputs and after.get(p) != digest]
    if changed:
        return "changed", ", ".join(sorted(changed))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return "traceback", f"{type(result.exception).__name__}: {result.exception}"
    if "Traceback" in err and "--debug" not in argv:
        return "traceback", last
    if "internal error" in err:
        return "internal", next(line for line in err.splitlines() if "internal error" in line)
    new = [p for p in after if p not in before and p not in outputs]
    if new:
        return "leftover", ", ".join(sorted(new))
    written = [p for p in outputs if after.get(p) != before.get(p)]
    if result.exit_code == 2 and written:
        return "half-written", f"exit 2 but wrote {', '.join(sorted(written))}"
    broken = [p for p in written if p in after and not _parses(p, outputs[p])]
    if broken:
        return "half-written", ", ".join(sorted(broken))
    if report_format(argv) and result.stdout.strip() and "--help" not in argv and "-h" not in argv:
        try:
            json.loads(result.stdout)
        except ValueError:
            return "half-written", f"{report_format(argv)} report on stdout does not parse"
    if result.exit_code in (0, 1):
        return "ok", ""
    if result.exit_code != 2:
        return f"exit {result.exit_code}", last
    if not last.startswith("precisionaudit: error:") or len(last) > 2000:
        return "unclear", last[:200]
    return "error", last


class Tally:
    """Verdicts per family of cases (cli, documents, models, onnx), and the defects' details."""

    def __init__(self):
        self.counts = collections.Counter()
        self.defects: list[str] = []

    def add(self, family: str, verdict: str, what: str = "", detail: str = ""):
        self.counts[family, verdict] += 1
        if verdict not in OK:
            self.defects.append(f"{family}: {what}: {verdict}: {detail[:300]}")

    def families(self) -> list[str]:
        return sorted({f for f, _ in self.counts})

    def cases(self, family=None) -> int:
        return sum(n for (f, _), n in self.counts.items() if family in (None, f))

    def defect_count(self, kind: str, family=None) -> int:
        return sum(n for (f, v), n in self.counts.items()
                   if family in (None, f) and v.split()[0] == kind)

    def summary(self) -> str:
        """One line: cases, then each defect kind the issue names with its count."""
        kinds = ["traceback", "internal", "hang", "changed", "half-written"]
        others = sum(self.defect_count(k) for k in DEFECTS if k not in kinds)
        return (f"fuzz: {self.cases()} cases ({', '.join(f'{self.cases(f)} {f}' for f in self.families())}): "
                + ", ".join(f"{self.defect_count(k)} {DEFECTS[k]}" for k in kinds)
                + f", {others} other defects")

    def table(self) -> str:
        kinds = list(DEFECTS)
        head = f"{'family':<10}{'cases':>7}{'ok':>6}{'error':>7}" + "".join(f"{k:>14}" for k in kinds)
        rows = [head]
        for family in [*self.families(), None]:
            rows.append(f"{family or 'all':<10}{self.cases(family):>7}"
                        f"{sum(n for (f, v), n in self.counts.items() if family in (None, f) and v == 'ok'):>6}"
                        f"{sum(n for (f, v), n in self.counts.items() if family in (None, f) and v == 'error'):>7}"
                        + "".join(f"{self.defect_count(k, family):>14}" for k in kinds))
        return "\n".join(rows)


#: every verdict of this test run's fuzz cases
TALLY = Tally()
