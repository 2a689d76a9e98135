"""Hypothesis strategies for the fuzz suite of issue 11, and how each case is run.

Three families, each a strategy of cases and a ``run_*`` that builds the case's files in a
scratch folder and judges it (tests/fuzzing.py):

- ``cli``: command lines put together from every command's options with odd values
  (paths that are inputs, folders, FIFOs, devices, missing folders; nan, -1, 2**80,
  huge shapes, empty strings);
- ``documents``: settings, plans and baselines whose contents are generated (any shape
  of data, not UTF-8, nested deep), read by the command that reads them;
- ``models``: Python model files generated from a small grammar of layers, with model code
  that misbehaves where it runs (exits, raises, prints, loops, returns the wrong thing).

Used by tests/test_fuzz.py (a budget of examples in every test run) and bench/fuzz.py.
"""
from __future__ import annotations

import json
import os
import shutil
import string
import tempfile

import yaml
from fuzzing import judge, report_format
from hypothesis import strategies as st

from precisionaudit.plan.file import SCHEMA as PLAN_SCHEMA

#: examples of each family in every test run (tests/test_fuzz.py) and bench/fuzz.py's default
BUDGET = {"cli": 100, "documents": 40, "models": 60}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = """import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.softmax(self.lin(x), -1).float()


def get_model():
    return M()


def get_example_inputs():
    return (torch.randn(2, 8),)
"""
PLAN = "version: 1\ntarget: {dtype: float16, mode: autocast}\noverrides:\n- {module: lin, dtype: float32}\n"
CONFIG = 'select = ["PA1"]\n'


def _fixture(folder: str):
    """The files every case may name: a model, an ONNX model, a plan, a settings file, a FIFO."""
    import sys

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import pathlib

    from onnx_graphs import exp_softmax_by_hand

    with open(os.path.join(folder, "m.py"), "w") as fh:
        fh.write(MODEL)
    exp_softmax_by_hand(pathlib.Path(folder), "g.onnx")
    with open(os.path.join(folder, "plan.yaml"), "w") as fh:
        fh.write(PLAN)
    with open(os.path.join(folder, "cfg.toml"), "w") as fh:
        fh.write(CONFIG)
    with open(os.path.join(folder, "base.json"), "w") as fh:
        fh.write(json.dumps({"tool": "precisionaudit", "baseline": 1, "findings": [{"fingerprint": "0"}]}))
    os.mkfifo(os.path.join(folder, "pipe"))
    os.mkdir(os.path.join(folder, "sub"))


class Scratch:
    """A fresh folder with the fixture files, removed afterwards."""

    def __enter__(self) -> str:
        self.folder = tempfile.mkdtemp(prefix="pa-fuzz-")
        _fixture(self.folder)
        return self.folder

    def __exit__(self, *exc):
        shutil.rmtree(self.folder, ignore_errors=True)


# --------------------------------------------------------------------------- cli
#: {placeholder}s are files of the scratch folder; out.* are where outputs may go
PATHS = ["{m.py}", "{g.onnx}", "{plan.yaml}", "{cfg.toml}", "{base.json}", "{pipe}", "{sub}", "{.}",
         "{missing.py}", "{sub/missing/out.yaml}", "/dev/null", "/dev/zero", "", "-"]
OUT_PATHS = ["{out.yaml}", "{out.onnx}", "{out.json}", "{out.txt}", "{m.py}", "{g.onnx}", "{plan.yaml}",
             "{base.json}", "{pipe}", "{sub}", "{sub/missing/out.yaml}", "/dev/null", "-", ""]
