"""Project settings: ``[tool.precisionaudit]`` in pyproject.toml, or a precisionaudit.toml.

Found like ruff finds its settings: the nearest directory, from each scanned file's
directory upward (``resolve.SettingsResolver``), holding a precisionaudit.toml (keys at top
level) or a pyproject.toml with a ``[tool.precisionaudit]`` table. Relative paths in the file (``baseline``, the patterns of
``per-file-ignores`` and ``suppress``) are relative to the file's directory. Settings are
checked strictly: a typo must not silently turn a gate off.
"""
from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass, field

from ..core.documents import reading, require_regular_file
from ..core.errors import UsageError
from ..core.findings import SEVERITIES, code_covers
from ..core.schema import schema_error
from ..core.target import DEVICES, FP8_RECIPES, MODES, TARGET_DTYPES

PYPROJECT, OWN_FILE = "pyproject.toml", "precisionaudit.toml"
#: where training scripts' findings are cached, below the settings file's directory (or the
#: working directory when there is none), unless ``cache-dir`` says otherwise
DEFAULT_CACHE_DIR = ".precisionaudit_cache"
SUPPRESS_MATCHERS = ("path", "module", "node", "op")


@dataclass
class Config:
    path: str | None = None  # the file the settings came from; None: built-in defaults
    root: str = "."  # the directory relative paths in the file are resolved against
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    fail_on: str | None = None
    dtype: str | None = None
    recipe: str | None = None  # the FP8 recipe of dtype = "float8"
    mode: str | None = None
    device: str | None = None
    baseline: str | None = None
    severity: dict[str, str] = field(default_factory=dict)
    suppress: list[dict] = field(default_factory=list)
    rule_packs: list[str] = field(default_factory=list)  # rule pack directories (absolute)
    pack_ids: list[str] = field(default_factory=list)  # the rule ids those packs add
    cache_dir: str | bool | None = None  # cache-dir: a directory (absolute), False (no cache), None (default)
    pythonpath: list[str] = field(default_factory=list)  # directories model imports search (absolute)

    @property
    def cache_directory(self) -> str | None:
        """Where the training findings cache lives; None when ``cache-dir = false``."""
        if self.cache_dir is False:
            return None
        if isinstance(self.cache_dir, str):
            return self.cache_dir
        return os.path.join(self.root if self.path else os.getcwd(), DEFAULT_CACHE_DIR)

    def ignored_for(self, path: str) -> list[str]:
        """Rule codes that ``per-file-ignores`` switches off for ``path``."""
        return [code for pattern, codes in self.per_file_ignores.items()
                if path_matches(pattern, path, self.root) for code in codes]


