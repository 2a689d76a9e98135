"""Command line: wires the stages together, owns exit codes and error lines, nothing else."""
from __future__ import annotations

import math
import os
import sys

import click

from .core.documents import require_regular_file
from .core.errors import UsageError
from .core.exits import EXIT_FINDINGS, EXIT_OK, OneLineErrors, guarded
from .core.isolation import RemoteTraceback
from .core.outputs import checked_output
from .core.target import (  # torch-free: torch is imported only when a model is scanned
    DEVICES,
    DTYPES,
    FP8_RECIPES,
    MODES,
    TARGET_DTYPES,
    Target,
)
from .core.values import DEFAULT_HEADROOM, ValueOptions
from .runtime.sources import BESIDE, LoadOptions, callable_spec, source_kind


class FiniteRange(click.FloatRange):
    """click's FloatRange lets nan through (every comparison with it is False) and inf where
    no max is set: a --headroom or --timeout of nan would silently turn its check off."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: seconds a model may take by default: long enough for a large model's check, short enough
#: that a pre-commit hook stuck in a model's endless loop ends
DEFAULT_TIMEOUT_S = 600
TIMEOUT_OPTION = click.option(
    "--timeout", type=FiniteRange(min=0, max=1e6), metavar="SECONDS", default=DEFAULT_TIMEOUT_S,
    show_default=True, help="Give up on a model whose loading and analysis (its own code included, "
    "run in a child process) take longer; 0: no limit.")
SEED = click.IntRange(0, 2**32 - 1)


def target_options(fn):
    for option in reversed([
        click.option("--dtype", type=click.Choice(TARGET_DTYPES), default="float16", show_default=True,
                     help="Low-precision dtype to judge against (float8: bf16 autocast with every "
                     "eligible nn.Linear GEMM in FP8; nvfp4, mxfp4: in that FP4 format, docs/fp4.md)."),
        click.option("--recipe", type=click.Choice(FP8_RECIPES), help="With --dtype float8: the FP8 "
                     "scaling recipe (torchao's tensorwise, rowwise, rowwise_with_gw_hp; Transformer "
                     "Engine's delayed; mxfp8)  [default: tensorwise]"),
        click.option("--tp", type=click.IntRange(min=1), metavar="N", help="With --dtype float8/nvfp4/mxfp4: "
                     "judge each Linear's shape on one of N tensor-parallel ranks, split as Megatron-LM "
                     "splits it (column-parallel N, row-parallel K)  [default: 1]"),
        click.option("--mode", type=click.Choice(MODES), default="autocast", show_default=True,
                     help="autocast (mixed precision) or pure (model.half() / .to(bfloat16))."),
        click.option("--device", type=click.Choice(DEVICES), default="cuda", show_default=True,
                     help="Whose autocast policy applies (CUDA's is emulated without a GPU)."),
        TIMEOUT_OPTION,
    ]):
        fn = option(fn)
    return fn


def _function_name(context, param, value):
    """--entry / --inputs: a Python name (or, for --inputs, a module:callable): an empty or
    malformed one is a usage error, not a model file read as something else."""
    if value.isidentifier() or (param.name == "inputs_name" and callable_spec(value)):
        return value
    raise click.BadParameter(f"{value!r} is not a function name" + (" or a module:callable" if param.name ==
                                                                    "inputs_name" else ""))


def load_options(fn):
    """--entry / --inputs / --input-shape / --pythonpath: how scan, explain, plan and check load
    the model (a model file, a Hugging Face directory, a module:callable, an ONNX file)."""
    for option in reversed([
        click.option("--entry", default="get_model", show_default=True, callback=_function_name,
                     help="Function of the model file that returns the nn.Module."),
        click.option("--inputs", "inputs_name", default="get_example_inputs", show_default=True,
                     callback=_function_name,
                     help="Function of the model file that returns the example inputs, or a "
                     "module:callable that does (any model)."),
        click.option("--input-shape", "input_shapes", multiple=True, metavar="[NAME=]DIMS",
                     help="Generated example inputs: ONNX models, Hugging Face directories "
                     "(input_ids=2x128; pixel_values=1x3x224x224) and module:callable specs "
                     "(1x3x224x224, float32 normal values)."),
        click.option("--pythonpath", multiple=True, metavar="DIR",
                     type=click.Path(exists=True, file_okay=False),
                     help="Search DIR for the model's imports too (repeatable); the settings' "
                     "pythonpath adds more."),
    ]):
        fn = option(fn)
    return fn


def value_options(fn):
    """--weights / --data / --batches / --headroom, shared by scan, explain, plan and check."""
    for option in reversed([
        click.option("--weights", metavar="[PATH]", is_flag=False, flag_value=BESIDE,
                     help="Real weights: a .safetensors file, a directory of safetensors shards, or a "
                     "state_dict (torch.load weights_only); without PATH, a Hugging Face directory's "
                     "own shards."),
        click.option("--data", metavar="SOURCE", help="Calibration data: 'example', a function of "
                     "the model file yielding batches, or a .pt/.safetensors/.npz file of batches; "
                     "turns on the measured value-range rules (PA3xx)."),
        click.option("--batches", type=click.IntRange(min=1), metavar="N",
                     help="Use at most N calibration batches."),
        click.option("--headroom", type=FiniteRange(min=1.0), default=DEFAULT_HEADROOM,
                     show_default=True, help="PA301 warns when max |x| times this reaches the "
                     "dtype's largest value."),
    ]):
        fn = option(fn)
    return fn


def _values(weights, data, batches, headroom) -> ValueOptions:
    if batches is not None and data is None:
        raise UsageError("--batches needs --data")
    return ValueOptions(weights, data, batches, headroom)


def _load(entry, inputs_name, input_shapes, pythonpath) -> LoadOptions:
    return LoadOptions(entry, inputs_name, tuple(input_shapes)).searching(pythonpath)


def _split(values) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="precisionaudit")
def main():
    """Find mixed-precision (fp16/bf16) hazards in PyTorch models before training does."""


SCAN_EXAMPLES = """\b
Examples:
  precisionaudit scan model.py                      findings under CUDA fp16 autocast
  precisionaudit scan models/ --dtype bfloat16      every model file below models/
  precisionaudit scan model.py --format json -o report.json
  precisionaudit scan . --statistics                how many findings each rule has
  precisionaudit scan model.py --show-settings      which settings file applies, and its values
  precisionaudit scan . --write-baseline base.json  accept today's findings; then --baseline base.json"""


