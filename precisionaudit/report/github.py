"""GitHub Actions workflow commands: findings become annotations on the pull request's diff."""
from __future__ import annotations

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, path: str, line, title: str, message: str, column=None) -> str:
    props = [f"file={_property(path)}"]
    if line:
        props.append(f"line={line}")
        if column:
            props.append(f"col={column}")
    props.append(f"title={_property(title)}")
    return f"::{level} {','.join(props)}::{_data(message)}"


def render(scan) -> str:
    """The annotations of a ``core.report.ScanReport``."""
    return annotations(scan.results, scan.findings)


def annotations(results, findings) -> str:
    lines = [_command("error", r.path, None, "precisionaudit: model not scanned", r.error or "")
             for r in results if r.status == "error"]
    for f in findings:
        where = f"{f.module or '<root>'} · {f.op}" if f.op else (f.module or "")
        message = f"{f.message} ({where})" if where else f.message
        if "source" in f.evidence:
            message += f" at {f.evidence['source']}"
        lines.append(_command(LEVELS[f.severity], f.path, f.line, f"{f.rule} {f.name}", message, f.column))
    return "".join(line + "\n" for line in lines)
