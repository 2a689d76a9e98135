"""Zoo benchmark: findings at warning or above per rule on tiny real architectures.

    python bench/zoo_bench.py                     # every zoo model, three targets
    python bench/zoo_bench.py --models gpt2 bert --targets float16:pure
    python bench/zoo_bench.py --verdicts bench/zoo/verdicts.md   # + false-positive share
    python bench/zoo_bench.py --data example      # + measured ranges from each model's example inputs
    python bench/zoo_bench.py --zoo new --fork --verdicts bench/zoo/new_verdicts.md   # the held-out zoo

A distinct site is (rule, source line): the library line the finding points at. With
``--verdicts`` each distinct warning+ site is looked up in the hand-judged table of that
file (rows ``| rule | file | function | source line | verdict | ... |``, verdict ``true`` or
``false``) by what the site is, not by its line number: the library file (matched by
suffix), the qualified name of the function around the line (``GPT2Attention.forward``,
``eager_attention_forward``, ``<module>``) and the stripped text of the line. A site whose
rule, file and function match a row but whose text does not is reported as changed (judge
it again); one that matches no row is judged nowhere. The false-positive share of distinct
sites is printed per target, with every site not judged true. Exit status 1 when a scan
failed or (with ``--verdicts``) a site is judged false, changed or judged nowhere.

Scans each model of ``bench/zoo/hf_zoo.py`` (built from transformers configs; with ``--zoo
new``, of ``bench/zoo/new_zoo.py``: the held-out architectures the rules were not tuned on) in
one process per target set and prints a Markdown table: model, target, frontend, ops, findings at warning
or above by rule (distinct sites in parentheses when they differ), wall and peak RSS. Run it
on two checkouts to compare (``PYTHONPATH=OTHER python bench/zoo_bench.py``).

``--data example`` runs the value-range pass on each model's own example inputs (as
``precisionaudit scan --data example``), so the measured rules (PA301-PA306) report too. The
zoo's weights stay random (``torch.manual_seed(0)`` init, no hub): the measured ranges are
those of the initialisation, so measured findings speak of a model's constants, masks and
structure more than of trained weights. The JSON keeps the same structure with or without it.
"""
from __future__ import annotations