@main.command(epilog=SCAN_EXAMPLES)
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github", "html"]), default="text",
              show_default=True, help="html: one self-contained page (findings, module tree); use with -o.")
@click.option("-o", "--output-file", metavar="FILE",
              help="Write the report to FILE (atomically, at the end) instead of stdout.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error",
              show_default=True, help="Exit 1 when a finding is at or above this severity.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (2 still "
              "means bad input or a model that failed).")
@click.option("--statistics", is_flag=True, help="Show how many findings each rule has instead of "
              "the findings (text or json).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour the text report (auto: on a terminal, unless NO_COLOR is set).")
@click.option("--show-settings", is_flag=True, help="Show which settings file applies to each path, "
              "and its values, then exit without scanning.")
@click.option("--select", multiple=True, help="Rule ids or prefixes to run (comma-separated).")
@click.option("--extend-select", multiple=True, help="Rule ids or prefixes to add to the selection.")
@click.option("--ignore", multiple=True, help="Rule ids or prefixes to skip (comma-separated).")
@click.option("--config", "config_file", metavar="FILE",
              help="Settings file for every model (default: the nearest precisionaudit.toml / "
              "pyproject.toml above each scanned file).")
@click.option("--isolated", is_flag=True, help="Ignore every settings file.")
@click.option("--baseline", metavar="FILE", help="Hide the findings this baseline file records.")
@click.option("--write-baseline", metavar="FILE", help="Record the current findings as the baseline.")
@click.option("--skip-non-models", is_flag=True,
              help="Skip named files no selected rule applies to (a Python file without the entry "
              "point when no training rule is selected): what the pre-commit hooks pass.")
