"""Command line: wires the stages together, owns exit codes and error lines, nothing else."""
from __future__ import annotations

import math
import os
import sys

import click

from .core.documents import require_regular_file
from .core.errors import UsageError
from .core.exits import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, OneLineErrors, guarded
from .core.outputs import checked_output
from .core.target import (  # not .policy: keep torch out until a model is scanned
    DEVICES,
    DTYPES,
    MODES,
    Target,
)
from .core.values import DEFAULT_HEADROOM, ValueOptions


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
        TIMEOUT_OPTION,
    ]):
        fn = option(fn)
    return fn


def value_options(fn):
    """--weights / --data / --batches / --headroom, shared by scan, explain, plan and check."""
    for option in reversed([
        click.option("--weights", metavar="PATH", help="Real weights: a .safetensors file, a "
                     "directory of safetensors shards, or a state_dict (torch.load weights_only)."),
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
              help="Skip named files that define no model entry point (what the pre-commit hooks pass).")
@target_options
@value_options
@guarded
def scan(paths, fmt, output_file, fail_on, exit_zero, statistics, color, show_settings, select,
         extend_select, ignore, config_file, isolated, baseline, write_baseline, skip_non_models, dtype,
         mode, device, entry, inputs_name, timeout, weights, data, batches, headroom):
    """Scan model files (or directories of them) for precision hazards.

    A named file without the entry point is an error unless --skip-non-models; a
    directory yields its model files and is an error when it has none. Each file is
    judged under the nearest settings file above it (as ruff does); flags win over it.
    The text report prints each model's result as it finishes.
    """
    import time

    from .core.findings import rule_counts
    from .report import FORMATTERS, json_report, sarif
    from .report import text as text_report
    from .report.console import Output, Progress, color_enabled
    from .report.settings_report import render_settings
    from .report.words import plural
    from .rules.engine import load_rules, rule_ids
    from .scanner import model_files
    from .settings.baseline import write_baseline as record_baseline
    from .settings.gate import Baselines, outcomes
    from .settings.resolve import SettingsResolver

    started = time.monotonic()
    if statistics and fmt not in ("text", "json"):
        raise UsageError("--statistics shows text or json")
    if fmt == "html":
        from .report.html import require_plotly

        require_plotly()  # said before any model is scanned
    values = _values(weights, data, batches, headroom)
    known = rule_ids()
    resolver = SettingsResolver(known, config_file, isolated, _flags(dtype=dtype, mode=mode, device=device,
                                                                    fail_on=fail_on),
                                _split(select), _split(extend_select), _split(ignore), baseline)
    baselines = Baselines(baseline, recording=bool(write_baseline))
    files, skipped = model_files(paths, entry, skip_non_models)
    if show_settings:
        click.echo(render_settings(resolver.groups(files)), nl=False)
        return
    baselines.read_for(resolver, files)
    read = [*files, *skipped, *(s.config.path for s, _ in resolver.groups(files))]
    if write_baseline:
        baseline_path = checked_output(write_baseline, read, "baseline")
    colored = color_enabled(color, to_file=output_file is not None)
    out = Output(output_file and checked_output(output_file, [*read, *baselines.paths], "report"), colored)
    first = resolver.for_path(files[0] if files else os.path.join(os.curdir, "_"))
    target = first.target  # the report's top-level target; each model carries its own
    if not files:
        click.echo(f"precisionaudit: nothing to scan: {plural(len(skipped), 'file')} without {entry}() "
                   "skipped", err=True)
        out.write(FORMATTERS[fmt]([], [], target))
        out.close()
        sys.exit(EXIT_OK)

    debug = click.get_current_context().meta.get("precisionaudit.debug")
    streamed = fmt == "text" and not statistics
    progress = Progress(len(files))
    done = []
    rules = load_rules(packs=resolver.rule_packs(files))
    for outcome in outcomes(files, resolver, rules, known, entry, inputs_name, baselines,
                            timeout=timeout, before=progress.update, values=values):
        progress.clear()
        done.append(outcome)
        result = outcome.result
        if result.status == "error":  # on stderr as it happens; stdout stays the report
            if debug and result.traceback is not None:
                click.echo(result.traceback, err=True, nl=False)
            click.echo(f"precisionaudit: error: {result.error}", err=True)
        elif streamed:
            out.write(text_report.render_model(result, outcome.new, target, len(outcome.known), colored))
    results = [o.result for o in done]
    findings = [f for o in done for f in o.new]
    hidden = [f for o in done for f in o.known]
    failed = [r for r in results if r.status == "error"]
    if write_baseline and not failed:
        record_baseline(baseline_path, hidden, target, first.config.root)
        click.echo(f"precisionaudit: wrote {plural(len(hidden), 'finding')} to {write_baseline}",
                   err=True)
    shown_baseline = write_baseline or ", ".join(baselines.paths)
    if len(failed) < len(results):  # when every model failed there is no report, only the errors
        if statistics:
            counts = rule_counts(findings)
            out.write(text_report.render_statistics(counts, colored) if fmt == "text"
                      else json_report.dumps(counts))
        elif streamed:
            out.write(text_report.render_summary(results, findings, target, time.monotonic() - started,
                                                 len(hidden), shown_baseline, colored))
        elif fmt == "json":
            used = [settings.as_json(group) for settings, group in resolver.groups(files)]
            out.write(json_report.render(results, findings, target, settings=used))
        elif fmt == "sarif":
            out.write(sarif.render(results, findings, target, rules=rules))
        else:
            out.write(FORMATTERS[fmt](results, findings, target))
    out.close()
    if hidden and not write_baseline and not streamed:
        click.echo(f"precisionaudit: {plural(len(hidden), 'finding')} hidden by baseline {shown_baseline}",
                   err=True)
    if failed:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_FINDINGS if any(o.failing for o in done) and not exit_zero else EXIT_OK)


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
@value_options
@guarded
def explain(path, dtype, mode, device, entry, inputs_name, timeout, weights, data, batches, headroom):
    """Show what every op computes in under the policy, and why."""
    from .scanner import judged_target, run_model_file

    values = _values(weights, data, batches, headroom)
    target = judged_target(path, Target(dtype, mode, device))
    click.echo(run_model_file(path, timeout, _explained, path, target, entry, inputs_name, values), nl=False)


