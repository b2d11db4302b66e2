"""Chart tooling: helm lint/template/install and kubeconform with schemas from the API server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed
FIXTURES = Path(__file__).parent / "fixtures"
CHART = str(FIXTURES / "chart")


def test_helm_lint(testbed: Testbed) -> None:
    cp = testbed.helm("lint", "--strict", CHART)
    assert "1 chart(s) linted, 0 chart(s) failed" in cp.stdout


def test_helm_template_passes_kubeconform(testbed: Testbed) -> None:
    rendered = testbed.helm("template", "demo", CHART).stdout
    cp = testbed.kubeconform(
        "-strict",
        "-summary",
        "-output",
        "json",
        "-schema-location",
        testbed.kubeconform_schema_location(),
        "-",
        input=rendered,
    )
    summary = json.loads(cp.stdout)["summary"]
    assert summary == {"valid": 3, "invalid": 0, "errors": 0, "skipped": 0}


def test_kubeconform_rejects_bad_manifests(testbed: Testbed) -> None:
    loc = testbed.kubeconform_schema_location()
    cp = testbed.kubeconform(
        "-strict", "-schema-location", loc, str(FIXTURES / "bad-deployment.yaml"), check=False
    )
    assert cp.returncode == 1
    assert "replica" in cp.stdout and "replicas" in cp.stdout

    # A kind no schema describes is an error too, not a silent pass.
    unknown = "apiVersion: nowhere.test/v1\nkind: Ghost\nmetadata: {name: g}\n"
    cp = testbed.kubeconform("-schema-location", loc, "-", input=unknown, check=False)
    assert cp.returncode == 1
    assert "could not find schema" in cp.stdout


def test_kubeconform_knows_crds(testbed: Testbed, widgets_crd: str) -> None:
    loc = testbed.kubeconform_schema_location(refresh=True)  # pick up the CRD
    ok = testbed.kubeconform(
        "-strict", "-schema-location", loc, str(FIXTURES / "widget-ok.yaml"), check=False
    )
    assert ok.returncode == 0, ok.stdout
    bad = testbed.kubeconform(
        "-strict", "-schema-location", loc, str(FIXTURES / "widget-bad-type.yaml"), check=False
    )
    assert bad.returncode == 1
    assert "size" in bad.stdout


def test_helm_install_against_the_api_server(testbed: Testbed, testbed_namespace: str) -> None:
    ns = testbed_namespace
    testbed.helm("install", "demo", CHART, "-n", ns)
    deploy = json.loads(testbed.kubectl("get", "deployment", "demo", "-n", ns, "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 1
    releases = json.loads(testbed.helm("list", "-n", ns, "-o", "json").stdout)
    assert [r["name"] for r in releases] == ["demo"]
    testbed.helm("uninstall", "demo", "-n", ns)
    assert testbed.kubectl("get", "deployment", "demo", "-n", ns, check=False).returncode != 0
