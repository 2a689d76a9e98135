"""Reporters turn findings into text for people or machines; only the HTML report also draws
the captured graph (its module tree)."""
from . import github, html, json_report, sarif, text

FORMATTERS = {"text": text.render, "json": json_report.render, "sarif": sarif.render,
              "github": github.render, "html": html.render_scan}