def _explained(path, target, entry, inputs_name, values) -> str:
    from .analysis import run_passes
    from .core.errors import CaptureError
    from .report.explain import render
    from .scanner import attach_measurement, capture_model

    captured = capture_model(path, target, entry, inputs_name)
    if captured.frontend == "structure":
        raise CaptureError(f"{path}: explain needs example inputs ({inputs_name}() not found)")
    if values.weights or values.measure:
        attach_measurement(captured.graph, path, target, entry, inputs_name, values)
    return render(run_passes(captured.graph), path, target, captured.frontend, captured.notes)


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
              "on the example inputs, one forward per entry; ONNX: a float16 run on generated inputs, "
              "2-5 onnxruntime runs); the plan written is verified.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DIMS",
              help="With --prune: the shape of an input with dynamic dims, e.g. input_ids=2x128.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="With --prune: the seed of the runs.")
@target_options
@value_options
@guarded
def plan(path, output, min_severity, config_file, isolated, prune, input_shapes, seed, dtype, mode,
         device, entry, inputs_name, timeout, weights, data, batches, headroom):
    """Write the override plan that fixes a model's precision findings.

    For a PyTorch model file: autocast / pure-mode regions by module. For an ONNX model:
    the nodes its float16 conversion keeps in float32 (`precisionaudit convert`).
    """
    from .core.atomic import write_text_atomic
    from .plan.file import dump_plan
    from .plan.pytorch import header, make_plan
    from .rules.engine import load_rules, rule_ids
    from .settings.apply import scan_with_settings
    from .settings.resolve import SettingsResolver

    values = _values(weights, data, batches, headroom)
    onnx = path.endswith(".onnx")
    if input_shapes and not onnx:
        raise UsageError("--input-shape is for ONNX models")
    if prune and values.data is not None and not onnx:
        raise UsageError("plan --prune --data is for ONNX models; a model file's plan is pruned "
                         "on its example inputs (check --data proves the whole plan on the data)")
    known = rule_ids()
    settings = SettingsResolver(known, config_file, isolated, _flags(dtype=dtype, mode=mode, device=device)
                                ).for_path(path)  # the settings the model's scan is judged under
    output_path = checked_output(output, [path, settings.config.path], "plan") if output != "-" else None
    judged = settings.target
    target = Target(judged.dtype, "pure" if onnx else judged.mode, judged.device)  # ONNX: converted
    rules = [r for r in load_rules(packs=settings.config.rule_packs) if r.id in settings.rule_ids]
    results, findings = scan_with_settings([path], target, rules, known, settings.config, entry,
                                           inputs_name, timeout, values)
    if results[0].status == "error":
        raise UsageError(results[0].error)
    if onnx:
        from .runtime.onnx.io import require_onnx_extra

        require_onnx_extra()
        from .capture.onnx.model import load_onnx
        from .plan.onnx import header as onnx_header
        from .plan.onnx import make_onnx_plan
        from .runtime.onnx.graph import refuse_converted
        from .runtime.onnx.inputs import parse_shapes

        model, pruned = load_onnx(path), None
        refuse_converted(model, path, "plan the float32 model (the file convert reads)")
        if prune:  # runs the model in onnxruntime: the check stage
            from .prune.onnx import pruned_plan

            override_plan, notes, extra, pruned = pruned_plan(
                findings, model, path, target, min_severity, parse_shapes(input_shapes), seed, values)
        else:
            (override_plan, notes), extra = make_onnx_plan(findings, model, target, min_severity), []
        lines = onnx_header(path, override_plan, notes, "plan.yaml" if output == "-" else output) + extra
        if pruned is not None and not pruned.passed:
            inputs = f"--data {values.data}" if values.data else "the generated inputs"
            click.echo(f"precisionaudit: warning: {path}: even the whole plan's float16 run is out of "
                       f"tolerance on {inputs} (precisionaudit check shows where)", err=True)
    else:
        override_plan, notes = make_plan(findings, target, results[0].graph, min_severity)
        pruned = None
        if prune:  # runs the model file's forwards: the check stage
            from .prune.pytorch import header_lines, pruned_plan
            from .report.progress import progress_printer
            from .scanner import run_model_file

            pruned = run_model_file(path, timeout, pruned_plan, override_plan, path, target, seed, entry,
                                    inputs_name, "cpu" if target.device == "cpu" else "auto",
                                    progress_printer(), values.weights)
            override_plan = pruned.plan
        lines = header(path, override_plan, target, notes, "amp_plan.yaml" if output == "-" else output,
                       values.flags())
        if pruned is not None:
            lines += header_lines(pruned, seed)
            if not pruned.passed:
                click.echo(f"precisionaudit: warning: {path}: even the whole static plan fails the check "
                           "on the example inputs (precisionaudit check shows where)", err=True)
    text = dump_plan(override_plan, lines)
    if output == "-":
        click.echo(text, nl=False)
        return
    write_text_atomic(output_path, text, "plan")
    count = len(override_plan.overrides)
    click.echo(f"precisionaudit: wrote {count} override{'s' * (count != 1)} to {output}", err=True)


