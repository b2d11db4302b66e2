"""The chart's Grafana dashboard as helm renders it (grafana.dashboard.enabled): a ConfigMap
for the Grafana sidecar holding dashboards/cowork-gym.json as it is, and (grafana.url) a
dashboard_url on every alert, which promtool expands per alert in the chart's own rule
tests. The dashboard's queries themselves: tests/unit/test_chart_dashboard.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkgym_testbed.testbed import Testbed
from tests.testbed.test_chart import (
    CHART,
    MONITORING,
    RULE_TESTS,
    RULES,
    by_kind,
    kube_version,
    one,
    render,
    rule_count,
)

pytestmark = pytest.mark.testbed
__all__ = ["kube_version"]  # the fixture, used by name

DASHBOARD = CHART / "dashboards" / "cowork-gym.json"
RULES_ON = ["--api-versions", MONITORING, "--set", "metrics.prometheusRule.enabled=true"]
GRAFANA = "https://grafana.example.com"


def dashboards(docs: list[Any]) -> list[Any]:
    return [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]


def alerts(rule: Any) -> list[Any]:
    return [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]


def test_no_dashboard_and_no_links_by_default(testbed: Testbed, kube_version: str) -> None:
    docs = render(testbed, kube_version, *RULES_ON)
    assert not dashboards(docs)
    assert all("dashboard_url" not in a["annotations"] for a in alerts(one(docs, "PrometheusRule")))


def test_the_configmap_carries_the_dashboard_and_the_sidecar_label(
    testbed: Testbed, kube_version: str
) -> None:
    (configmap,) = dashboards(
        render(testbed, kube_version, "--set", "grafana.dashboard.enabled=true")
    )
    meta = configmap["metadata"]
    assert (meta["name"], meta["namespace"]) == ("demo-cowork-gym-dashboard", "gym")
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert meta["labels"]["app.kubernetes.io/part-of"] == "cowork-gym"
    assert "annotations" not in meta
    (key,) = configmap["data"]
    assert key == "cowork-gym.json"
    assert json.loads(configmap["data"][key]) == json.loads(DASHBOARD.read_text())

    (configmap,) = dashboards(
        render(
            testbed, kube_version,
            "--set", "grafana.dashboard.enabled=true",
            "--set", "grafana.dashboard.namespace=monitoring",
            "--set", "grafana.dashboard.sidecarLabel=example.com/dashboard",
            "--set", "grafana.dashboard.sidecarLabelValue=cowork",
            "--set", "grafana.dashboard.labels.team=ml",
            "--set", "grafana.dashboard.annotations.grafana_folder=Cowork-Gym",
        )
    )  # fmt: skip
    meta = configmap["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["example.com/dashboard"] == "cowork"
    assert "grafana_dashboard" not in meta["labels"]
    assert meta["labels"]["team"] == "ml"
    assert meta["annotations"] == {"grafana_folder": "Cowork-Gym"}


def test_the_values_schema_refuses_a_grafana_url_without_scheme(
    testbed: Testbed, kube_version: str
) -> None:
    cp = testbed.helm(
        "template", "demo", str(CHART), "--kube-version", kube_version,
        "--set", "grafana.url=grafana.example.com", check=False,
    )  # fmt: skip
    assert cp.returncode != 0 and "grafana" in cp.stderr


def test_every_alert_links_to_the_dashboard_at_its_namespace(
    testbed: Testbed, kube_version: str, tmp_path: Path
) -> None:
    uid = json.loads(DASHBOARD.read_text())["uid"]
    docs = render(testbed, kube_version, *RULES_ON, "--set", f"grafana.url={GRAFANA}/")
    rule = one(docs, "PrometheusRule")
    link = f"{GRAFANA}/d/{uid}" + "{{ with $labels.namespace }}?var-namespace={{ . }}{{ end }}"
    assert alerts(rule) and all(a["annotations"]["dashboard_url"] == link for a in alerts(rule))
    records = [r for g in rule["spec"]["groups"] for r in g["rules"] if "record" in r]
    assert records and all("annotations" not in r for r in records)

    # promtool expands the link for each alert it fires: the chart's rule tests, each fired
    # alert also expecting its link (with ?var-namespace= only where it has a namespace).
    rendered = tmp_path / "rendered-rules.yaml"
    rendered.write_text(yaml.safe_dump(rule["spec"]))
    cp = testbed.promtool("check", "rules", str(rendered))
    assert f"SUCCESS: {rule_count()} rules found" in cp.stdout
    expected_namespaces = set()
    test_files = []
    for path in RULE_TESTS:
        tests = yaml.safe_load(path.read_text())
        assert tests["rule_files"] == [f"../{RULES.name}"]
        tests["rule_files"] = [str(rendered)]
        for test in tests["tests"]:
            for check in test.get("alert_rule_test", []):
                for alert in check["exp_alerts"]:
                    namespace = alert["exp_labels"].get("namespace")
                    expected_namespaces.add(namespace)
                    query = f"?var-namespace={namespace}" if namespace else ""
                    # a copy: the files share annotations between alerts (YAML anchors)
                    alert["exp_annotations"] = copy.deepcopy(alert["exp_annotations"])
                    alert["exp_annotations"]["dashboard_url"] = f"{GRAFANA}/d/{uid}{query}"
        test_files.append(tmp_path / path.name)
        test_files[-1].write_text(yaml.safe_dump(tests))
    assert None in expected_namespaces and len(expected_namespaces) > 1  # both link forms
    cp = testbed.promtool("test", "rules", *map(str, test_files))
    assert cp.stdout.count("SUCCESS") == len(RULE_TESTS), cp.stdout