import argparse
import json
import ast
import collections
import functools
import importlib.util
import os
import re
import resource
import sys
import time
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "zoo", "hf_zoo.py")
VERDICTS = os.path.join(HERE, "zoo", "verdicts.md")
#: the zoos: the familiar one (hf_zoo.py) and the held-out one (new_zoo.py), judged in new_verdicts.md
ZOOS = {"familiar": ZOO, "new": os.path.join(HERE, "zoo", "new_zoo.py")}
NEW_VERDICTS = os.path.join(HERE, "zoo", "new_verdicts.md")
sys.path.append(os.path.dirname(HERE))  # this checkout's package, unless PYTHONPATH names another
TARGETS = ("float16:autocast", "bfloat16:autocast", "float16:pure")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", choices=sorted(ZOOS), default="familiar",
                        help="familiar: bench/zoo/hf_zoo.py; new: bench/zoo/new_zoo.py (held out)")
    parser.add_argument("--fork", action="store_true",
                        help="scan each model in a forked child, as the command line does, so that no "
                             "library cache carries one scan's tensors into the next (RT-DETR's "
                             "lru_cache'd anchors break its pure-fp16 scan after its autocast one)")
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--verdicts", help="hand-judged sites (Markdown table) for the FP share")
    parser.add_argument("--json", help="write every finding (per model and target) to this file, to diff "
                                       "two checkouts' runs")
    parser.add_argument("--data", metavar="SOURCE",
                        help="calibration data for the range pass, as scan's --data ('example': "
                             "each model's example inputs)")
    args = parser.parse_args(argv)
    if args.fork:
        from precisionaudit.core.isolation import command_started

        command_started()  # forks only if torch is not imported yet, as the CLI's check
    from precisionaudit.rules.engine import load_rules

    rules = load_rules()
    zoo_file = ZOOS[args.zoo]
    models = args.models or list(zoo(zoo_file).ZOO)
    print("| model | target | frontend | ops | warning+ by rule: findings (distinct sites) | total | wall s | peak RSS MiB |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    totals = collections.Counter()
    frontends = collections.Counter()
    errors = []
    target_sites = collections.defaultdict(dict)  # target → (rule, source) → (Site, a message)
    dumped = {}
    for target_text in args.targets:
        dtype, mode = target_text.split(":")
        for name in models:
            start = time.perf_counter()
            result, findings = scan_model(name, target_text, rules, data=args.data, zoo_file=zoo_file)
            wall = time.perf_counter() - start
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            loud = loud_findings(findings)
            by_rule = collections.Counter(f.rule for f in loud)
            sites = collections.defaultdict(set)
            for f in loud:
                sites[f.rule].add((f.evidence.get("source") or f.line, f.op, f.message))
                target_sites[target_text].setdefault((f.rule, site_of(f)), (identify(f), f"{name}: {f.message}"))
            frontends[result.frontend] += 1
            dumped[f"{name} {target_text}"] = {
                "status": result.status, "frontend": result.frontend, "nodes": result.nodes,
                "findings": [portable(f) for f in findings]}
            cells = ", ".join(f"{r} {n}" + (f" ({len(sites[r])})" if len(sites[r]) != n else "")
                              for r, n in sorted(by_rule.items())) or "-"
            if result.status != "ok":
                cells = f"ERROR: {result.error[:80]}"
                errors.append(f"{name} {target_text}")
            totals[target_text] += len(loud)
            print(f"| {name} | {dtype} {mode} | {result.frontend} | {result.nodes} | {cells} | "
                  f"{len(loud)} | {wall:.2f} | {rss:.0f} |", flush=True)
    print()
    runs = sum(frontends.values())
    print("captures: " + ", ".join(f"{k} {n}/{runs}" for k, n in frontends.most_common()))
    for target_text, n in totals.items():
        print(f"total warning+ findings, {target_text}: {n} "
              f"({len(target_sites[target_text])} distinct sites)")
    if errors:
        print("scan errors: " + ", ".join(errors))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(dumped, fh, indent=1, sort_keys=True)
    not_true = report_verdicts(read_verdicts(args.verdicts), target_sites) if args.verdicts else []
    return 1 if errors or not_true else 0


def zoo(zoo_file: str = ZOO):
    """The zoo module of ``zoo_file`` (bench/zoo/hf_zoo.py): ``ZOO`` maps a model name to its builders."""
    if os.path.dirname(zoo_file) not in sys.path:
        sys.path.insert(0, os.path.dirname(zoo_file))
    return importlib.import_module(os.path.splitext(os.path.basename(zoo_file))[0])


def scan_model(name: str, target_text: str, rules, data: str | None = None, zoo_file: str = ZOO):
    """(scan result, findings) of model ``name`` of ``zoo_file`` under ``target_text``
    ("float16:pure"); with ``data`` ("example", as scan's ``--data``) the range pass measures
    the model too."""
    from precisionaudit.core.numerics import Target
    from precisionaudit.core.values import ValueOptions
    from precisionaudit.scanner import scan

    dtype, mode = target_text.split(":")
    results, findings = scan([zoo_file], Target(dtype, mode, "cuda"), rules,
                             entry=f"get_{name}", inputs=f"inputs_{name}", values=ValueOptions(data=data))
    return results[0], findings


def loud_findings(findings) -> list:
    """The findings at warning or above: the ones the false-positive share is about."""
    return [f for f in findings if f.severity in ("error", "warning")]


def portable(finding) -> dict:
    """A finding as JSON with no checkout or venv path in it, so two checkouts' runs diff."""
    data = finding.to_json()
    data.update(path=site_of(finding), model=data["model"].rsplit(":", 1)[-1])
    if "source" in data["evidence"]:
        data["evidence"] = {**data["evidence"], "source": site_of(finding)}
    return data


def site_of(finding) -> str:
    """The source line a finding points at, from site-packages on (library code) or the file."""
    source = finding.evidence.get("source") or f"{finding.path}:{finding.line}"
    marker = "site-packages" + os.sep
    return source.split(marker, 1)[1] if marker in source else source


class Site(NamedTuple):
    """What a reported site is: a rule at a library file's line, with the line's function and text."""
    rule: str
    file: str      # from site-packages on ("transformers/models/gpt2/modeling_gpt2.py"), else the path
    line: int      # for the reader only: matching does not use it
    function: str  # qualified name of the enclosing def ("GPT2Attention.forward"), "<module>" outside
    text: str      # the stripped source text of the line

    def where(self) -> str:
        return f"{self.file}:{self.line} ({self.function})"


def identify(finding) -> Site:
    """The ``Site`` of a finding, reading the function and the text from the file it points at."""
    source = finding.evidence.get("source") or f"{finding.path}:{finding.line}"
    path, _, line = source.rpartition(":")
    line = int(line) if line.isdigit() else 0
    marker = "site-packages" + os.sep
    short = path.split(marker, 1)[1] if marker in path else path
    return Site(finding.rule, short.replace(os.sep, "/"), line, *function_and_text(path, line))


@functools.lru_cache(maxsize=None)
def _parsed(path: str):
    """(source lines, [(first line, last line, qualified name)] of every def) of a Python file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return [], []
    spans = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)  # a def inside an if/try/with keeps its enclosing names

    visit(tree, "")
    return text.split("\n"), spans  # not splitlines(): a form feed is no line break to Python


def function_and_text(path: str, line: int) -> tuple[str, str]:
    """The qualified name of the innermost def around ``line`` of ``path`` (``<module>`` outside
    every def) and the stripped text of the line ("" where the file cannot be read)."""
    lines, spans = _parsed(path)
    around = [(first, name) for first, last, name in spans if first <= line <= last]
    function = max(around)[1] if around else "<module>"
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return function, text


class Row(NamedTuple):
    """A row of the verdicts table."""
    rule: str
    file: str
    function: str
    text: str
    verdict: str  # "true" or "false"
    why: str


def _cells(line: str) -> list:
    r"""The cells of a Markdown table row: ``\|`` is a pipe inside a cell, code spans are unwrapped."""
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    cells = [c.strip().replace("\\|", "|") for c in cells]
    return [re.sub(r"^(`+) ?(.*?) ?\1$", r"\2", c) for c in cells]


def read_verdicts(path) -> list:
    """The ``Row`` s of the verdicts table of ``path``
    (``| rule | file | function | source line | verdict | targets | why |``)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = _cells(line)
            if len(cells) >= 7 and re.fullmatch(r"PA\d+", cells[0]) and cells[4] in ("true", "false"):
                rows.append(Row(cells[0], cells[1], cells[2], cells[3], cells[4], cells[6]))
    return rows


class Judgement(NamedTuple):
    """How a site matched the verdicts: ``outcome`` is "true"/"false" (a row judges this very
    site), "changed" (rows judge the rule in that function, none this text: judge it again)
    or "nowhere"; ``rows`` are the matching rows."""
    outcome: str
    rows: tuple

    def explain(self, site: Site) -> str:
        if self.outcome == "changed":
            was = " or ".join(f"`{row.text}`" for row in self.rows)
            return (f"this site's code changed: judge it again ({site.rule} in {site.where()}: "
                    f"judged as {was}, now `{site.text}`)")
        if self.outcome == "nowhere":
            return f"judged nowhere ({site.rule} at {site.where()}: `{site.text}`)"
        return f"judged {self.outcome} ({site.rule} at {site.where()})"


def _same_file(file: str, row_file: str) -> bool:
    return file == row_file or file.endswith("/" + row_file)


def judge(rows, site: Site) -> Judgement:
    """Match ``site`` against the verdict ``rows``: rule, file (by suffix), function and text."""
    candidates = tuple(row for row in rows if row.rule == site.rule and row.function == site.function
                       and _same_file(site.file, row.file))
    exact = tuple(row for row in candidates if row.text == site.text)
    if exact:
        return Judgement(exact[0].verdict, exact)
    return Judgement("changed" if candidates else "nowhere", candidates)


def rows_gone(rows) -> list:
    """The rows whose function no longer holds their text in the installed library (a release
    rewrote the code: the row judges nothing now); rows of a library not installed are skipped."""
    gone = []
    for row in rows:
        spec = importlib.util.find_spec(row.file.split("/", 1)[0]) if "/" in row.file else None
        if spec is None or not spec.submodule_search_locations:
            continue
        path = os.path.join(os.path.dirname(list(spec.submodule_search_locations)[0]), row.file)
        lines, spans = _parsed(path)
        if not any(line.strip() == row.text and function_and_text(path, n)[0] == row.function
                   for n, line in enumerate(lines, 1)):
            gone.append(row)
    return gone


def report_verdicts(rows, target_sites) -> list:
    """Print the false-positive share per target and each site not judged true (false, changed,
    judged nowhere); return those as (target, Site, Judgement)."""
    not_true = []
    for target_text, sites in target_sites.items():
        judged = {}
        for (rule, source), (site, example) in sites.items():
            judgement = judge(rows, site)
            judged[(rule, source)] = judgement.outcome
            if judgement.outcome != "true":
                not_true.append((target_text, site, judgement))
                print(f"  {target_text}: {judgement.explain(site)} [{example}]")
        outcomes = collections.Counter(judged.values())
        share = outcomes["false"] / len(judged) if judged else 0.0
        print(f"false positives, {target_text}: {outcomes['false']} of {len(judged)} distinct sites "
              f"({share:.0%}); changed (judge again) {outcomes['changed']}; "
              f"unjudged {outcomes['nowhere']}")
    gone = rows_gone(rows)
    print(f"verdict rows whose code the installed libraries no longer have: {len(gone)}")
    for row in gone:  # not a failure: no site is misjudged, but the row guards nothing now
        print(f"  - {row.rule} {row.file} ({row.function}): `{row.text}`")
    return not_true


if __name__ == "__main__":
    sys.exit(main())