NUMBERS = ["0", "-1", "nan", "inf", "-inf", "1e309", "1e-300", str(2**80), "2**80", "x", ""]
SHAPES = ["x=", "=3", "x=0x16", "x=-1x16", "x=1000000000x4", "x=2x16x", "x=2,16", "nope=1", "x=99999999999999999999"]
WORDS = ["make", "", "M", "__import__", "os.system", "PA999", ",", "é", "x" * 300]
#: option: (values that make sense, odd values); the odd ones are drawn as often as the others
OPTIONS = {
    "--format": (["text", "json", "sarif", "github", "html"], ["xml", ""]),
    "-o": (["{out.yaml}", "{out.onnx}", "{out.json}", "{out.txt}", "-"], OUT_PATHS),
    "--output-file": (["{out.json}", "{out.txt}"], OUT_PATHS),
    "--write-baseline": (["{out.json}"], OUT_PATHS),
    "--baseline": (["{base.json}"], PATHS), "--config": (["{cfg.toml}"], PATHS), "--plan": (["{plan.yaml}"], PATHS),
    "--fail-on": (["error", "warning", "info"], ["none"]),
    "--min-severity": (["error", "warning", "info"], ["x"]),
    "--color": (["auto", "always", "never"], ["yes"]),
    "--select": (["PA1", "PA101,PA2", "ALL"], WORDS), "--extend-select": (["PA2"], WORDS),
    "--ignore": (["PA101", "pa2"], WORDS),
    "--dtype": (["float16", "bfloat16"], ["float32", "int8"]), "--mode": (["autocast", "pure"], ["x"]),
    "--device": (["cuda", "cpu", "auto", "cpu-emulated"], ["tpu"]),
    "--entry": (["get_model"], WORDS), "--inputs": (["get_example_inputs"], WORDS),
    "--timeout": (["30", "0.5"], NUMBERS), "--atol": (["0.01", "0"], NUMBERS), "--rtol": (["0.1"], NUMBERS),
    "--cosine": (["0.99", "1"], NUMBERS), "--seed": (["0", "7"], NUMBERS),
    "--input-shape": (["x=2x16", "x=32x16"], SHAPES),
    "--weights": (["{sub}"], [*PATHS, "{m.py}"]), "--data": (["example"], ["get_model", "nope", *PATHS]),
    "--batches": (["1", "2"], ["0", "-1", str(2**80), "x"]), "--headroom": (["2", "1"], NUMBERS),
    "--html": (["{out.html}"], OUT_PATHS),
}
VALUES = ["--weights", "--data", "--batches", "--headroom"]
FLAGS = ["--exit-zero", "--statistics", "--show-settings", "--isolated", "--skip-non-models", "--grad",
         "--prune", "--keep-io-types", "--debug", "--no-such-flag", "--help"]
COMMANDS = {  # command: (its positional paths, the options it takes)
    "scan": (["{m.py}", "{g.onnx}", "{.}"], ["--format", "-o", "--output-file", "--write-baseline", "--baseline",
                                            "--config", "--fail-on", "--color", "--select", "--extend-select",
                                            "--ignore", "--dtype", "--mode", "--device", "--entry", "--inputs",
                                            "--timeout", *VALUES]),
    "plan": (["{m.py}", "{g.onnx}"], ["-o", "--min-severity", "--config", "--input-shape", "--seed", "--dtype",
                                     "--mode", "--device", "--entry", "--inputs", "--timeout", *VALUES]),
    "check": (["{m.py}", "{g.onnx}"], ["--plan", "--dtype", "--mode", "--device", "--atol", "--rtol", "--cosine",
                                      "--seed", "--format", "--entry", "--inputs", "--input-shape", "--config",
                                      "--timeout", "--html", *VALUES]),
    "convert": (["{g.onnx}"], ["--plan", "-o", "--dtype"]),
    "explain": (["{m.py}", "{g.onnx}"], ["--dtype", "--mode", "--device", "--entry", "--inputs", "--timeout",
                                        *VALUES]),
    "rules": (["PA101", "PA1"], ["--format"]),
    "nope": ([], []),
}
OUTPUT_OPTIONS = {"-o", "--output", "--output-file", "--write-baseline", "--html"}


def _options(command):
    """Mostly the command's own options (sensible values two times in three), sometimes any
    option or flag: most command lines get past the parser, and many through the command."""
    own = COMMANDS[command][1] or ["--format"]
    option = st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(sorted(OPTIONS)))
    with_value = option.flatmap(lambda o: st.tuples(st.just(o), st.one_of(
        st.sampled_from(OPTIONS[o][0]), st.sampled_from(OPTIONS[o][0]), st.sampled_from(OPTIONS[o][1]))))
    return st.lists(st.one_of(with_value, with_value, with_value, st.sampled_from(FLAGS).map(lambda f: (f,))),
                    max_size=4)


def _command_line(command):
    paths = COMMANDS[command][0] or PATHS
    return st.tuples(st.just(command), st.lists(st.one_of(st.sampled_from(paths), st.sampled_from(PATHS)),
                                                min_size=1, max_size=2), _options(command))


CLI = st.sampled_from(sorted(COMMANDS)).flatmap(_command_line)


def _place(value: str, folder: str) -> str:
    return os.path.join(folder, value[1:-1]) if value.startswith("{") else value


