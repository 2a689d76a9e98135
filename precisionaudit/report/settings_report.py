"""``scan --show-settings``: which settings file applies to which files, and what it sets."""
from __future__ import annotations

import json


def render_settings(groups) -> str:
    """``groups``: (FileSettings, files) pairs as ``SettingsResolver.groups`` gives them."""
    lines = []
    for settings, files in groups:
        entry = settings.as_json(files)
        lines.append(f"settings: {entry['config'] or '(defaults: no settings file)'}")
        lines.append("  files: " + " ".join(entry["files"]))
        lines.append("  target: " + ", ".join(f"{k} {v}" for k, v in entry["target"].items()))
        lines.append(f"  fail-on: {entry['fail_on']}")
        lines.append("  rules: " + " ".join(entry["rules"]))
        for key in ("per_file_ignores", "severity", "suppress", "baseline", "rule_packs", "pythonpath"):
            if entry[key]:
                value = entry[key] if isinstance(entry[key], str) else json.dumps(entry[key])
                lines.append(f"  {key.replace('_', '-')}: {value}")
    return "\n".join(lines) + "\n"
