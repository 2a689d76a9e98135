"""The JSON report of docs/json-report.md (more keys may be added, none removed)."""
from .. import __version__
from ..core.findings import summary
from ..core.strict_json import dumps


def report(results, findings, target, settings=None) -> dict:
    """``settings``: the settings files in force and their values (an added key, see
    docs/json-report.md), one entry per settings file, naming the files it applied to."""
    document = {"tool": "precisionaudit", "version": __version__, "target": target.as_dict(),
                "models": [r.to_json() for r in results],
                "findings": [f.to_json() for f in findings],
                "summary": summary(findings)}
    if settings is not None:
        document["settings"] = settings
    return document


def render(scan) -> str:
    """The JSON report of a ``core.report.ScanReport``."""
    return dumps(report(scan.results, scan.findings, scan.target, scan.settings))
