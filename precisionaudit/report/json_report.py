"""The JSON report of DESIGN.md (more keys may be added, none removed)."""
from .. import __version__
from ..core.findings import summary
from .strict_json import dumps


def report(results, findings, target) -> dict:
    return {"tool": "precisionaudit", "version": __version__, "target": target.as_dict(),
            "models": [r.to_json() for r in results],
            "findings": [f.to_json() for f in findings],
            "summary": summary(findings)}


def render(results, findings, target) -> str:
    return dumps(report(results, findings, target))