def path_matches(pattern: str, path: str, root: str) -> bool:
    """A pattern with a / is a glob over the path relative to ``root`` (``*`` crosses
    directories; ``"models/"`` is everything below models); one without, over the file name
    (``"test_*.py"``), as in ruff's per-file-ignores."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root)).replace(os.sep, "/")
    if "/" in pattern:
        pattern = pattern.removeprefix("./")
        return fnmatch.fnmatchcase(rel, pattern + "*" if pattern.endswith("/") else pattern)
    return fnmatch.fnmatchcase(os.path.basename(path), pattern)


def find_config(start: str | None = None) -> tuple[str, dict, str] | None:
    """(file, settings table, key prefix for messages) of the nearest config, or None."""
    directory = os.path.abspath(start or os.getcwd())
    while True:
        own = os.path.join(directory, OWN_FILE)
        if os.path.isfile(own):
            return own, _read(own), ""
        pyproject = os.path.join(directory, PYPROJECT)
        if os.path.isfile(pyproject):
            tool = _read(pyproject).get("tool")
            table = tool.get("precisionaudit") if isinstance(tool, dict) else None
            if table is not None:
                return pyproject, table, "tool.precisionaudit."
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as fh, reading(_display(path), "config"):
            return tomllib.load(fh)
    except OSError as exc:
        raise UsageError(f"{_display(path)}: cannot read config: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{_display(path)}: invalid TOML: {exc}") from exc


def _display(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def load_config(config_file: str | None = None, isolated: bool = False,
                known_ids=(), start: str | None = None) -> Config:
    """The settings in force: ``config_file`` if given, else the nearest config, else defaults.

    ``known_ids`` are the catalog's rule ids, against which every rule code is checked.
    """
    if isolated and config_file:
        raise UsageError("--config and --isolated exclude each other")
    if isolated:
        return Config()
    if config_file:
        require_regular_file(config_file, "config", missing="no such config file")
        data = _read(config_file)
        if os.path.basename(config_file) == PYPROJECT:
            if not isinstance(data.get("tool"), dict) or "precisionaudit" not in data["tool"]:
                raise UsageError(f"{_display(config_file)}: no [tool.precisionaudit] table")
            found = config_file, data["tool"]["precisionaudit"], "tool.precisionaudit."
        else:
            found = config_file, data, ""
    else:
        found = find_config(start)
        if found is None:
            return Config()
    return _parse(*found, known_ids=set(known_ids))


def _enum(values) -> dict:
    return {"type": "string", "enum": list(values), "x-message": {
        "type": "expected a string, got {got}",
        "enum": f"unknown value {{value!r}}; expected one of {', '.join(values)}"}}


_STRING = {"type": "string", "x-message": "expected a string, got {got}"}
_CODES = {"type": ["string", "array"], "x-message": "expected a list of rule ids, got {got}",
          "items": {"type": "string", "x-message": "expected a rule id, got {value!r}"}}


def _table(values: dict) -> dict:
    return {"type": "object", "x-message": "expected a table, got {got}", "additionalProperties": values}


#: the settings' shape; rule codes (checked against the catalog) and paths are checked in code
SCHEMA = {
    "type": "object", "additionalProperties": False,
    "x-message": {"type": "expected a table, got {got}", "additionalProperties": "unknown key"},
    "properties": {
        "select": _CODES, "ignore": _CODES, "extend-select": _CODES,
        "per-file-ignores": _table(_CODES),
        "severity": _table(_enum(SEVERITIES)),
        "suppress": {"type": "array", "x-message": "expected an array of tables ([[tool.precisionaudit.suppress]])",
                     "items": {
                         "type": "object", "additionalProperties": False, "required": ["rule"],
                         "anyOf": [{"required": [m]} for m in SUPPRESS_MATCHERS],
                         "x-message": {"type": "expected a table, got {got}", "additionalProperties": "unknown key",
                                       "required": "missing: name the rule ids it suppresses",
                                       "anyOf": f"needs at least one of {', '.join(SUPPRESS_MATCHERS)}"},
                         "properties": {"rule": _CODES, "reason": _STRING,
                                        **{m: _STRING for m in SUPPRESS_MATCHERS}}}},
        "fail-on": _enum(SEVERITIES), "dtype": _enum(TARGET_DTYPES),
        "recipe": _enum(FP8_RECIPES), "mode": _enum(MODES), "device": _enum(DEVICES),
        "baseline": _STRING,
        "cache-dir": {"type": ["string", "boolean"], "x-message": "expected a directory or false, got {got}"},
        "rule-packs": {"type": "array", "x-message": "expected a list of directories, got {got}",
                       "items": _STRING},
        "pythonpath": {"type": "array", "x-message": "expected a list of directories, got {got}",
                       "items": _STRING},
    },
}


class _Checker:
    """Rule-code checks (against the catalog) that name the file and the dotted key."""

    def __init__(self, path: str, prefix: str, known_ids: set):
        self.path, self.prefix, self.known = path, prefix, known_ids

    def fail(self, key: str, message: str):
        raise UsageError(f"{_display(self.path)}: {(self.prefix + key).rstrip('.')}: {message}")

    def codes(self, key, value) -> list[str]:
        return [self.code(key, code) for code in ([value] if isinstance(value, str) else value)]

    def code(self, key, code, exact=False) -> str:
        upper = code.upper()
        if not upper.strip():  # "" is a prefix of every id: it would select them all
            self.fail(key, f"expected a rule id, got {code!r}")
        if exact and upper not in self.known:
            self.fail(key, f"unknown rule id {code!r}")
        if not exact and not any(code_covers(upper, i) for i in self.known):
            self.fail(key, f"unknown rule id or prefix {code!r}")
        return upper


def _parse(path: str, data: dict, prefix: str, known_ids: set) -> Config:
    check = _Checker(path, prefix, known_ids)
    if not prefix and "tool" in data:
        check.fail("tool", f"unknown key ({OWN_FILE} takes the keys at top level, "
                           "without [tool.precisionaudit])")
    error = schema_error(data, SCHEMA)
    if error is not None:
        check.fail(*error)
    config = Config(path=path, root=os.path.dirname(os.path.abspath(path)))
    if "rule-packs" in data:  # first: codes below may name the packs' rules
        config.rule_packs, config.pack_ids = _rule_packs(check, config.root, data["rule-packs"])
        check.known = set(check.known) | set(config.pack_ids)
    for key, value in data.items():
        if key in ("select", "ignore", "extend-select"):
            setattr(config, key.replace("-", "_"), check.codes(key, value))
        elif key == "per-file-ignores":
            config.per_file_ignores = {pattern: check.codes(f"{key}.{pattern!r}", codes)
                                       for pattern, codes in value.items()}
        elif key == "severity":
            config.severity = {check.code(f"{key}.{rule}", rule, exact=True): level
                               for rule, level in value.items()}
        elif key == "suppress":
            config.suppress = [dict(entry, rule=check.codes(f"suppress[{i}].rule", entry["rule"]))
                               for i, entry in enumerate(value)]
        elif key in ("fail-on", "dtype", "recipe", "mode", "device"):
            setattr(config, key.replace("-", "_"), value)
        elif key == "baseline":
            config.baseline = os.path.join(config.root, value)
        elif key == "cache-dir":
            if value is True:
                check.fail(key, "expected a directory or false, got true")
            config.cache_dir = os.path.join(config.root, value) if isinstance(value, str) else False
        elif key == "pythonpath":
            config.pythonpath = _directories(check, config.root, key, value)
    if config.recipe and config.dtype != "float8":
        check.fail("recipe", 'an FP8 recipe needs dtype = "float8" in the same file')
    return config


def _directories(check: _Checker, root: str, key: str, value) -> list[str]:
    """The directories ``key`` names, resolved against the config's directory; each must exist."""
    found = [os.path.normpath(os.path.join(root, v)) for v in value]
    for i, directory in enumerate(found):
        if not os.path.isdir(directory):
            check.fail(f"{key}[{i}]", f"no such directory: {directory}")
    return found


