"""Command line: wires the stages together, owns exit codes and error lines, nothing else."""
from __future__ import annotations

import functools
import sys
import traceback

import click

from .errors import UsageError
from .findings import SEVERITY_RANK
from .policy import DEVICES, DTYPES, MODES, Target

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _fail(message: str, debug: bool):
    if debug:
        traceback.print_exc()
    click.echo(f"precisionaudit: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def guarded(fn):
    """One clear line and exit 2 for bad input; a traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args, debug=False, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UsageError as exc:
            _fail(str(exc), debug)
        except (KeyboardInterrupt, SystemExit, click.exceptions.Exit):
            raise
        except Exception as exc:  # noqa: BLE001 - nothing reaches the user as a raw traceback
            _fail(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)", debug)

    return click.option("--debug", is_flag=True, help="Show tracebacks.")(wrapper)


def target_options(fn):
    for option in reversed([
        click.option("--dtype", type=click.Choice(DTYPES), default="float16", show_default=True,
                     help="Low-precision dtype to judge against."),
        click.option("--mode", type=click.Choice(MODES), default="autocast", show_default=True,
                     help="autocast (mixed precision) or pure (model.half() / .to(bfloat16))."),
        click.option("--device", type=click.Choice(DEVICES), default="cuda", show_default=True,
                     help="Whose autocast policy applies (CUDA's is emulated without a GPU)."),
        click.option("--entry", default="get_model", show_default=True,
                     help="Function of the model file that returns the nn.Module."),
        click.option("--inputs", "inputs_name", default="get_example_inputs", show_default=True,
                     help="Function of the model file that returns the example inputs."),
    ]):
        fn = option(fn)
    return fn


def _split(values) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="precisionaudit")
def main():
    """Find mixed-precision (fp16/bf16) hazards in PyTorch models before training does."""


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error",
              show_default=True, help="Exit 1 when a finding is at or above this severity.")
@click.option("--select", multiple=True, help="Rule ids or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule ids or prefixes to skip (comma-separated).")
@target_options
@guarded
def scan(paths, fmt, fail_on, select, ignore, dtype, mode, device, entry, inputs_name):
    """Scan model files (or directories of them) for precision hazards."""
    from .engine import load_rules, select_rules
    from .reporters import FORMATTERS
    from .scanner import scan as run_scan

    target = Target(dtype, mode, device)
    rules = select_rules(load_rules(), _split(select), _split(ignore))
    results, findings = run_scan(paths, target, rules, entry, inputs_name)
    click.echo(FORMATTERS[fmt](results, findings, target), nl=False)
    for result in results:
        if result.status == "error":
            click.echo(f"precisionaudit: error: {result.error}", err=True)
    if any(r.status == "error" for r in results):
        sys.exit(EXIT_USAGE)
    threshold = SEVERITY_RANK[fail_on]
    sys.exit(EXIT_FINDINGS if any(SEVERITY_RANK[f.severity] <= threshold for f in findings) else EXIT_OK)


@main.command()
@click.argument("path")
@target_options
@guarded
def explain(path, dtype, mode, device, entry, inputs_name):
    """Show what every op computes in under the policy, and why."""
    from .analysis import run_passes
    from .errors import CaptureError
    from .explain import render
    from .scanner import capture_model

    target = Target(dtype, mode, device)
    captured = capture_model(path, target, entry, inputs_name)
    if captured.frontend == "structure":
        raise CaptureError(f"{path}: explain needs example inputs ({inputs_name}() not found)")
    click.echo(render(run_passes(captured.graph), path, target, captured.frontend), nl=False)


@main.command()
@click.argument("rule_id", required=False)
@guarded
def rules(rule_id):
    """List the rule catalog, or show one rule's documentation."""
    from .engine import load_rules
    from .rule_docs import render_catalog, render_rule

    catalog = load_rules()
    if rule_id is None:
        click.echo(render_catalog(catalog), nl=False)
        return
    match = [r for r in catalog if r.id == rule_id.upper() or r.name == rule_id]
    if not match:
        raise UsageError(f"unknown rule {rule_id!r}; `precisionaudit rules` lists them")
    click.echo(render_rule(match[0]), nl=False)
