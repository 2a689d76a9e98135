"""The watch log: one JSON-lines event file per rank, written as the job runs, and read back
(ranks merged) into the report ``precisionaudit watch DIR`` shows.

One module owns the format, as plan/file.py owns the plan's: the monitor writes with
``EventLog``, the command reads with ``read_log`` and ``summarize``. It imports neither torch
nor anything above ``core``: reading a log needs no model and no GPU.

Each line is appended and flushed as it happens, so a job that is killed keeps every event
written before it died; a last line cut off mid-write is left out when the log is read.
Non-finite numbers are written as the strings "nan", "inf" and "-inf" (JSON has none).
Event kinds (docs/watch.md): start, sample, skip, trigger, close.
"""
from __future__ import annotations

import glob
import json
import math
import os
import re
import time

from ..core.errors import UsageError
from ..core.strict_json import finite

FORMAT = "precisionaudit.watch"
FORMAT_VERSION = 1
EVENTS_GLOB = "events-rank*.jsonl"
SUMMARY = "summary.json"
_RANK = re.compile(r"events-rank(\d+)\.jsonl$")


class WatchLogError(UsageError):
    """A log directory that cannot be written (at ``watch(...)``) or read (``watch DIR``)."""


def events_file(log_dir: str, rank: int) -> str:
    return os.path.join(log_dir, f"events-rank{rank}.jsonl")


def number(value):
    """A number read back from the log: "nan"/"inf"/"-inf" as floats, None stays None."""
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return value


