"""The JSON report of DESIGN.md (more keys may be added, none removed)."""
import json

from .. import __version__
from ..findings import summary


def report(results, findings, target) -> dict:
    return {"tool": "precisionaudit", "version": __version__, "target": target.as_dict(),
            "models": [r.to_json() for r in results],
            "findings": [f.to_json() for f in findings],
            "summary": summary(findings)}


def render(results, findings, target) -> str:
    return json.dumps(report(results, findings, target), indent=2, default=str) + "\n"
