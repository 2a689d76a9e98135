"""Distributed-training config files, read statically: DeepSpeed JSON configs and accelerate
config YAMLs. ``read_config`` parses a file once, says whether it is one (any other JSON or
YAML in a repository is skipped) and keeps where each key is, so a finding points at the
key it is about. Which kind a file may be is its frontend's to say (frontend/training.py).

DeepSpeed reads its JSON with hjson: comments and trailing commas are read too.

Torch-free and fast: a scan calls ``read_config`` on every .json of a repository
(tokenizer.json files of 10 MB included), so it looks for a telling key in the raw text
before it parses anything.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..core.errors import UsageError
from .source import read_text

#: top-level keys no other file is likely to have (deepspeed/runtime/constants.py): they
#: claim even a file that does not parse, so that its error is reported
DEEPSPEED_ONLY_KEYS = frozenset((
    "zero_optimization", "train_micro_batch_size_per_gpu", "zero_allow_untested_optimizer",
    "communication_data_type", "zero_force_ds_cpu_optimizer", "prescale_gradients",
    "gradient_predivide_factor", "wall_clock_breakdown", "flops_profiler"))
#: top-level keys that make a parsed JSON object a DeepSpeed config
DEEPSPEED_KEYS = DEEPSPEED_ONLY_KEYS | {"train_batch_size", "steps_per_print", "activation_checkpointing"}
#: keys a DeepSpeed config shares with other files (a dump of HF TrainingArguments has
#: ``fp16: true`` and ``gradient_accumulation_steps``): they tell only as DeepSpeed's
#: sections, an object with ``enabled``
DEEPSPEED_SECTIONS = ("fp16", "bf16", "bfloat16")
#: top-level keys of an accelerate config (``accelerate config`` writes both; accelerate's
#: commands/config/config_args.py reads them)
ACCELERATE_KEYS = frozenset(("compute_environment", "distributed_type"))

_DEEPSPEED_HINT = re.compile(r'"(?:%s)"\s*:' % "|".join(sorted(DEEPSPEED_KEYS | set(DEEPSPEED_SECTIONS))))
_DEEPSPEED_STRONG = re.compile(r'"(?:%s)"\s*:' % "|".join(sorted(DEEPSPEED_ONLY_KEYS)))
_ACCELERATE_HINT = re.compile(r"^(?:%s)\s*:" % "|".join(sorted(ACCELERATE_KEYS)), re.MULTILINE)


@dataclass
class Config:
    """One parsed config: its data and where each key is."""

    path: str
    kind: str  # "deepspeed" | "accelerate"
    data: object
    #: key path (tuple of keys / list indexes) -> (line, column), 1-based
    _where: object = field(repr=False, default=None)

    def get(self, *path, default=None):
        """The value at ``path`` (``get("fp16", "enabled")``), ``default`` if absent."""
        value = self.data
        for key in path:
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
                value = value[key]
            else:
                return default
        return value

    def position(self, *path) -> tuple[int, int]:
        """(line, column) of the key ``path`` ends with; (1, 1) if it is not in the file."""
        return self._where(path) or (1, 1)


def read_config(path: str, kind: str) -> Config | None:
    """``path`` read as a ``kind`` config ("deepspeed": JSON, "accelerate": YAML), parsed
    once; None when the file is not one (any other JSON or YAML of a repository). The one
    place that decides whether a file is a config of ours.

    A DeepSpeed config has a top-level key only DeepSpeed reads (``zero_optimization``,
    ``train_micro_batch_size_per_gpu``...) or an ``fp16``/``bf16`` section with ``enabled``;
    an accelerate config has ``compute_environment`` or ``distributed_type``. A file that
    does not parse is claimed when it names a key only DeepSpeed has
    (``DEEPSPEED_ONLY_KEYS``: not ``fp16`` or ``train_batch_size``) or an accelerate key, and
    is then a UsageError ``path:line:col: ...`` (one line, exit 2), never a traceback.
    """
    hint, strong, read = {"deepspeed": (_DEEPSPEED_HINT, _DEEPSPEED_STRONG, _read_json),
                          "accelerate": (_ACCELERATE_HINT, _ACCELERATE_HINT, _read_yaml)}[kind]
    try:
        text = read_text(path, "utf-8-sig")
    except UsageError:
        return None  # not text: no config of ours
    if not hint.search(text):
        return None
    try:
        config = read(path, text)
    except UsageError:  # broken: ours to report only if a key no other file has says so
        if strong.search(text):
            raise
        return None
    return config if _is_kind(kind, config.data) else None


def _is_kind(kind: str, data) -> bool:
    if not isinstance(data, dict):
        return False
    if kind == "accelerate":
        return any(k in data for k in ACCELERATE_KEYS)
    return any(k in data for k in DEEPSPEED_KEYS) or any(
        isinstance(data.get(k), dict) and "enabled" in data[k] for k in DEEPSPEED_SECTIONS)


# --- JSON (DeepSpeed) ---------------------------------------------------------------------

def _parse_json(path: str, text: str, pairs_hook=None):
    """(data, the text the data was read from). DeepSpeed reads its config with hjson,
    whose most used extensions over JSON are comments and trailing commas: a text that is
    not JSON is read again with those blanked out (same length, same line breaks, so every
    position stays where it was). Anything else hjson allows (unquoted keys or strings)
    is bad input here, reported where strict JSON stopped."""
    try:
        return json.loads(text, object_pairs_hook=pairs_hook), text
    except json.JSONDecodeError as exc:
        error = UsageError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}")
    except RecursionError:
        raise UsageError(f"{path}: invalid JSON: nested too deeply") from None
    blanked = _blank_comments(text)
    if blanked == text:
        raise error
    try:
        return json.loads(blanked, object_pairs_hook=pairs_hook), blanked
    except (json.JSONDecodeError, RecursionError):
        raise error from None


_COMMENT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|//[^\n]*|#[^\n]*|/\*.*?\*/', re.DOTALL)
_TRAILING_COMMA = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|,(?=\s*[}\]])', re.DOTALL)


def _blank_comments(text: str) -> str:
    """``text`` with hjson's comments and trailing commas turned into blanks (strings are
    left alone: a ``#`` or ``//`` inside one is text)."""
    def blank(match):
        token = match.group()
        return token if token[0] == '"' else re.sub(r"[^\n]", " ", token)

    return _TRAILING_COMMA.sub(blank, _COMMENT.sub(blank, text))


