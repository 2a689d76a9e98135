"""Counts that say how well the package keeps its layout; ``python bench/layout_counts.py``.

- imports against the stage order (``LAYERS`` below): a module importing a stage of its own
  layer or of a layer above it;
- import cycles between modules;
- file-kind dispatch sites: ``.endswith(".onnx")`` occurrences (the issue's measure), and,
  more broadly, every ``.endswith(`` of a file suffix (a literal such as ``".py"`` or
  ``(".py", ".onnx")``, or the frontends' ``SUFFIXES``): each one a place that decides
  something by the kind of file;
- the lines of the longest command function in ``cli.py``;
- the training stage's own measures (issue 37, ``training_counts``): value types, condition
  wordings, visitors that index calls, per-script caches, GradScaler name tables, and the
  longest class.

The walk reads the source with ``ast`` (nothing is imported, so imports inside functions
count too). ``LAYERS`` is the one statement of the stage order: tests/test_layout.py imports
it from here and fails on any import against it and on any cycle.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "precisionaudit"

#: The stages, bottom to top. A module may import its own stage and any stage of a lower
#: layer; stages that share a layer are siblings and do not import each other. A stage is
#: the longest dotted prefix below ``precisionaudit`` that is named here: ``plan.file`` (the
#: plan file's schema, a contract everyone reads) is its own stage, the rest of ``plan``
#: another. ``precisionaudit`` is the package's ``__init__`` (the version, lazy names).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("precisionaudit", "core"),
    ("ir", "plan.file"),
    ("runtime",),          # runs models: device moves, CUDA-policy and kernel emulation, sessions
    ("capture", "watch"),  # model file -> IR (and measured values); the monitor inside the training job
    ("analysis",),         # passes that annotate the IR
    ("rules",),            # IR -> findings
    ("training", "watch.findings"),  # training scripts and configs, read statically -> findings; a watch log -> findings
    ("settings",),         # config, suppressions, baselines: data and policy over findings
    ("report", "plan"),    # findings -> text/json/sarif; findings -> override plan
    ("apply",),            # plan -> a model in low precision
    ("check",),            # A/B runs of the applied model against fp32
    ("prune",),            # drops overrides that checks show are not needed
    ("frontend",),         # one per kind of input file; frontend_for(path) picks it
    ("scanner",),          # the scan manager: files -> settings -> frontend scan -> policy
    ("cli",),
    ("reference_docs", "__main__"),  # generated docs of the commands; ``python -m``
    ("integrations",),     # training frameworks' callbacks around the watch; nothing imports them
)
RANK = {stage: rank for rank, layer in enumerate(LAYERS) for stage in layer}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage(module: str) -> str:
    """``precisionaudit.check.onnx.runner`` → ``check``; ``precisionaudit.plan.file`` → ``plan.file``.

    A module outside ``LAYERS`` is its own top-level part (``precisionaudit.x.y`` → ``x``).
    """
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in RANK:
            return ".".join(parts[:end])
    return parts[0] if parts else "precisionaudit"


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(source: str, module: str, is_package: bool, known: set[str]) -> list[tuple[int, str]]:
    """(line, module) for each package module that ``source`` imports.

    ``from pkg import name`` reads ``pkg.name`` when that is a module of ``known``.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "precisionaudit"]
        elif isinstance(node, ast.ImportFrom):
            source_module = imported_from(node, module, is_package)
            if source_module.split(".")[0] != "precisionaudit":
                continue
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                found.append((node.lineno, full if full in known else source_module))
    return found


def import_graph() -> nx.DiGraph:
    """Modules and the package modules each imports; an edge keeps the lines it is on."""
    found = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(found)
    for module, path in found.items():
        for line, target in imports(path.read_text(), module, path.name == "__init__.py", set(found)):
            if target != module:
                graph.add_edge(module, target)
                graph.edges[module, target].setdefault("lines", set()).add(line)
    return graph


def against_the_order(importer: str, imported: str) -> bool:
    """True when ``importer`` may not import ``imported``: a sibling or a higher stage."""
    low, high = stage(imported), stage(importer)
    return low != high and RANK.get(low, len(LAYERS)) >= RANK.get(high, len(LAYERS))


def upward_imports(graph: nx.DiGraph) -> list[str]:
    """'importer:line -> imported' for each import against the stage order."""
    return sorted(f"{a}:{line} -> {b}" for a, b, lines in graph.edges(data="lines")
                  if against_the_order(a, b) for line in sorted(lines))


def unknown_stages(graph: nx.DiGraph) -> list[str]:
    """Modules whose stage ``LAYERS`` does not name: a new stage has to be placed there."""
    return sorted(m for m in graph if stage(m) not in RANK)


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Each set of modules that import one another, directly or round a loop (a strongly
    connected component of more than one module), sorted."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


SUFFIX_TEST = re.compile(r"""endswith\((?:\(?["'][^"']*\.(?:onnx|py|json|ya?ml)["']|tuple\(SUFFIXES\)|suffix\b)""")


