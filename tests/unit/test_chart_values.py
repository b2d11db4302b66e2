"""The Helm chart's values, schema, example and rule file against the Python models they
mirror (no cluster, no helm): the pydantic models are the source of truth."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from coworkgym.spec import SandboxSettings, parse_spec_document
from coworkgym.taxonomy import validate_labels
from coworkgym_operator.core.settings import OperatorSettings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cowork-gym"
RULES = CHART / "rules" / "coworkgym-alerts.yaml"
THRESHOLD_MARK = re.compile(r"(?m)([0-9][0-9.]*)[ \t]*#[ \t]*threshold:[ \t]*(\w+)[ \t]*$")

Schema = dict[str, Any]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    loaded: dict[str, Any] = load_yaml(CHART / "values.yaml")
    return loaded


@pytest.fixture(scope="module")
def schema() -> Schema:
    loaded: Schema = json.loads((CHART / "values.schema.json").read_text())
    return loaded


# ---- the sandbox block is SandboxSettings ------------------------------------------------


def test_the_sandbox_values_are_valid_sandbox_settings(values: dict[str, Any]) -> None:
    settings = SandboxSettings.model_validate(values["sandbox"])
    # Every key round-trips: nothing in values.yaml is silently dropped or renamed.
    assert settings.model_dump(mode="json", by_alias=True) == values["sandbox"]


def test_the_default_sandbox_image_follows_the_app_version(values: dict[str, Any]) -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    assert values["sandbox"]["image"].rsplit(":", 1)[1] == chart["appVersion"]
    # the spec leaves the image unset (SandboxSettings().image is None): the operator's wins
    assert SandboxSettings().image is None
    assert values["sandbox"]["image"] == OperatorSettings().role_image


def _normalized(node: Schema, defs: dict[str, Schema]) -> Schema:
    """A schema node reduced to what validates: refs inlined, titles/defaults/descriptions
    dropped, and `X or null` written one way (pydantic's anyOf, or a type list)."""
    if "$ref" in node:
        return _normalized(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    nullable = False
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        (only,) = options
        node = {**only, **{k: v for k, v in node.items() if k != "anyOf"}}
    out: Schema = {}
    kind = node.get("type")
    if isinstance(kind, list):
        nullable = nullable or "null" in kind
        (kind,) = [t for t in kind if t != "null"]
    if kind:
        out["type"] = kind
    if "enum" in node:
        nullable = nullable or None in node["enum"]
        out["enum"] = sorted(v for v in node["enum"] if v is not None)
    out["nullable"] = nullable
    if "properties" in node:
        out["properties"] = {k: _normalized(v, defs) for k, v in node["properties"].items()}
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _normalized(node["additionalProperties"], defs)
    elif "additionalProperties" in node:
        out["additionalProperties"] = node["additionalProperties"]
    if "items" in node:
        out["items"] = _normalized(node["items"], defs)
    return out


def test_the_schema_sandbox_section_matches_the_pydantic_model(schema: Schema) -> None:
    model = SandboxSettings.model_json_schema(by_alias=True)
    want = _normalized(model, model.get("$defs", {}))
    # A spec may leave these unset (null = the operator's); the chart is where they are set.
    for field in (
        want["properties"]["image"],
        *want["properties"]["resources"]["properties"].values(),
    ):
        field["nullable"] = False
    got = _normalized(schema["properties"]["sandbox"], schema.get("definitions", {}))
    assert got == want


def test_the_schema_sandbox_section_has_the_model_field_names(schema: Schema) -> None:
    """The same as above, spelled out for the field names (camelCase on the wire)."""
    section = schema["properties"]["sandbox"]
    model = SandboxSettings.model_json_schema(by_alias=True)
    assert list(section["properties"]) == list(model["properties"])
    toleration = model["$defs"]["Toleration"]["properties"]
    assert list(section["properties"]["tolerations"]["items"]["properties"]) == list(toleration)
    resources = model["$defs"]["ResourceRequirements"]["properties"]
    assert list(section["properties"]["resources"]["properties"]) == list(resources)


@pytest.mark.parametrize(
    "sandbox",
    [
        {"runtimeClassName": "gvisor", "nodeSelector": {"pool": "sandbox"}},
        {"tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]},
        {"resources": {"cpu": "2", "memory": "4Gi"}, "runtimeClassName": None},
        {"tolerations": [{"key": "gpu", "value": "no", "effect": None}]},
    ],
    ids=["gvisor-pool", "toleration", "resources", "null-effect"],
)
def test_schema_and_model_both_accept(schema: Schema, sandbox: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(schema["properties"]["sandbox"]).validate(sandbox)
    SandboxSettings.model_validate(sandbox)


@pytest.mark.parametrize(
    "sandbox",
    [
        {"image": ["a", "b"]},
        {"runtimeClass": "gvisor"},  # not a field
        {"resources": {"cpu": "1", "gpu": "1"}},
        {"resources": {"cpu": 1}},  # quantities are strings, as in the CRD
        {"tolerations": [{"key": "x", "operator": "In"}]},
        {"tolerations": [{"key": "x", "effect": "Evict"}]},
        {"nodeSelector": {"pool": 1}},
    ],
    ids=[
        "image-list",
        "unknown-field",
        "unknown-resource",
        "numeric-cpu",
        "bad-operator",
        "bad-effect",
        "int",
    ],
)
def test_schema_and_model_both_reject(schema: Schema, sandbox: dict[str, Any]) -> None:
    validator = jsonschema.Draft7Validator(
        schema["properties"]["sandbox"] | {"definitions": schema.get("definitions", {})}
    )
    assert list(validator.iter_errors(sandbox)), "values.schema.json accepted it"
    with pytest.raises(ValueError):
        SandboxSettings.model_validate(sandbox)


# ---- values.yaml and values.schema.json --------------------------------------------------


def test_the_schema_is_valid_draft_7(schema: Schema) -> None:
    jsonschema.Draft7Validator.check_schema(schema)


def test_the_default_values_pass_the_schema(schema: Schema, values: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(schema).validate(values)


@pytest.mark.parametrize(
    "change",
    [
        {"replicaCount": 2},
        {"operator": {"replica": 2}},
        {"networkPolicy": {"gateway": {"port": "8000"}}},
        {"metrics": {"prometheusRule": {"thresholds": {"failureRatio": 1.5}}}},
        {"s3": {"releaseUri": "https://bucket/envs"}},
        {"grafana": {"url": "grafana.example.com"}},
        {"grafana": {"dashboard": {"sidecarLabel": "grafana dashboard"}}},
        {"grafana": {"dashboard": {"sidecarLabelValue": 1}}},
    ],
    ids=[
        "unknown-top-level",
        "misspelled",
        "port-as-string",
        "ratio-above-1",
        "not-s3",
        "grafana-url-without-scheme",
        "label-key-with-space",
        "label-value-not-a-string",
    ],
)
def test_the_schema_rejects_mistakes(
    schema: Schema, values: dict[str, Any], change: dict[str, Any]
) -> None:
    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {**base, **{k: merge(base.get(k), v) for k, v in over.items()}}
        return over

    errors = list(jsonschema.Draft7Validator(schema).iter_errors(merge(values, change)))
    assert errors


def test_every_values_key_is_in_the_schema(schema: Schema, values: dict[str, Any]) -> None:
    """additionalProperties: false already makes unknown keys fail; this makes sure no
    section slipped through as a free-form object by accident."""
    free_form = {
        "global",
        "operator.resources",
        "gateway.resources",
        "operator.podAnnotations",
        "operator.podLabels",
        "operator.nodeSelector",
        "operator.affinity",
        "serviceAccount.annotations",
        "sandbox.nodeSelector",
        "training.nodeSelector",
        "training.networkPolicy.dns.podSelector",
        "training.networkPolicy.kuberay.podSelector",
        "networkPolicy.gateway.podSelector",
        "networkPolicy.gateway.dns.podSelector",
        "networkPolicy.objectStore.dns.podSelector",
        "metrics.service.annotations",
        "metrics.serviceMonitor.labels",
        "metrics.prometheusRule.labels",
        "grafana.dashboard.labels",
        "grafana.dashboard.annotations",
    }
    defs = schema["definitions"]

    def walk(node: Schema, value: Any, path: str) -> None:
        node = defs[node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node
        if not isinstance(value, dict) or path in free_form:
            return
        assert node.get("additionalProperties") is False, f"{path or '<root>'} is not strict"
        for key, sub in value.items():
            walk(node["properties"][key], sub, f"{path}.{key}".lstrip("."))

    walk(schema, values, "")


# ---- the example CoworkEnvironment -------------------------------------------------------


def test_the_example_is_a_valid_environment_spec() -> None:
    path = CHART / "examples" / "coworkenvironment.yaml"
    named = parse_spec_document(load_yaml(path), str(path))
    assert named.name == "weather-report-demo"
    assert validate_labels(named.spec.task.labels) == []
    uri = named.spec.release.uri
    assert uri is not None and uri.startswith("s3://")  # the CRD's CEL rule


# ---- the rule file and its thresholds ----------------------------------------------------


def test_every_threshold_marker_has_a_value_and_the_same_default(values: dict[str, Any]) -> None:
    marks: dict[str, set[float]] = {}
    for number, name in THRESHOLD_MARK.findall(RULES.read_text()):
        marks.setdefault(name, set()).add(float(number))
    thresholds = values["metrics"]["prometheusRule"]["thresholds"]
    assert set(marks) == set(thresholds)
    for name, numbers in marks.items():
        assert numbers == {float(thresholds[name])}, name


def test_the_rule_file_has_the_alerts_the_chart_promises() -> None:
    groups = load_yaml(RULES)["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {r["alert"] for r in rules if "alert" in r} == {
        "CoworkGymSynthesisFailureRateHigh",
        "CoworkGymReviseBudgetExhaustedOften",
        "CoworkGymSandboxJobsFailing",
        "CoworkGymReconcileErrors",
        "CoworkGymOperatorDown",
        "CoworkGymRolloutInvalidRateHigh",
        "CoworkGymUserSimulatorFaultsHigh",
        "CoworkGymCampaignFailureRateHigh",
        "CoworkGymTrainingRunFailed",
        "CoworkGymTrainingNoProgress",
        "CoworkGymTrainingNaNLoss",
    }
    assert {r["record"] for r in rules if "record" in r} == {
        "coworkgym:synthesis_failure_ratio:rate30m",
        "coworkgym:rollout_invalid_ratio:rate30m",
        "coworkgym:rollout_simulator_fault_ratio:rate30m",
    }
    for rule in rules:
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
            assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]


def test_the_rules_use_only_metrics_the_operator_exports() -> None:
    from coworkgym_operator.campaign import metrics as _campaigns  # noqa: F401 - registers them
    from coworkgym_operator.core.metrics import REGISTRY
    from coworkgym_operator.environment import metrics  # noqa: F401 - registers them
    from coworkgym_operator.rollouts import metrics as _rollouts  # noqa: F401 - registers them
    from coworkgym_operator.training import metrics as _training  # noqa: F401 - registers them

    exported = set()
    for collector in REGISTRY._names_to_collectors.values():
        for family in collector.describe():
            exported.add(family.name)
            if family.type == "counter":
                exported.add(f"{family.name}_total")
    used = set(re.findall(r"\b(coworkgym_[a-z_]+)\b", RULES.read_text()))
    assert used and used <= exported, used - exported


def test_the_alert_rules_match_the_operators_metrics_job() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    job = re.search(r'define "cowork-gym.metricsJob" -}}\s*(\S+)', helpers)
    assert job is not None
    jobs = set(re.findall(r'job="([^"]+)"', RULES.read_text()))
    assert jobs == {job.group(1)}


# ---- what the Deployment passes to the operator ------------------------------------------

DEPLOYMENT = (CHART / "templates" / "deployment.yaml").read_text()
CHART_ENV = sorted(set(re.findall(r"name: (COWORKGYM_[A-Z0-9_]+)", DEPLOYMENT)))
NOT_READ_YET: dict[str, str] = {}  # variable → why the operator ignores it (none today)


@pytest.mark.parametrize(
    "variable",
    [
        pytest.param(v, marks=pytest.mark.xfail(reason=NOT_READ_YET[v], strict=True))
        if v in NOT_READ_YET
        else v
        for v in CHART_ENV
    ],
)
def test_the_operator_reads_each_variable_the_chart_sets(variable: str) -> None:
    sources = "\n".join(
        p.read_text() for p in (ROOT / "operator" / "coworkgym_operator").rglob("*.py")
    )
    assert re.search(rf"['\"]{variable}['\"]", sources), f"nothing reads {variable}"


# ---- kind-config.yaml --------------------------------------------------------------------


def test_the_kind_cluster_has_a_worker_for_sandboxes() -> None:
    config = load_yaml(ROOT / "kind-config.yaml")
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    roles = [node["role"] for node in config["nodes"]]
    assert roles == ["control-plane", "worker"]
    (label,) = config["nodes"][1]["labels"].items()
    # docs/deploy.md points the sandbox nodeSelector at this label.
    assert f"{label[0]}: {json.dumps(label[1])}" in (ROOT / "docs" / "deploy.md").read_text()