@click.option("--fix", is_flag=True, help="Rewrite what is safe to rewrite in training scripts (PA409: "
              "torch.amp with the device; PA401: scaler.unscale_ before the clip), then report what remains.")
@click.option("--diff", is_flag=True, help="Print the --fix rewrites as a unified diff and write nothing "
              "(exit 1 when there is one).")
@target_options
@load_options
@value_options
@guarded
def scan(paths, fmt, output_file, fail_on, exit_zero, statistics, color, show_settings, select,
         extend_select, ignore, config_file, isolated, baseline, write_baseline, skip_non_models, fix, diff,
         dtype, recipe, tp, mode, device, timeout, entry, inputs_name, input_shapes, pythonpath, weights, data,
         batches, headroom):
    """Scan models, training scripts and configs (or directories of them) for precision hazards.

    A model is a model file, an ONNX or Keras file, a Hugging Face directory (config.json) or a
    module:callable. A Python file without the entry point is a training script, read and never
    run. A named file no selected rule applies to is an error unless --skip-non-models. Each file
    is judged under the nearest settings file above it (as ruff does); flags win over it."""
    from .report.scan_output import ScanPrinter, check_format
    from .report.settings_report import render_settings
    from .rules.engine import rule_ids
    from .scanner import ScanManager
    from .settings.resolve import SettingsResolver

    check_format(fmt, statistics)  # said before any model is scanned
    values = _values(weights, data, batches, headroom)
    flags = _flags(dtype=dtype, mode=mode, device=device, fail_on=fail_on, recipe=recipe, tp=tp)
    resolver = SettingsResolver(rule_ids(), config_file, isolated, flags, _split(select), _split(extend_select),
                                _split(ignore), baseline)
    manager = ScanManager(resolver, _load(entry, inputs_name, input_shapes, pythonpath), timeout, values, baseline,
                          recording=bool(write_baseline))
    manager.discover(paths, skip_non_models)
    if show_settings:
        click.echo(render_settings(resolver.groups(manager.files)), nl=False)
        return
    if fix or diff:
        _fix_scripts(manager, resolver, write=not diff)  # --diff shows them and exits
    manager.prepare()
    printer = ScanPrinter(manager, fmt, statistics, color, output_file, write_baseline)
    report = manager.run(printer, write_baseline and (printer.baseline_path, write_baseline))
    sys.exit(printer.finish(report, exit_zero))


def _fix_scripts(manager, resolver, write: bool) -> None:
    """--fix: rewrite the training scripts' autofixable findings (atomically; the scan then
    reports what remains). --diff: print the rewrites as a unified diff, write nothing, and
    exit 1 when there is one."""
    import difflib

    from .core.atomic import write_text_atomic
    from .frontend import TRAINING
    from .report.words import plural
    from .rules.engine import load_rules
    from .training.fix import fixes

    catalog = load_rules(checks=False)
    changed = fixes([p for p in manager.files if TRAINING in manager.frontends[p]],
                    lambda path: [r for r in catalog if r.id in resolver.for_path(path).rule_ids])
    if not write:
        click.echo("".join("".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, path))
                           for path, old, new in changed), nl=False)
        sys.exit(EXIT_FINDINGS if changed else EXIT_OK)
    for path, _, new in changed:
        write_text_atomic(path, new, "fixed script")
    if changed:
        click.echo(f"precisionaudit: fixed {plural(len(changed), 'file')}", err=True)


