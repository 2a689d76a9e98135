"""Reporters turn findings into text for people or machines; they never look at graphs."""
from . import json_report, text

FORMATTERS = {"text": text.render, "json": json_report.render}