@main.command(epilog="""\b
Examples:
  precisionaudit check model.py                        float32 against float16 autocast outputs
  precisionaudit check model.py --plan amp_plan.yaml   with the plan applied
  precisionaudit check model.py --grad --html c.html   gradients too, and a page of plots
  precisionaudit check model.onnx --input-shape input_ids=2x128   a dynamic dim fixed""")
@click.argument("path")
@click.option("--plan", "plan_path", metavar="FILE", help="Override plan to check (amp_plan.yaml).")
@click.option("--dtype", type=click.Choice(DTYPES), default="float16", show_default=True,
              help="Low-precision dtype of the policy.")
@click.option("--mode", type=click.Choice(MODES), default="autocast", show_default=True,
              help="autocast (mixed precision) or pure (model.half() / .to(bfloat16)).")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu", "cpu-emulated"]), default="auto",
              show_default=True, help="auto: the GPU if there is one, else CUDA autocast emulated "
              "on CPU; cpu: CPU autocast's own policy.")
@click.option("--atol", type=float, help="Absolute tolerance (default per dtype).")
@click.option("--rtol", type=float, help="Tolerance relative to max |reference| (default per dtype).")
@click.option("--cosine", type=float, help="Minimum cosine similarity (default per dtype).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed for weights and inputs.")
@click.option("--grad", is_flag=True, help="Also compare gradients and recommend a loss scale.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--html", "html_file", metavar="FILE", help="Also write the report as one self-contained "
              "HTML page (variants, error growth and gradient plots).")