def named_target(dtype, mode, device, recipe, tp=1) -> Target:
    """The Target of the flags (``--dtype float8`` is bf16 autocast with FP8 Linears, nvfp4 and
    mxfp4 with FP4 Linears); a bad combination is a UsageError."""
    try:
        return Target.named(dtype, mode, device, recipe, tp)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _flags(**values) -> dict:
    """The target flags given on the command line (None where left at their default), which
    win over each file's settings."""
    source = click.get_current_context().get_parameter_source
    return {name: value if source(name) != click.core.ParameterSource.DEFAULT else None
            for name, value in values.items()}


@main.command(epilog="""\b
Examples:
  precisionaudit explain model.py                   each op's dtype under CUDA fp16 autocast
  precisionaudit explain model.py --mode pure       under model.half()
  precisionaudit explain model.onnx                 the dtypes an ONNX file holds""")
@click.argument("path")
@target_options
@load_options
@value_options
@guarded
def explain(path, dtype, recipe, tp, mode, device, timeout, entry, inputs_name, input_shapes, pythonpath, weights,
            data, batches, headroom):
    """Show what every op computes in under the policy, and why."""
    from .frontend import frontend_for
    from .rules.engine import rule_ids
    from .scanner import model_options
    from .settings.resolve import SettingsResolver

    load, values = model_options(path, SettingsResolver(rule_ids()).for_path(path),
                                 _load(entry, inputs_name, input_shapes, pythonpath),
                                 _values(weights, data, batches, headroom))
    target = named_target(dtype, mode, device, recipe, tp or 1)
    click.echo(frontend_for(path, entry).explain(path, target, load, timeout, values), nl=False)


@main.command(epilog="""\b
Examples:
  precisionaudit rules                 the whole catalog
  precisionaudit rules PA1             the precision family (a prefix)
  precisionaudit rules PA106           one rule's page (or by name: attention-logits-overflow)
  precisionaudit rules --format json   the catalog for scripts""")
@click.argument("rule_id", required=False, metavar="[ID|PREFIX|NAME]")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@guarded
def rules(rule_id, fmt):
    """List the rule catalog (or one family, by prefix), or show one rule's documentation.

    Reads only the rule packs: no model, no torch import.
    """
    from .rules.docs import render_catalog, render_json, render_rule, select_rules
    from .rules.engine import load_rules
    from .settings.config import load_config

    catalog = load_rules(checks=False)  # read once: the nearest config's packs are rarely any
    packs = load_config(known_ids=[r.id for r in catalog], start=os.getcwd()).rule_packs
    chosen, one = select_rules(load_rules(checks=False, packs=packs) if packs else catalog, rule_id)
    if not chosen:
        raise UsageError(f"unknown rule or prefix {rule_id!r}; `precisionaudit rules` lists them")
    if fmt == "json":
        click.echo(render_json(chosen, one), nl=False)
    else:
        click.echo(render_rule(chosen[0]) if one else render_catalog(chosen), nl=False)


@main.command(epilog="""\b
Examples:
  precisionaudit plan model.py -o amp_plan.yaml        the overrides that fix the findings
  precisionaudit plan model.onnx --prune -o plan.yaml  only the overrides a float16 run needs
  precisionaudit check model.py --plan amp_plan.yaml   then check that they do""")
@click.argument("path")
@click.option("-o", "--output", default="-", show_default=True, metavar="FILE",
              help="Where to write the plan (amp_plan.yaml); - is stdout.")
@click.option("--min-severity", type=click.Choice(["error", "warning", "info"]), default="warning",
              show_default=True, help="Plan for findings at or above this severity.")
