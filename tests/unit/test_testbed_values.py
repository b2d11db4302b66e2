"""testbed/values.yaml (the chart's values for the test-bed's node, docs/deploy.md "Try it
on the test-bed") against the chart's schema and the test-bed's own names: the images it
imports, the node address, the bucket; and the docs' blocks that test_docs_path.py runs. The
install itself: tests/testbed/test_docs_path.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from coworkgym.spec import SandboxSettings
from coworkgym_testbed import images
from coworkgym_testbed.pki import NODE_IP
from coworkgym_testbed.testbed import BUCKET
from tests.support.docs import docs_block

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cowork-gym"
VALUES = ROOT / "testbed" / "values.yaml"


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of values: maps merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def installed_values() -> dict[str, Any]:
    """What install-operator.sh hands helm: the chart's values, the file, the S3 relay."""
    relays = {
        "s3": {"endpoint": f"http://{NODE_IP}:40002"},
        "networkPolicy": {"objectStore": {"port": 40002}},
    }
    chart = yaml.safe_load((CHART / "values.yaml").read_text())
    return merged(merged(chart, yaml.safe_load(VALUES.read_text())), relays)


def test_the_testbed_values_pass_the_charts_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(installed_values(), schema)
    SandboxSettings.model_validate(installed_values()["sandbox"])


def test_the_testbed_values_name_what_the_testbed_has() -> None:
    values = yaml.safe_load(VALUES.read_text())
    image = values["operator"]["image"]
    assert f"{image['repository']}:{image['tag']}" == images.OPERATOR_IMAGE
    assert values["sandbox"]["image"] == images.ROLE_IMAGE
    # Preloaded images only: a pull would fail (the node reaches nothing beyond itself).
    assert image["pullPolicy"] == values["sandboxImagePullPolicy"] == "Never"
    assert values["networkPolicy"]["objectStore"]["cidr"] == f"{NODE_IP}/32"
    assert values["s3"]["releaseUri"].startswith(f"s3://{BUCKET}/")


def test_the_documented_commands_are_where_test_docs_path_reads_them() -> None:
    tried = docs_block("try").splitlines()
    assert tried[0] == "make testbed-up NODE=1"
    assert "make testbed-operator" in tried
    assert "kubectl apply -f examples/specs/weather-report.yaml" in tried
    # Complete: set for every outcome, so the wait never runs to its timeout on a Rejected one.
    waits = [line for line in tried if line.startswith("kubectl -n cowork-gym wait ")]
    assert waits and waits[0].startswith("kubectl -n cowork-gym wait --for=condition=Complete ")
    assert waits[0].endswith("cwe/weather-report-two-turns")
    cleanup = docs_block("clean-up").splitlines()
    # helm uninstall's hook deletes the environment while the operator still runs (its
    # finalizer needs one); the namespace then goes without waiting on anything.
    assert cleanup == [
        "helm uninstall cowork-gym -n cowork-gym --wait --timeout 5m",
        "kubectl delete namespace cowork-gym --timeout=120s",
    ]


def test_the_documented_campaign_block_runs_the_examples_and_ends() -> None:
    lines = docs_block("campaign").splitlines()
    assert "kubectl apply -f examples/campaigns/demo.yaml" in lines
    assert "kubectl apply -f examples/rollouts/oracle-nop.yaml" in lines
    # run as written: a watch (-w) would never return
    assert not any(" -w" in line.split("#")[0] for line in lines)
    waits = [line for line in lines if " wait --for=condition=Complete " in line]
    assert [w.split()[-1] for w in waits] == ["scamp/demo", "rb/demo-oracle-nop"]


def test_the_examples_name_the_namespace_the_docs_install_into() -> None:
    for path in sorted((ROOT / "examples" / "specs").glob("*.yaml")):
        assert yaml.safe_load(path.read_text())["metadata"]["namespace"] == "cowork-gym", path


# ---- a TrainingRun on the node (docs/deploy.md, "A TrainingRun on the test-bed") -----------
NODE_CPUS = 2.0


def cpus(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def test_a_training_pod_fits_on_the_node_beside_the_operator_the_gateway_and_a_rollout() -> None:
    """The chart's default (2 CPU per worker) never schedules on the node's two CPUs; the
    test-bed's values leave room for what runs beside a round's server or training pod."""
    values = installed_values()
    training = values["training"]
    beside = [
        values["operator"]["resources"]["requests"]["cpu"],
        values["gateway"]["resources"]["requests"]["cpu"],
        values["sandbox"]["resources"]["cpu"],  # one rollout pod (the example's concurrency)
    ]
    assert cpus(training["resources"]["cpu"]) + sum(map(cpus, beside)) <= NODE_CPUS
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["training"]["resources"]
    assert cpus(chart["cpu"]) + sum(map(cpus, beside)) > NODE_CPUS  # why the file sets it


def test_the_training_values_name_what_the_node_has() -> None:
    training = yaml.safe_load(VALUES.read_text())["training"]
    assert training["image"] == images.ROLE_IMAGE  # with the host checkout: no torch image
    assert training["ray"] == "off"  # no KubeRay on the node
    # the node's CoreDNS is a host process on the node address, not a pod
    assert training["networkPolicy"]["dns"]["ipBlocks"] == [f"{NODE_IP}/32"]
    script = (ROOT / "testbed" / "install-operator.sh").read_text()
    assert '--set training.hostCheckout="$PWD"' in script


def test_the_documented_training_run_uses_the_example_and_the_model_it_uploads() -> None:
    lines = docs_block("train").splitlines()
    example_path = "examples/training/smollm2-rounds.yaml"
    assert f"kubectl apply -f {example_path}" in lines
    run = yaml.safe_load((ROOT / example_path).read_text())
    upload = next(line for line in lines if " pretrained upload " in line)
    assert upload.split()[-2:] == ["smollm2-135m-instruct", run["spec"]["model"]]
    assert run["spec"]["model"].startswith(f"s3://{BUCKET}/")
    assert run["spec"]["rounds"] > 1
    # a round's rollouts reach its server only through the gateway
    assert any("--set gateway.enabled=true" in line for line in lines)
    # the environment the "try" block releases, in the namespace it installs into
    assert run["metadata"]["namespace"] == "cowork-gym"
    assert run["spec"]["rollout"]["environments"]["names"] == ["weather-report-two-turns"]
    assert "cwe/weather-report-two-turns" in docs_block("try")
    name = run["metadata"]["name"]
    assert f"kubectl -n cowork-gym wait --for=condition=Complete --timeout=3600s tr/{name}" in lines
