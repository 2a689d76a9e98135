"""Reporters turn findings into text for people or machines; only the HTML report also draws
the captured graph (its module tree)."""
from . import github, json_report, sarif, text


def _html(*args, **kwargs):
    """The HTML report, imported when asked for (it reads core.numerics, hence numpy, which a
    pre-commit hook over training scripts otherwise never imports)."""
    from .html import render_scan

    return render_scan(*args, **kwargs)


FORMATTERS = {"text": text.render, "json": json_report.render, "sarif": sarif.render,
              "github": github.render, "html": _html}
