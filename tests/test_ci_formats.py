"""--format sarif (validated against the OASIS SARIF 2.1.0 schema) and --format github."""
import json
import os

import pytest
import yaml
from click.testing import CliRunner
from gate_models import HAZARD, HAZARD_LINE, HELPER, helper_model, write

from precisionaudit.cli import main
from precisionaudit.core.findings import Finding
from precisionaudit.report import github

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "..", "shared", "data", "sarif-schema-2.1.0.json")


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    """stdout and exit code of one scan of two models, in each format (one capture per format)."""
    directory = tmp_path_factory.mktemp("formats")
    write(directory, "hazard.py", HAZARD)
    write(directory, "pa_formats_helper.py", HELPER)
    write(directory, "via_helper.py", helper_model("pa_formats_helper"))
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        runner = CliRunner()
        out = {fmt: runner.invoke(main, ["scan", "--isolated", "--format", fmt, "hazard.py", "via_helper.py"])
               for fmt in ("sarif", "github", "json")}
    finally:
        os.chdir(cwd)
    return out


def _strict(text):
    def reject(constant):
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=reject)


def skip_unless_ci(reason: str):
    """Skip on a checkout without shared/; in CI (``CI`` set, as CI services do) fail instead:
    there a skipped schema check would pass silently."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must have it")
    pytest.skip(reason)


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_schema_fails_in_ci_and_skips_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="not found"):
        skip_unless_ci("SARIF schema not found")


def test_sarif_validates_against_the_sarif_2_1_0_schema(scanned):
    import jsonschema

    if not os.path.isfile(SCHEMA):
        skip_unless_ci(f"SARIF schema not found at {os.path.normpath(SCHEMA)} (shared/ beside the repo)")
    with open(SCHEMA) as fh:
        schema = json.load(fh)
    assert scanned["sarif"].exit_code == 1
    document = _strict(scanned["sarif"].stdout)  # -inf evidence must not leak as bare Infinity
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_sarif_results_carry_rule_level_location_module_and_fingerprint(scanned):
    run = _strict(scanned["sarif"].stdout)["runs"][0]
    report = json.loads(scanned["json"].stdout)
    by_path = {f["path"]: f for f in report["findings"]}
    results = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r for r in run["results"]}
    assert set(results) == {"hazard.py", "via_helper.py"}

    direct = results["hazard.py"]
    assert direct["ruleId"] == "PA107" and direct["level"] == "error"
    assert direct["locations"][0]["physicalLocation"]["region"] == {"startLine": HAZARD_LINE, "startColumn": 18}
    names = [loc["fullyQualifiedName"] for loc in direct["locations"][0]["logicalLocations"]]
    assert names[0] == "attn" and names[1].endswith(by_path["hazard.py"]["node"])
    assert direct["partialFingerprints"] == {"precisionaudit/v1": by_path["hazard.py"]["fingerprint"]}
    assert run["tool"]["driver"]["rules"][direct["ruleIndex"]]["id"] == "PA107"

    # the op of via_helper.py is in the helper module: no line in the model file, so no region
    indirect = results["via_helper.py"]["locations"][0]["physicalLocation"]
    assert "region" not in indirect and by_path["via_helper.py"]["line"] is None


def test_sarif_rules_carry_the_rule_documentation(scanned):
    rules = {r["id"]: r for r in _strict(scanned["sarif"].stdout)["runs"][0]["tool"]["driver"]["rules"]}
    with open(os.path.join(ROOT, "rules", "PA107.yaml")) as fh:
        doc = yaml.safe_load(fh)
    rule = rules["PA107"]
    assert rule["name"] == doc["name"]
    assert rule["shortDescription"]["text"] == doc["summary"]
    first_why_line = doc["doc"]["why"].strip().splitlines()[0]
    assert first_why_line in rule["help"]["text"] and first_why_line in rule["help"]["markdown"]
    assert doc["doc"]["good"].strip() in rule["help"]["markdown"]
    assert "PA001" in rules and rules["PA001"]["defaultConfiguration"]["level"] == "note"


def test_github_annotations_for_line_and_lineless_findings(scanned):
    assert scanned["github"].exit_code == 1
    lines = scanned["github"].stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("::error file=") for line in lines)
    direct = next(line for line in lines if "file=hazard.py" in line)
    assert direct.startswith(f"::error file=hazard.py,line={HAZARD_LINE},col=18,title=PA107 unrepresentable-constant::")
    assert "-1e+09" in direct
    indirect = next(line for line in lines if "file=via_helper.py" in line)
    assert "line=" not in indirect.split("::")[1]
    assert "pa_formats_helper.py%3A2" not in indirect and "pa_formats_helper.py:2" in indirect


def _finding(severity, message="m", path="m.py", line=3):
    return Finding(rule="PA105", name="exp-log-low-precision", severity=severity, path=path, line=line,
                   model=f"{path}:get_model", node="exp", op="exp", module="blocks.0", message=message)


@pytest.mark.parametrize("severity, command", [("error", "error"), ("warning", "warning"), ("info", "notice")])
def test_github_level_follows_severity(severity, command):
    out = github.annotations([], [_finding(severity)])
    assert out.startswith(f"::{command} file=m.py,line=3,title=PA105 exp-log-low-precision::")


def test_github_escapes_properties_and_message():
    out = github.annotations([], [_finding("error", message="100% over\nrange", path="a,b:c.py")])
    props, message = out.rstrip("\n").split("::")[1:3]
    assert props.startswith("error file=a%2Cb%3Ac.py,line=3,")
    assert message.startswith("100%25 over%0Arange")
    assert out.count("\n") == 1


def _sarif_rules(dtype):
    from precisionaudit.core.target import Target
    from precisionaudit.report import sarif

    run = sarif.report([], [], Target(dtype, "autocast", "cuda"))["runs"][0]
    return {r["id"]: r for r in run["tool"]["driver"]["rules"]}


def test_sarif_default_level_is_the_rules_severity_for_the_runs_dtype():
    """PA105 is an error in float16 and a warning in bfloat16 (its YAML severity)."""
    levels = {dtype: _sarif_rules(dtype)["PA105"]["defaultConfiguration"]["level"]
              for dtype in ("float16", "bfloat16")}
    assert levels == {"float16": "error", "bfloat16": "warning"}


def test_sarif_tags_each_rule_family():
    tags = {rule_id: r["properties"]["tags"] for rule_id, r in _sarif_rules("float16").items()}
    assert {tags[i][0] for i in ("PA301", "PA302", "PA303")} == {"measurement"}
    assert (tags["PA001"], tags["PA105"], tags["PA201"]) == (["suppression"], ["precision"], ["performance"])