def dispatch_sites(pattern=None) -> list[str]:
    """'file:line' of each ``.endswith(".onnx")`` (``pattern``: of each match of it instead)."""
    def count(line):
        return len(pattern.findall(line)) if pattern else line.count('endswith(".onnx")')

    return [f"{path.relative_to(PACKAGE.parent)}:{n}" for path in modules().values()
            for n, line in enumerate(path.read_text().splitlines(), 1) for _ in range(count(line))]


def longest_command() -> tuple[str, int]:
    """The ``cli.py`` function decorated as a command with the most lines (def to last line)."""
    tree = ast.parse((PACKAGE / "cli.py").read_text())
    commands = [(f.name, f.end_lineno - f.lineno + 1) for f in tree.body if isinstance(f, ast.FunctionDef)
                and any("command" in ast.unparse(d) for d in f.decorator_list)]
    return max(commands, key=lambda c: c[1])


TRAINING = PACKAGE / "training"


def _training_trees():
    return [(p, ast.parse(p.read_text())) for p in sorted(TRAINING.rglob("*.py"))]


def training_counts() -> dict:
    """The training stage's layout, counted from its source (issue 37's targets are 1, 1, 1,
    1, 1 and under 250):

    - value types: classes of a value under a path condition (a ``value``/``dtype`` field
      beside a ``guard``/``condition``/``conditions`` field);
    - condition wordings: functions that put a path condition into words (they hold the
      literal ``"when "``);
    - visitors that index calls: classes that collect a file's calls as they walk it (a
      ``visit_Call`` method, or ``self.calls.append``);
    - per-script caches: the ways an analysis is kept per script (``Script.once``, a
      ``WeakKeyDictionary``, a module-level dict that keys by ``id()``);
    - GradScaler name tables: literal collections every entry of which names a GradScaler;
    - the longest class: its name and lines.
    """
    value_types, wordings, indexers, tables, classes = [], [], [], [], []
    caches = set()
    for path, tree in _training_trees():
        name = str(path.relative_to(PACKAGE.parent))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = {t.target.id for t in node.body
                          if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
                if fields & {"value", "dtype"} and fields & {"guard", "condition", "conditions"}:
                    value_types.append(f"{name}:{node.name}")
                source = ast.unparse(node)
                if any(isinstance(f, ast.FunctionDef) and f.name == "visit_Call" for f in node.body) \
                        or "self.calls.append" in source:
                    indexers.append(f"{name}:{node.name}")
                classes.append((node.end_lineno - node.lineno + 1, f"{name}:{node.name}"))
            elif isinstance(node, ast.FunctionDef):
                if any(isinstance(c, ast.Constant) and c.value == "when " for c in ast.walk(node)):
                    wordings.append(f"{name}:{node.name}")
                if node.name == "once":
                    caches.add("Script.once")
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                    == "WeakKeyDictionary":
                caches.add("WeakKeyDictionary")
        module_dicts = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                         and isinstance(n.value, ast.Dict) and not n.value.keys]
        keyed_by_id = any(isinstance(n, ast.Tuple) and any(isinstance(e, ast.Call) and getattr(e.func, "id", "") == "id"
                                                             for e in n.elts) for n in ast.walk(tree))
        if module_dicts and keyed_by_id:
            caches.add("module-level memo keyed by id()")
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Dict, ast.Set, ast.Call)):
                literal = node.value.args[0] if isinstance(node.value, ast.Call) and node.value.args else node.value
                items = literal.keys if isinstance(literal, ast.Dict) else getattr(literal, "elts", [])
                names = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
                if names and len(names) == len(items) and all(n.endswith("GradScaler") for n in names):
                    tables.append(f"{name}:{node.targets[0].id}")
    return {"value types": value_types, "condition wordings": wordings, "visitors that index calls": indexers,
            "per-script caches": sorted(caches), "GradScaler name tables": tables, "longest class": max(classes)}


def main() -> None:
    graph = import_graph()
    upward, loops, sites = upward_imports(graph), cycles(graph), dispatch_sites()
    name, lines = longest_command()
    importers = {u.split(":")[0] for u in upward}
    print(f"imports against the stage order: {len(upward)} (in {len(importers)} modules)")
    print("".join(f"  {u}\n" for u in upward), end="")
    print(f"import cycles between modules (groups that import one another): {len(loops)}")
    print("".join(f"  {', '.join(c)}\n" for c in loops), end="")
    print(f'file-kind dispatch sites (endswith(".onnx")): {len(sites)}')
    print("".join(f"  {s}\n" for s in sites), end="")
    suffixes = dispatch_sites(SUFFIX_TEST)
    print(f"file-suffix tests (endswith of .py/.onnx/.json/.yaml or SUFFIXES): {len(suffixes)}")
    print("".join(f"  {s}\n" for s in suffixes), end="")
    print(f"longest cli.py command: {name} ({lines} lines)")
    for measure, found in training_counts().items():
        if measure == "longest class":
            print(f"training: longest class: {found[1]} ({found[0]} lines)")
        else:
            print(f"training: {measure}: {len(found)} ({', '.join(found)})")
    if unknown_stages(graph):
        print(f"modules of no stage in LAYERS: {', '.join(unknown_stages(graph))}")
    if "-v" in sys.argv[1:]:
        for layer in LAYERS:
            print("  " + ", ".join(layer))


if __name__ == "__main__":
    main()