def _output_kind(command: str, option: str, argv: list[str]) -> str | None:
    if option == "--write-baseline":
        return "json"
    if option == "--html":
        return None
    if command == "plan":
        return "plan"
    if command == "convert":
        return "onnx"
    return "json" if report_format(argv) else None


def run_cli(case, limit_s: float = 60.0) -> tuple[str, str, str]:
    """(verdict, detail, the command line) of one generated command line."""
    command, paths, options = case
    with Scratch() as folder:
        argv = [command, *(_place(p, folder) for p in paths)]
        for option in options:
            argv += [option[0], *(_place(v, folder) for v in option[1:])]
        outputs = {}
        for i, arg in enumerate(argv[:-1]):
            if arg in OUTPUT_OPTIONS and argv[i + 1].startswith(folder):
                outputs[argv[i + 1]] = _output_kind(command, arg, argv)
        verdict, detail = judge(argv, folder, outputs, limit_s)
        return verdict, detail, " ".join(argv).replace(folder, "DIR")


# --------------------------------------------------------------------------- documents
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.sampled_from(["float16", "bfloat16", "float32", "autocast", "pure", "cuda", "cpu",
                                     "PA1", "PA101", "ALL", "", "error", "warning", "info", "*", "**",
                                     "blocks.*.attn", "lin", "Softmax", "Cast", "module", "ops"]),
                    st.text(string.printable, max_size=8))
ENTRY_KEYS = ["module", "nodes", "op_types", "ops", "dtype", "rules", "reason"]
PLAN_KEYS = st.one_of(st.sampled_from([*PLAN_SCHEMA["properties"], *ENTRY_KEYS, "mode", "device"]),
                      st.integers(-3, 3), st.text(max_size=4))
CONFIG_KEYS = st.one_of(st.sampled_from(["select", "ignore", "extend-select", "per-file-ignores", "severity",
                                         "suppress", "fail-on", "dtype", "mode", "device", "baseline",
                                         "rule-packs", "rule", "path", "module", "node", "op", "reason",
                                         "tool", "PA101", "*.py"]), st.text(max_size=4))
BASELINE_KEYS = st.sampled_from(["tool", "version", "baseline", "target", "findings", "fingerprint", "rule", "path",
                                 "line", "module", "x"])


def values(keys):
    return st.recursive(SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)), max_leaves=20)




def _near(meant):
    """A value as the key means it (two times in three), or any value."""
    return st.one_of(st.sampled_from(meant), st.sampled_from(meant), SCALARS)


CODES = st.lists(_near(["PA1", "PA101", "PA204", "ALL", "pa2", "PA999"]), max_size=3)
ENTRY = st.fixed_dictionaries({"dtype": _near(["float32"])}, optional={
    "module": _near(["lin", "*", "**", "lin.x"]),
    "nodes": st.lists(_near(["/gate/Exp", "/gate/MatMul", "x"]), max_size=2),
    "op_types": st.lists(_near(["Exp", "Softmax", "MatMul"]), max_size=2),
    "ops": st.lists(_near(["softmax", "linear", "exp"]), max_size=2), "rules": CODES, "reason": _near(["why"])})
#: plans and settings that are nearly right: what a user writes, one value off (or none)
NEAR_PLANS = st.fixed_dictionaries(
    {"version": st.just(1), "overrides": st.lists(ENTRY, max_size=3),
     "target": st.fixed_dictionaries({"dtype": _near(["float16", "bfloat16"]), "mode": _near(["autocast", "pure"])})},
    optional={"keep_fp32_modules": st.lists(_near(["lin", "*"]), max_size=2)})
NEAR_CONFIGS = st.fixed_dictionaries({}, optional={
    "select": CODES, "ignore": CODES, "extend-select": CODES,
    "per-file-ignores": st.dictionaries(st.sampled_from(["*.py", "gen.py", "sub/*", "", "**"]), CODES, max_size=2),
    "severity": st.dictionaries(st.sampled_from(["PA101", "PA204", "PA999", "pa101"]),
                                _near(["error", "warning", "info"]), max_size=2),
    "suppress": st.lists(st.fixed_dictionaries({"rule": CODES}, optional={
        "module": _near(["lin", "*"]), "op": _near(["softmax", "lin*"]), "path": _near(["*.py"]),
        "reason": _near(["ok"])}), max_size=2),
    "fail-on": _near(["error", "warning", "info"]), "dtype": _near(["float16", "bfloat16"]),
    "mode": _near(["autocast", "pure"]), "device": _near(["cuda", "cpu"]),
    "baseline": _near(["base.json", "missing.json"]), "rule-packs": st.lists(_near(["sub", "missing"]), max_size=1)})