def _rule_packs(check: _Checker, root: str, value) -> tuple[list[str], list[str]]:
    """(the directories ``rule-packs`` names, resolved against the config's directory, and
    the rule ids they add)."""
    from ..rules.engine import rule_ids

    packs = _directories(check, root, "rule-packs", value)
    added = sorted(set(rule_ids(packs=packs)) - set(rule_ids()))
    return packs, added


def expand_codes(codes, known_ids) -> set[str]:
    """The rule ids that ids/prefixes/ALL in ``codes`` stand for."""
    return {i for i in known_ids for c in codes if code_covers(c, i)}


def selected_ids(known_ids, config: Config, select=(), extend_select=(), ignore=()) -> set[str]:
    """Rule ids to run: the file's select/extend-select/ignore, then the command line's on top
    (a command-line --select starts over from its own list, as in ruff)."""
    known = list(known_ids)
    for code in (*select, *extend_select, *ignore):
        if not any(code_covers(code, i) for i in known):
            raise UsageError(f"unknown rule id or prefix: {code}")
    chosen = set(known)
    for sel, extend, ign in ((config.select, config.extend_select, config.ignore),
                             (list(select) or None, extend_select, ignore)):
        if sel is not None:
            chosen = expand_codes(sel, known)
        chosen |= expand_codes(extend, known)
        chosen -= expand_codes(ign, known)
    return chosen