class EventLog:
    """Appends one rank's events to ``events-rank{rank}.jsonl`` in ``log_dir``; the directory
    is made and the file opened here, so that a log that cannot be written is said at once."""

    def __init__(self, log_dir: str, rank: int):
        self.path = events_file(log_dir, rank)
        try:
            os.makedirs(log_dir, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise WatchLogError(f"precisionaudit.watch: cannot write the log in {log_dir!r}: "
                                f"{exc.strerror or exc}") from None

    def write(self, kind: str, **fields) -> None:
        line = json.dumps(finite({"event": kind, "time": round(time.time(), 3), **fields}),
                          separators=(",", ":"))
        self._fh.write(line + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


# --------------------------------------------------------------------------- reading
def read_log(log_dir: str) -> dict:
    """{rank: [event, ...]} of a watch log directory; a missing or foreign directory is a
    WatchLogError with one line. A line cut off by a killed job is left out."""
    if not os.path.isdir(log_dir):
        what = "not a directory" if os.path.exists(log_dir) else "no such directory"
        raise WatchLogError(f"{log_dir}: {what}")
    files = sorted(glob.glob(os.path.join(glob.escape(log_dir), EVENTS_GLOB)))
    if not files:
        raise WatchLogError(f"{log_dir}: not a precisionaudit.watch log (no {EVENTS_GLOB} files)")
    ranks = {}
    for path in files:
        match = _RANK.search(os.path.basename(path))
        if match:
            ranks[int(match.group(1))] = _events(path)
    return ranks


def _events(path: str) -> list:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise WatchLogError(f"{path}: cannot read: {exc.strerror}") from None
    events = []
    for number_, line in enumerate(lines, 1):
        try:
            event = json.loads(line)
        except ValueError:
            if number_ == len(lines):
                break  # the last line of a job killed mid-write
            raise WatchLogError(f"{path}:{number_}: not a watch event (not JSON)") from None
        if not isinstance(event, dict) or "event" not in event:
            raise WatchLogError(f"{path}:{number_}: not a watch event")
        events.append(event)
    if not events or events[0].get("event") != "start" or events[0].get("format") != FORMAT:
        raise WatchLogError(f"{path}: not a precisionaudit.watch log (no start event)")
    if events[0].get("version") != FORMAT_VERSION:
        raise WatchLogError(f"{path}: watch log version {events[0].get('version')!r} "
                            f"(this precisionaudit reads version {FORMAT_VERSION})")
    return events


def summarize(ranks: dict) -> dict:
    """The report of a log (docs/watch.md) without its findings: steps, ranks, the first
    non-finite op, the scaler, the modules' and parameters' sampled statistics, the ranks'
    exchanges. Ranks are merged: each rank's own events say what it saw."""
    starts = {rank: events[0] for rank, events in ranks.items()}
    first_start = starts[min(starts)]
    every_event = [e for events in ranks.values() for e in events]
    closes = [e for e in every_event if e["event"] == "close"]
    steps = max([e["steps"] for e in closes] + [e["step"] + 1 for e in every_event if "step" in e] + [0])
    run = {k: first_start.get(k) for k in ("mode", "device", "optimizer", "model", "wrapper", "every",
                                           "storage_dtype")}
    run["dtype"] = next((e["dtype"] for e in every_event if e.get("dtype")), None)
    integration = next((e for e in reversed(every_event) if e["event"] == "integration"), None)
    report = {
        "steps": steps,
        "world_size": max(s.get("world_size", 1) for s in starts.values()),
        "ranks_logged": sorted(ranks),
        "complete": len(closes) == len(ranks),
        "run": run,
        "first_nonfinite": _first_nonfinite(ranks),
        "scaler": _scaler(ranks, first_start, closes),
        "loss": _loss(ranks),
        "modules": _modules(ranks),
        "parameters": _parameters(ranks, first_start),
        "module_types": first_start.get("module_types", {}),
        "parameter_numels": {name: p.get("numel") for name, p in first_start.get("parameters", {}).items()},
        "integration": {k: v for k, v in integration.items() if k not in ("event", "time")} if integration else None,
        "triggers": [_trigger_summary(e) for e in ranks[min(ranks)] if e["event"] == "trigger"],
        "exchanges": [{"step": e["step"], "event": e["event"], "ranks": e["ranks"]}
                      for e in ranks[min(ranks)] if e["event"] in ("sample", "trigger") and e.get("ranks")],
    }
    return report


def _first_nonfinite(ranks: dict):
    """The earliest failing op any rank's replay found: by step, then forward before
    backward, then rank."""
    order = {"input": 0, "forward": 1, "loss": 2, "backward": 3}
    found = []
    for events in ranks.values():
        for e in events:
            if e["event"] == "trigger":
                for result in e.get("replays") or []:
                    if result and result.get("first"):
                        found.append({**result["first"], "step": e["step"], "rank": result["rank"],
                                      "region": result.get("region"), "masked": result.get("masked"),
                                      "micro_batch": result.get("micro_batch"),
                                      "micro_batches": result.get("micro_batches")})
    if not found:
        return None
    found.sort(key=lambda f: (f["step"], order.get(f.get("phase"), 9), f["rank"]))
    return found[0]


def _scaler(ranks: dict, start: dict, closes: list):
    if not start.get("scaler"):
        return None
    events = ranks[min(ranks)]
    skipped = sorted({e["step"] for e in events if e["event"] == "skip"})
    streak = longest = 0
    previous = None
    for step in skipped:
        streak = streak + 1 if previous is not None and step == previous + 1 else 1
        longest, previous = max(longest, streak), step
    scales = [number(e["scale"]) for e in events if e.get("scale") is not None]
    final = next((number(e["final_scale"]) for e in closes if e.get("final_scale") is not None), None)
    modules = []
    for e in events:
        for name in e.get("nonfinite_modules") or ():
            if name not in modules:
                modules.append(name)
    return {"skipped_steps": len(skipped), "final_scale": final if final is not None else (scales[-1] if scales
                                                                                           else None),
            "longest_skip_streak": longest, "skip_modules": modules, "skipped": skipped[:1000],
            "init_scale": start["scaler"].get("init_scale"), "kind": start["scaler"].get("kind"),
            "min_scale": min(scales) if scales else None}


def _loss(ranks: dict) -> dict:
    """Per rank: the steps whose loss was not finite, and the last loss logged."""
    out = {}
    for rank, events in ranks.items():
        series = [(s, v) for s, v in _loss_series(events) if v is not None]  # None: no loss given
        bad = [s for s, v in series if not math.isfinite(v)]
        out[str(rank)] = {"nonfinite_steps": bad[:1000], "nonfinite_count": len(bad),
                          "last": series[-1][1] if series else None, "logged": len(series)}
    return out


def _loss_series(events: list) -> list:
    """[(step, loss)] of every step a rank logged (sample, trigger and close events carry the
    losses of the steps since the previous one)."""
    series = []
    for e in events:
        losses = e.get("losses")
        if losses:
            series += [(losses["first_step"] + i, number(v)) for i, v in enumerate(losses["values"])]
    return series


def _trigger_summary(e: dict) -> dict:
    replays = [r for r in e.get("replays") or [] if r]
    return {"step": e["step"], "why": e["why"], "replayed": bool(replays),
            "ranks": [r["rank"] for r in replays if r.get("first")],
            "errors": [r["error"] for r in replays if r.get("error")]}


def samples(ranks: dict) -> list:
    """Rank by rank, the sampled statistics over time (the HTML's heat maps): per module and,
    per parameter (the lost-update share: every rank holds the whole parameter's, summed over
    the shards), rank 0's."""
    return [{"rank": rank, "step": e["step"], "modules": e.get("modules", {}),
             "parameters": e.get("parameters", {}) if rank == min(ranks) else {}}
            for rank, events in sorted(ranks.items()) for e in events if e["event"] == "sample"]


#: statistics where the largest value any sample of any rank saw is the one reported
LARGEST = ("forward_absmax", "headroom", "grad_absmax")


def _modules(ranks: dict) -> dict:
    """{module: stats}: the largest forward_absmax, headroom and grad_absmax any rank saw at
    any sample (with the step and rank of the largest headroom), the other statistics as the
    last sample measured them (with its step, rank and scale)."""
    modules = {}
    for rank in sorted(ranks):
        for e in ranks[rank]:
            if e["event"] != "sample":
                continue
            for name, stats in e.get("modules", {}).items():
                row = modules.setdefault(name, {"samples": 0})
                row["samples"] += 1
                for key, value in stats.items():
                    value = number(value)
                    if key not in LARGEST:
                        row[key] = value
                    elif value is not None and (row.get(key) is None or not value <= row[key]):
                        row[key] = value
                        if key == "headroom":
                            row["headroom_step"], row["headroom_rank"] = e["step"], rank
                if "grad_underflow_share" in stats:
                    row.update(step=e["step"], rank=rank, scale=number(e.get("scale")))
    return modules


def _parameters(ranks: dict, start: dict) -> dict:
    """{parameter: stats at its last sample, with its module, step and rank}."""
    owners = start.get("parameters", {})
    parameters = {}
    for rank in sorted(ranks):
        for e in ranks[rank]:
            if e["event"] == "sample":
                for name, stats in e.get("parameters", {}).items():
                    parameters[name] = {**{k: number(v) for k, v in stats.items()}, "step": e["step"], "rank": rank,
                                        "module": owners.get(name, {}).get("module", name.rpartition(".")[0])}
    return parameters


def timeline(ranks: dict) -> dict:
    """Rank 0's per-step series for the HTML: losses, the scale where it was read, skips and
    triggers."""
    events = ranks[min(ranks)]
    series = [(s, v) for s, v in _loss_series(events) if v is not None]
    return {"loss_steps": [s for s, _ in series], "loss": [v for _, v in series],
            "scale_steps": [e["step"] for e in events if e.get("scale") is not None],
            "scale": [number(e["scale"]) for e in events if e.get("scale") is not None],
            "skipped": [e["step"] for e in events if e["event"] == "skip"],
            "triggers": [{"step": e["step"], "why": e["why"]} for e in events if e["event"] == "trigger"]}