def _read_json(path: str, text: str) -> Config:
    from .json_keys import first_repeated_key, key_offset, line_column

    duplicated = []

    def as_dict(pairs):
        data = dict(pairs)
        if len(data) != len(pairs):
            duplicated.append(True)
        return data

    data, text = _parse_json(path, text, as_dict)
    if duplicated and _is_kind("deepspeed", data):
        # DeepSpeed loads its config with dict_raise_error_on_duplicate_keys
        # (deepspeed/runtime/config_utils.py): such a file never starts a job
        key, offset = first_repeated_key(text)
        line, column = line_column(text, offset)
        raise UsageError(f"{path}:{line}:{column}: duplicate key {key!r} (DeepSpeed refuses a config "
                         "with duplicate keys)")

    def where(key_path):
        offset = key_offset(text, key_path)  # found when asked: most configs have no finding
        return None if offset is None else line_column(text, offset)

    return Config(path, "deepspeed", data, where)


# --- YAML (accelerate) --------------------------------------------------------------------

def _compose_yaml(path: str, text: str):
    """(data, root node): the node tree keeps each key's mark (line, column)."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = (exc.problem or exc.context or "cannot parse").strip()
        raise UsageError(f"{path}{where}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise UsageError(f"{path}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return data, node


def _read_yaml(path: str, text: str) -> Config:
    data, node = _compose_yaml(path, text)

    def where(key_path):
        current = node
        mark = None
        for key in key_path:
            found = None
            if current is not None and current.id == "mapping":
                for key_node, value_node in current.value:  # the last of repeated keys wins
                    if getattr(key_node, "value", None) == key:
                        found = key_node, value_node
            elif current is not None and current.id == "sequence" and isinstance(key, int) \
                    and 0 <= key < len(current.value):
                found = current.value[key], current.value[key]
            if found is None:
                return None
            mark, current = found[0].start_mark, found[1]
        return (mark.line + 1, mark.column + 1) if mark else None

    return Config(path, "accelerate", data, where)