@click.option("--config", "config_file", metavar="FILE", help="Settings file (as for scan).")
@click.option("--isolated", is_flag=True, help="Ignore every settings file.")
@click.option("--prune", is_flag=True, help="Keep only the plan entries the check's runs need (PyTorch: "
              "on the example inputs, one forward per entry, and a plan that fails grows from each run's "
              "first divergence; ONNX: float16 runs on generated inputs, 2-5 onnxruntime runs, more when "
              "a failing plan grows from its first divergence); the plan written is verified.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="With --prune or --data: the seed of the runs.")
@click.option("--train", is_flag=True, help="The training entries (keep_fp32_modules, master_weights, "
              "loss_scale) that fix what check --train finds, from --steps optimizer steps.")
@click.option("--steps", type=int, default=20, show_default=True, help="--train: optimizer steps per variant.")
@click.option("--lr", type=float, default=1e-4, show_default=True, help="--train: learning rate of the default AdamW.")
@target_options
@load_options
@value_options
@guarded
def plan(path, output, min_severity, config_file, isolated, prune, seed, train, steps, lr, dtype, recipe, tp, mode,
         device, timeout, entry, inputs_name, input_shapes, pythonpath, weights, data, batches, headroom):
    """Write the override plan that fixes a model's precision findings.

    For a PyTorch model (a model file, a Hugging Face directory, a module:callable): autocast /
    pure-mode regions by module; before it is written, the planned forward runs once on fake
    tensors (a plan never makes the model raise), and with --data the plan is checked on the
    data and, where it fails, grown from the failing run's first divergence until it passes
    (its header says what was added). For an ONNX model: the nodes its float16 conversion keeps
    in float32 (`precisionaudit convert`).
    """
    from .frontend import PlanRequest, frontend_for
    from .rules.engine import load_rules, rule_ids
    from .scanner import ScanManager
    from .settings.resolve import SettingsResolver

    values = _values(weights, data, batches, headroom)
    frontend = frontend_for(path, entry)
    frontend.validate_plan(prune, input_shapes, values)
    resolver = SettingsResolver(rule_ids(), config_file, isolated,
                                _flags(dtype=dtype, mode=mode, device=device, recipe=recipe, tp=tp))
    settings = resolver.for_path(path)  # the settings the model's scan is judged under
    if settings.target.recipe and (train or prune):
        kind = "FP4" if settings.target.fp4 else "FP8"
        raise UsageError(f"plan --dtype {settings.target.named_dtype} writes the modules to keep out of {kind}; it "
                         "takes neither --train nor --prune")
    output_path = checked_output(output, [path, settings.config.path], "plan") if output != "-" else None
    log = getattr(frontend, "whole_directory", False)  # a watch log: its findings, read whole
    if train and log:
        raise UsageError(f"{path}: a watch log's plan has its training entries already (plan takes no --train)")
    manager = ScanManager(resolver, _load(entry, inputs_name, input_shapes, pythonpath), timeout, values)
    load, values = manager.model_options(path, settings)
    if train:
        return _write_plan(*_training_plan(frontend, path, settings.target, steps, lr, seed, load, timeout,
                                           prune or values.weights or values.measure), output, output_path)
    rules = load_rules(packs=settings.config.rule_packs)
    if log:
        result, findings = frontend.scan(path, settings.target, rules)
    else:
        result, findings = manager.scan_named(path, settings, rules)
    if result.status == "error":
        raise UsageError(result.error) from (RemoteTraceback(result.traceback) if result.traceback else None)
    made = frontend.plan(PlanRequest(path, frontend.judged_target(settings.target), result, findings, min_severity,
                                     prune, seed, load, timeout, values, output))
    for warning in made.warnings:
        click.echo(f"precisionaudit: warning: {warning}", err=True)
    _write_plan(made.plan, made.header, output, output_path)


def _training_plan(frontend, path, target, steps, lr, seed, load, timeout, forward_options):
    """(plan, header) of ``plan --train``: the entries that fix check --train's findings."""
    from .check.tolerance import tolerance_for

    if forward_options:
        raise UsageError("plan --train takes neither --prune nor --weights/--data")
    from .core.findings import Finding
    from .frontend import CheckRequest
    from .plan.training import training_plan

    report = frontend.check(CheckRequest(path, None, target, "auto", tolerance_for(target.dtype, None, None, None),
                                         seed, load=load, timeout=timeout, train=True, steps=steps, lr=lr))
    findings = [Finding(**f) for f in report["findings"]]
    header = [f"precisionaudit plan --train {path}: fixes {len(findings)} finding(s) of check --train "
              f"({steps} steps, lr {lr:g}); prove it with check --train --plan"]
    return training_plan(findings, target.as_dict()), header


def _write_plan(override_plan, header, output: str, output_path: str | None) -> None:
    """The plan file on stdout (``-``), or written atomically to the checked ``output_path``."""
    from .core.atomic import write_text_atomic
    from .plan.file import dump_plan

    text = dump_plan(override_plan, header)
    if output == "-":
        click.echo(text, nl=False)
        return
    write_text_atomic(output_path, text, "plan")
    count = len(override_plan.overrides)
    training = [k for k in ("keep_fp32_modules", "master_weights", "loss_scale") if getattr(override_plan, k)]
    also = f" and training entries ({', '.join(training)})" if training else ""
    if override_plan.keep_out_of_fp8:
        also += f" and {len(override_plan.keep_out_of_fp8)} Linear(s) to keep out of FP8"
    if override_plan.keep_out_of_fp4:
        also += f" and {len(override_plan.keep_out_of_fp4)} Linear(s) to keep out of FP4"
    click.echo(f"precisionaudit: wrote {count} override{'s' * (count != 1)}{also} to {output}", err=True)


@main.command(epilog="""\b
Examples:
  precisionaudit check model.py                        float32 against float16 autocast outputs
  precisionaudit check model.py --plan amp_plan.yaml   with the plan applied
  precisionaudit check model.py --grad --html c.html   gradients too, and a page of plots
  precisionaudit check model.onnx --input-shape input_ids=2x128   a dynamic dim fixed""")
@click.argument("path")
@click.option("--plan", "plan_path", metavar="FILE", help="Override plan to check (amp_plan.yaml).")
@click.option("--dtype", type=click.Choice(TARGET_DTYPES), default="float16", show_default=True,
              help="Low-precision dtype of the policy (float8: bf16 autocast with every eligible "
              "nn.Linear GEMM in FP8, emulated: E4M3 operands under the recipe's scales, fp32 products).")
@click.option("--recipe", type=click.Choice(FP8_RECIPES), help="With --dtype float8: the FP8 scaling "
              "recipe  [default: tensorwise]")
@click.option("--mode", type=click.Choice(MODES), default="autocast", show_default=True,
              help="autocast (mixed precision) or pure (model.half() / .to(bfloat16)).")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu", "cpu-emulated"]), default="auto",
              show_default=True, help="auto: the GPU if there is one, else CUDA autocast emulated "
              "on CPU; cpu: CPU autocast's own policy.")