@click.option("--entry", default="get_model", show_default=True,
              help="Function of the model file that returns the nn.Module.")
@click.option("--inputs", "inputs_name", default="get_example_inputs", show_default=True,
              help="Function of the model file that returns the example inputs.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DIMS",
              help="ONNX models: the shape of an input with dynamic dims, e.g. input_ids=2x128.")
@click.option("--config", "config_file", metavar="FILE", help="Settings file (as for scan).")
@click.option("--isolated", is_flag=True, help="Ignore every settings file.")
@TIMEOUT_OPTION
@value_options
@guarded
def check(path, plan_path, dtype, mode, device, atol, rtol, cosine, seed, grad, fmt, html_file, entry,
          inputs_name, input_shapes, config_file, isolated, timeout, weights, data, batches, headroom):
    """A/B check: fp32 reference vs the policy (baseline) vs the policy with the plan.

    ONNX models: fp32 vs converted to float16 vs converted with the plan, in onnxruntime (CPU).
    """
    from .check.tolerance import tolerance_for
    from .report.check_report import render_json, render_text
    from .rules.engine import rule_ids
    from .settings.resolve import SettingsResolver

    flags = _flags(dtype=dtype, mode=mode, device=device)
    if flags["device"] in ("auto", "cpu-emulated"):  # where it runs; the settings take the policy's device
        flags["device"] = "cuda"
    settings = SettingsResolver(rule_ids(), config_file, isolated, flags).for_path(path)
    dtype, mode = settings.target.dtype, settings.target.mode
    if flags["device"] is None and settings.config.device == "cpu":
        device = "cpu"  # the settings' policy device; "cuda" is what auto does already
    if plan_path is not None:
        require_regular_file(plan_path, "plan", missing="no such plan file")
    if not os.path.isfile(path):
        raise UsageError(f"{path}: {'not a regular file' if os.path.exists(path) else 'no such file'}")
    values = _values(weights, data, batches, headroom)
    tolerance = tolerance_for(dtype, atol, rtol, cosine)
    if html_file is not None:
        from .report.html import require_plotly

        require_plotly()  # a missing plotly is said before the check runs
        html_file = checked_output(html_file, [path, plan_path], "HTML report")
    from .scanner import run_model_file

    if path.endswith(".onnx"):
        from .runtime.onnx.io import require_onnx_extra

        require_onnx_extra()
        from .check.onnx.runner import run_onnx_check
        from .runtime.onnx.inputs import parse_shapes

        if grad:
            raise UsageError("--grad needs a PyTorch model file; an ONNX model is checked forward only")
        if values.weights:
            raise UsageError("--weights is for PyTorch model files; an ONNX model's initializers "
                             "are its weights")
        report = run_model_file(path, timeout, run_onnx_check, path, plan=plan_path, dtype=dtype,
                                tolerance=tolerance, seed=seed, input_shapes=parse_shapes(input_shapes),
                                values=values)
    else:
        from .check.pytorch.runner import run_check
        from .report.progress import progress_printer

        if input_shapes:
            raise UsageError("--input-shape is for ONNX models; a model file's example inputs "
                             "give the shapes")
        target = Target(dtype, mode, "cpu" if device == "cpu" else "cuda")
        report = run_model_file(path, timeout, run_check, path, target, plan=plan_path, device=device,
                                tolerance=tolerance, seed=seed, grad=grad, entry=entry, inputs=inputs_name,
                                progress=progress_printer(), values=values)
    if fmt == "json":  # the text report carries its warnings itself
        for warning in report["warnings"]:
            click.echo(f"precisionaudit: warning: {warning}", err=True)
    click.echo((render_json if fmt == "json" else render_text)(report), nl=False)
    if html_file is not None:
        from .core.atomic import write_text_atomic
        from .report.html import render_check

        write_text_atomic(html_file, render_check(report), "HTML report")
    sys.exit(EXIT_OK if report["passed"] else EXIT_FINDINGS)