PLANS = st.one_of(values(PLAN_KEYS), NEAR_PLANS, st.fixed_dictionaries(
    {"version": st.sampled_from([1, True, 1.0, "1", None])},
    optional={"target": values(PLAN_KEYS), "overrides": st.lists(values(PLAN_KEYS), max_size=3),
              "keep_fp32_modules": values(PLAN_KEYS)}))
CONFIGS = st.one_of(NEAR_CONFIGS, st.dictionaries(CONFIG_KEYS, values(CONFIG_KEYS), max_size=6))
BASELINES = st.one_of(values(BASELINE_KEYS), st.fixed_dictionaries(
    {"tool": st.just("precisionaudit"), "baseline": st.sampled_from([1, 2, True, -1, 2**70, "1"])},
    optional={"findings": st.lists(values(BASELINE_KEYS), max_size=3)}))
#: what may happen to the text on its way to the file
DAMAGE = st.sampled_from(["none", "none", "none", "not UTF-8", "truncated", "nested", "NUL"])


def _toml(data: dict) -> str:
    """TOML of a table: keys at top level, nested tables inline (JSON literals are TOML
    literals for strings, numbers, booleans and arrays; null has no TOML: a string)."""
    def literal(value):
        if value is None:
            return '"null"'
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float) and value != value:
            return "nan"
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{json.dumps(str(k))} = {literal(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(literal(v) for v in value) + "]"
        return json.dumps(value)

    return "".join(f"{json.dumps(str(k))} = {literal(v)}\n" for k, v in data.items())


DOCUMENTS = st.one_of(
    st.tuples(st.just("config"), CONFIGS, DAMAGE, st.sampled_from(["scan", "plan", "check"])),
    st.tuples(st.just("plan"), PLANS, DAMAGE, st.sampled_from(["check", "convert"])),
    st.tuples(st.just("baseline"), BASELINES, DAMAGE, st.just("scan")))


def _document_text(kind: str, data) -> str:
    if kind == "config":
        return _toml(data)
    if kind == "plan":
        return yaml.safe_dump(data)
    return json.dumps(data)


def _damaged(text: str, damage: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    if damage == "not UTF-8":
        return data[: len(data) // 2] + b"\xff\xfe" + data[len(data) // 2:]
    if damage == "truncated":
        return data[: len(data) // 2]
    if damage == "nested":
        return data + b"\nx = " + b"[" * 5000 + b"]" * 5000 + b"\n"
    if damage == "NUL":
        return data + b"\x00"
    return data


def run_document(case, limit_s: float = 60.0) -> tuple[str, str, str]:
    """(verdict, detail, what) of a generated settings file, plan or baseline, read by a command."""
    kind, data, damage, command = case
    try:
        text = _document_text(kind, data)
    except (ValueError, yaml.YAMLError, UnicodeEncodeError):
        return "ok", "", "not writable as text"
    with Scratch() as folder:
        name = {"config": "doc.toml", "plan": "doc.yaml", "baseline": "doc.json"}[kind]
        path = os.path.join(folder, name)
        with open(path, "wb") as fh:
            fh.write(_damaged(text, damage))
        model = os.path.join(folder, "g.onnx" if command == "convert" else "m.py")
        option = {"config": "--config", "plan": "--plan", "baseline": "--baseline"}[kind]
        argv = [command, model, option, path]
        outputs = {}
        if command == "plan":
            argv += ["-o", os.path.join(folder, "out.yaml")]
            outputs = {argv[-1]: "plan"}
        elif command == "convert":
            argv += ["-o", os.path.join(folder, "out.onnx")]
            outputs = {argv[-1]: "onnx"}
        elif command == "check":
            argv += ["--format", "json"]
        verdict, detail = judge(argv, folder, outputs, limit_s)
        return verdict, detail, f"{kind} ({damage}) {' '.join(argv).replace(folder, 'DIR')}"


# --------------------------------------------------------------------------- models
LAYERS = ["x = self.lin(x)", "x = torch.softmax(x, -1)", "x = x.exp()", "x = x.sigmoid()", "x = x * x",
          "x = x - x.mean(-1, keepdim=True)", "x = torch.nn.functional.layer_norm(x, x.shape[-1:])",
          "x = x.float()", "x = x.log_softmax(-1)", "x = x.cumsum(-1)",
          "x = x.masked_fill(x > 0, torch.finfo(x.dtype).min)", "x = x @ self.lin.weight.t()",
          "x = (x @ x.transpose(-2, -1)).softmax(-1) @ x"]
#: (where, statement): model code that misbehaves; where: import, init, get_model, inputs, forward
MISCHIEF = ["", "raise ValueError('boom')", "sys.exit(0)", "sys.exit(3)", "raise SystemExit('x')",
            "raise KeyboardInterrupt", "raise Boom('bang')", "print('{not json'); sys.stdout.write(']')",
            "print('hi', file=sys.stderr)", "raise RecursionError('deep')", "raise MemoryError()",
            "import not_a_module_xyz", "return None", "return 42", "return ('a',)",
            "return (torch.randn(3, 5),)", "return {'y': torch.randn(2, 8)}", "while True: pass",
            "time.sleep(1000)",
            "warnings.warn('careful')", "raise GeneratorExit()", "assert False, 'nope'"]
WHERE = ["import", "init", "get_model", "inputs", "forward"]
FILE_DAMAGE = ["", "", "", "", "syntax", "NUL", "not UTF-8", "empty", "no get_model", "get_model(arg)"]
MODELS = st.tuples(st.lists(st.sampled_from(LAYERS), min_size=1, max_size=4), st.sampled_from(MISCHIEF),
                   st.sampled_from(WHERE), st.sampled_from(FILE_DAMAGE),
                   st.sampled_from(["scan-json", "scan-sarif", "scan", "plan", "check", "explain"]),
                   st.sampled_from(["float16", "bfloat16"]), st.sampled_from(["autocast", "pure"]))
LOOPS = ("while True", "time.sleep")


def model_source(layers, mischief, where, damage) -> bytes:
    """The model file: imports, a module whose forward applies ``layers``, the two entry
    points, and ``mischief`` where it runs."""
    def at(place, indent):
        return f"{' ' * indent}{mischief}\n" if mischief and where == place and not (
            mischief.startswith("return") and place in ("import", "init", "forward")) else ""

    def returns(place, default):
        return mischief if mischief.startswith("return") and where == place else default

    forward = "".join(f"        {layer}\n" for layer in layers)
    source = ("import os\nimport sys\nimport time\nimport warnings\n\nimport torch\n\n\n"
              "class Boom(BaseException):\n    pass\n\n\n" + at("import", 0) +
              "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.lin = torch.nn.Linear(8, 8)\n" + at("init", 8) +
              "\n    def forward(self, x):\n" + at("forward", 8) + forward + "        return x.float()\n\n\n"
              "def get_model():\n" + at("get_model", 4) + f"    {returns('get_model', 'return M()')}\n\n\n"
              "def get_example_inputs():\n" + at("inputs", 4)
              + f"    {returns('inputs', 'return (torch.randn(2, 8),)')}\n")
    if damage == "syntax":
        source = source.replace("def forward(self, x):", "def forward(self, x)")
    elif damage == "no get_model":
        source = source.replace("def get_model():", "def make_model():")
    elif damage == "get_model(arg)":
        source = source.replace("def get_model():", "def get_model(config):")
    data = source.encode()
    if damage == "NUL":
        data = data.replace(b"import time", b"import time\x00")
    elif damage == "not UTF-8":
        data = data.replace(b"import time", b"import time  # \xff\xfe")
    elif damage == "empty":
        data = b""
    return data


def run_model(case, limit_s: float = 60.0) -> tuple[str, str, str]:
    """(verdict, detail, what) of one command on one generated model file."""
    layers, mischief, where, damage, command, dtype, mode = case
    with Scratch() as folder:
        path = os.path.join(folder, "gen.py")
        with open(path, "wb") as fh:
            fh.write(model_source(layers, mischief, where, damage))
        name, _, fmt = command.partition("-")
        argv = [name, path, "--dtype", dtype, "--mode", mode]
        outputs = {}
        if fmt or name == "check":
            argv += ["--format", fmt or "json"]
        if name == "plan":
            argv += ["-o", os.path.join(folder, "out.yaml")]
            outputs = {argv[-1]: "plan"}
        if mischief.startswith(LOOPS):
            argv += ["--timeout", "2"]
        verdict, detail = judge(argv, folder, outputs, limit_s)
        what = f"{name} {mode} {dtype} {damage or 'whole'} file, {where}: {mischief or '-'}; layers {layers}"
        return verdict, detail, what