@click.option("--atol", type=float, help="Absolute tolerance (default per dtype).")
@click.option("--rtol", type=float, help="Tolerance relative to max |reference| (default per dtype).")
@click.option("--cosine", type=float, help="Minimum cosine similarity (default per dtype).")
@click.option("--snr", type=float, metavar="DB", help="Minimum signal-to-noise ratio of each output (and "
              "intermediate result) against the reference, in dB (default: float8 20, none for "
              "float16/bfloat16).")
@click.option("--gemm-snr", type=float, metavar="DB", help="With --dtype float8: minimum SNR of each FP8 "
              "GEMM against the same GEMM in float32 on its operands, in dB  [default: 25]")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed for weights and inputs.")
@click.option("--grad", is_flag=True, help="Also compare gradients and recommend a loss scale.")
@click.option("--train", is_flag=True, help="Train instead: --steps optimizer steps of fp32, the target and "
              "the plan side by side (updates lost, optimizer state underflow, flushed gradients).")
@click.option("--steps", type=int, default=20, show_default=True, help="--train: optimizer steps per variant.")
@click.option("--lr", type=float, default=1e-4, show_default=True,
              help="--train: learning rate of the default AdamW (a get_optimizer() sets its own).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--html", "html_file", metavar="FILE", help="Also write the report as one self-contained "
              "HTML page (variants, error growth and gradient plots; --train: the loss curves, the loss "
              "scale and its skipped steps, each per-module measure a finding is about).")