@main.command(epilog="""\b
Examples:
  precisionaudit convert model.onnx --plan plan.yaml -o model_fp16.onnx
  precisionaudit convert model.onnx --plan plan.yaml -o model_fp16.onnx --keep-io-types""")
@click.argument("path")
@click.option("--plan", "plan_path", metavar="FILE",
              help="Plan whose nodes stay in float32 (precisionaudit plan MODEL.onnx -o plan.yaml).")
@click.option("-o", "--output", required=True, metavar="FILE", help="Where to write the converted model.")
@click.option("--dtype", type=click.Choice(DTYPES), default="float16", show_default=True,
              help="Low-precision dtype (float16; bfloat16 is refused, see the README).")
@click.option("--keep-io-types", is_flag=True,
              help="Keep float32 inputs and outputs (cast at the graph's borders).")
@guarded
def convert(path, plan_path, output, dtype, keep_io_types):
    """Convert an ONNX model to float16 with the plan's nodes kept in float32.

    The result must pass onnx.checker and load in onnxruntime before it is written, and is
    written atomically; constants that do not fit float16 are reported.
    """
    from .runtime.onnx.io import require_onnx_extra

    require_onnx_extra()
    from .apply.onnx import convert as convert_model
    from .capture.onnx.model import load_onnx
    from .plan.file import load_plan
    from .report.words import plural
    from .runtime.onnx.io import verify, write_atomic

    if not path.endswith(".onnx"):
        raise UsageError(f"{path}: convert takes an ONNX model (.onnx); PyTorch models take a plan "
                         "through precisionaudit.apply_plan / to_low_precision")
    target = checked_output(output, [path, plan_path], "converted model")
    plan = load_plan(plan_path) if plan_path is not None else None
    original = load_onnx(path)
    conversion = convert_model(original, plan, dtype, keep_io_types, source=path)
    for line in conversion.warnings + [c.message() for c in conversion.clipped]:
        click.echo(f"precisionaudit: warning: {line}", err=True)
    try:
        verify(conversion.model, f"{path} converted to {dtype}")
    except UsageError:
        verify(original, path)  # when the model itself does not load, say that instead
        raise
    write_atomic(conversion.model, target)
    total, kept = len(conversion.nodes), len(conversion.kept)
    by_plan = len(conversion.by_plan)
    extra = [f"{by_plan} kept in float32 by the plan"] if plan is not None else []
    if kept > by_plan:
        extra.append(f"{kept - by_plan} by onnxconverter-common's op block list")
    if conversion.retargeted_casts:
        extra.append(f"{plural(len(conversion.retargeted_casts), 'Cast(to=float) node')} retargeted to "
                     "float16")
    if conversion.tiny_weights:
        extra.append(f"{plural(conversion.tiny_weights, 'weight value')} below 2^-24 raised to 2^-24")
    click.echo(f"precisionaudit: wrote {output}: {total - kept} of {total} nodes in {dtype}"
               + (f" ({'; '.join(extra)})" if extra else ""), err=True)