@click.option("--config", "config_file", metavar="FILE", help="Settings file (as for scan).")
@click.option("--isolated", is_flag=True, help="Ignore every settings file.")
@TIMEOUT_OPTION
@load_options
@value_options
@guarded
def check(path, plan_path, dtype, recipe, mode, device, atol, rtol, cosine, snr, gemm_snr, seed, grad, train, steps, lr,
          fmt, html_file, config_file, isolated, timeout, entry, inputs_name, input_shapes, pythonpath, weights, data,
          batches, headroom):
    """A/B check: fp32 reference vs the policy (baseline) vs the policy with the plan.

    ONNX models: fp32 vs converted to float16 vs converted with the plan, in onnxruntime (CPU).
    """
    from .check.tolerance import tolerance_for
    from .frontend import CheckRequest, frontend_for
    from .rules.engine import rule_ids
    from .scanner import model_options
    from .settings.resolve import SettingsResolver

    flags = _flags(dtype=dtype, mode=mode, device=device, recipe=recipe)
    if flags["device"] in ("auto", "cpu-emulated"):  # where it runs; the settings take the policy's device
        flags["device"] = "cuda"
    settings = SettingsResolver(rule_ids(), config_file, isolated, flags).for_path(path)
    if flags["device"] is None and settings.config.device == "cpu":
        device = "cpu"  # the settings' policy device; "cuda" is what auto does already
    if plan_path is not None:
        require_regular_file(plan_path, "plan", missing="no such plan file")
    if not source_kind(path) and not os.path.isfile(path):
        raise UsageError(f"{path}: {'not a regular file' if os.path.exists(path) else 'no such file'}")
    load, values = model_options(path, settings, _load(entry, inputs_name, input_shapes, pythonpath),
                                 _values(weights, data, batches, headroom))
    tolerance = tolerance_for(settings.target.named_dtype, atol, rtol, cosine, snr, gemm_snr)
    if html_file is not None:  # a missing plotly is said before the check
        html_file = _html_output(html_file, [path, plan_path])
    report = frontend_for(path, entry).check(CheckRequest(path, plan_path, settings.target, device, tolerance, seed,
                                                          grad, load, timeout, values, train, steps, lr))
    _show_check(report, fmt, html_file)
    sys.exit(EXIT_OK if report["passed"] else EXIT_FINDINGS)


def _html_output(html_file: str, read) -> str:
    from .report.html import require_plotly

    require_plotly()
    return checked_output(html_file, read, "HTML report")


def _show_check(report: dict, fmt: str, html_file: str | None) -> None:
    """The check report on stdout (its warnings on stderr too, for JSON), and the HTML page."""
    from .report.check_report import render_json, render_text
    from .report.train_report import render_train_text

    if report.get("train"):
        render_text = render_train_text
    if fmt == "json":  # the text report carries its warnings itself
        for warning in report["warnings"]:
            click.echo(f"precisionaudit: warning: {warning}", err=True)
    click.echo((render_json if fmt == "json" else render_text)(report), nl=False)
    if html_file is not None:
        from .core.atomic import write_text_atomic
        from .report.html import render_check
        from .report.train_html import render_train

        page = (render_train if report.get("train") else render_check)(report)
        write_text_atomic(html_file, page, "HTML report")


@main.command(epilog="""\b
Examples:
  precisionaudit watch precisionaudit-watch            what the training job's monitor logged
  precisionaudit watch logs/ --format html -o watch.html   timeline and per-module heat maps
  precisionaudit plan precisionaudit-watch -o amp_plan.yaml   the plan the log's evidence calls for""")
@click.argument("log_dir")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text", show_default=True,
              help="Output format (json: docs/watch.md).")
@click.option("-o", "--output-file", metavar="FILE", help="Write the report to FILE instead of stdout.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default="error", show_default=True,
              help="Exit 1 when a finding has this severity or a worse one.")
@guarded
def watch(log_dir, fmt, output_file, fail_on):
    """Read the log of precisionaudit.watch (a training job's monitor): the first non-finite
    op, the loss scaler, per-module statistics and their findings (PA7xx).

    The ranks' event files are merged, also when the job died before close().
    """
    from .core.atomic import write_text_atomic
    from .core.findings import SEVERITY_RANK
    from .frontend import WATCH
    from .report.watch_report import render_json, render_text, watch_document

    report, ranks = WATCH.read(log_dir)
    if fmt == "html":
        from .report.html import require_plotly

        require_plotly()
    output_path = checked_output(output_file, [log_dir], "watch report") if output_file else None
    document = watch_document(report, WATCH.findings(report, log_dir), log_dir)
    if fmt == "html":
        from .report.watch_html import render_watch
        from .watch.log import samples, timeline

        text = render_watch(document, timeline(ranks), samples(ranks))
    else:
        text = (render_json if fmt == "json" else render_text)(document)
    if output_path:
        write_text_atomic(output_path, text, "watch report")
    else:
        click.echo(text, nl=False)
    worst = min((SEVERITY_RANK[f["severity"]] for f in document["findings"]), default=None)
    sys.exit(EXIT_FINDINGS if worst is not None and worst <= SEVERITY_RANK[fail_on] else EXIT_OK)


@main.command(epilog="""\b
Examples:
  precisionaudit convert model.onnx --plan plan.yaml -o model_fp16.onnx
  precisionaudit convert model.onnx --plan plan.yaml -o model_fp16.onnx --keep-io-types""")
@click.argument("path")
@click.option("--plan", "plan_path", metavar="FILE",
              help="Plan whose nodes stay in float32 (precisionaudit plan MODEL.onnx -o plan.yaml).")
@click.option("-o", "--output", required=True, metavar="FILE", help="Where to write the converted model.")
@click.option("--dtype", type=click.Choice(DTYPES), default="float16", show_default=True,
              help="Low-precision dtype (float16; bfloat16 is refused: docs/onnx.md says why).")
@click.option("--keep-io-types", is_flag=True,
              help="Keep float32 inputs and outputs (cast at the graph's borders).")
@guarded
def convert(path, plan_path, output, dtype, keep_io_types):
    """Convert an ONNX model to float16 with the plan's nodes kept in float32.

    The result must pass onnx.checker and load in onnxruntime before it is written, and is
    written atomically; constants that do not fit float16 are reported.
    """
    from .frontend import frontend_for
    from .report.words import plural

    conversion = frontend_for(path, entry=None).convert(path, plan_path, output, dtype, keep_io_types,
                                            lambda line: click.echo(f"precisionaudit: warning: {line}", err=True))
    total, kept = len(conversion.nodes), len(conversion.kept)
    by_plan = len(conversion.by_plan)
    extra = [f"{by_plan} kept in float32 by the plan"] if plan_path is not None else []
    if kept > by_plan:
        extra.append(f"{kept - by_plan} by onnxconverter-common's op block list")
    if conversion.retargeted_casts:
        extra.append(f"{plural(len(conversion.retargeted_casts), 'Cast(to=float) node')} retargeted to "
                     "float16")
    if conversion.tiny_weights:
        extra.append(f"{plural(conversion.tiny_weights, 'weight value')} below 2^-24 raised to 2^-24")
    click.echo(f"precisionaudit: wrote {output}: {total - kept} of {total} nodes in {dtype}"
               + (f" ({'; '.join(extra)})" if extra else ""), err=True)
