"""The cowork-gym Helm chart on the test-bed: lint, schema validation of every rendered
object (kubeconform with schemas from the test-bed's API server), a real install and
uninstall (RBAC, NetworkPolicies, kopf peering; pods stay Pending: there is no node), and
the alert rules it ships under promtool."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed
# No node runs pods here, so `helm uninstall` skips the pre-delete hook's Job (it would wait
# for a pod that never starts); tests/testbed/test_docs_path.py runs it on the node, and
# test_uninstall.py what it does.
NO_NODE = ("--wait", "--no-hooks")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cowork-gym"
EXAMPLE = CHART / "examples" / "coworkenvironment.yaml"
RULES = CHART / "rules" / "coworkgym-alerts.yaml"
RULE_TESTS = sorted((CHART / "rules" / "tests").glob("*.yaml"))
KOPF_CRDS = CHART / "charts" / "kopf-peering" / "crds"
KOPF_CRD_NAMES = ("kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev")
MONITORING = "monitoring.coreos.com/v1"
# Kinds the test-bed has no schema for: the Prometheus Operator's CRDs are not installed.
NO_SCHEMA_KINDS = ("ServiceMonitor", "PrometheusRule")
EVERYTHING_ON = [
    "--set", "metrics.serviceMonitor.enabled=true",
    "--set", "metrics.prometheusRule.enabled=true",
    "--set-json", "operator.replicas=2",
    "--set", "networkPolicy.gateway.dns.enabled=true",
    "--set", "networkPolicy.gateway.namespace=llm",
    "--set", "networkPolicy.gateway.ipBlocks={10.20.0.0/16}",
    "--set", "sandbox.runtimeClassName=gvisor",
    "--set", "sandbox.nodeSelector.pool=sandbox",
    "--set", "s3.endpoint=http://minio.storage:9000",
    "--set", "s3.releaseUri=s3://cowork-gym/envs",
    "--set", "s3.credentialsSecret=cowork-gym-s3",
    "--set", "sandboxVolumes.storageClassName=fast",
    "--set", "grafana.dashboard.enabled=true",
    "--set", "grafana.url=https://grafana.example.com",
]  # fmt: skip


# ---- helpers -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kube_version(testbed: Testbed) -> str:
    """The API server's version: `helm template` must not guess it (the chart has a
    kubeVersion constraint, and a helm built without version ldflags assumes v1.20)."""
    out = json.loads(testbed.kubectl("version", "-o", "json").stdout)
    return str(out["serverVersion"]["gitVersion"])


def render(testbed: Testbed, kube_version: str, *args: str, ns: str = "gym") -> list[Any]:
    out = testbed.helm(
        "template", "demo", str(CHART), "-n", ns, "--kube-version", kube_version, *args
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def by_kind(docs: list[Any], kind: str) -> list[Any]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Any], kind: str) -> Any:
    (found,) = by_kind(docs, kind)
    return found


def get(testbed: Testbed, *args: str) -> Any:
    return json.loads(testbed.kubectl("get", *args, "-o", "json").stdout)


def exists(testbed: Testbed, *args: str) -> bool:
    return testbed.kubectl("get", *args, check=False).returncode == 0


def can_i(testbed: Testbed, account: str, *args: str) -> bool:
    cp = testbed.kubectl("auth", "can-i", "--as", account, *args, check=False)
    return cp.stdout.strip() == "yes"


def wait_for(what: str, check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def chart_crds(testbed: Testbed) -> None:
    """The CRDs the rendered objects need a schema for: the chart's CoworkEnvironment and
    kopf's KopfPeering/ClusterKopfPeering (the kopf-peering subchart's)."""
    for crds in (CHART / "crds", KOPF_CRDS):
        testbed.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    for name in (*KOPF_CRD_NAMES, "coworkenvironments.coworkgym.dev"):
        testbed.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")


@pytest.fixture
def release(testbed: Testbed, testbed_namespace: str) -> Iterator[tuple[str, str]]:
    """A release name and namespace; uninstalled after the test if the test did not."""
    yield "gym", testbed_namespace
    testbed.helm("uninstall", "gym", "-n", testbed_namespace, *NO_NODE, check=False)


# ---- lint and render ---------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["lint", "lint-strict"])
def test_helm_lint(testbed: Testbed, kube_version: str, strict: bool) -> None:
    flags = ["--strict"] if strict else []
    for values in ([], EVERYTHING_ON, ["--set", "operator.clusterWide=true"]):
        cp = testbed.helm("lint", *flags, "--kube-version", kube_version, str(CHART), *values)
        assert "1 chart(s) linted, 0 chart(s) failed" in cp.stdout, cp.stdout
        assert "[WARNING]" not in cp.stdout and "[ERROR]" not in cp.stdout, cp.stdout


def test_rendered_chart_passes_kubeconform(
    testbed: Testbed, kube_version: str, chart_crds: None
) -> None:
    location = testbed.kubeconform_schema_location(refresh=True)  # with the CRDs above
    for values in (
        ["--api-versions", MONITORING, *EVERYTHING_ON],
        [],
        ["--set", "operator.clusterWide=true", "--set", "sandboxNamespaces={team-a,team-b}"],
        ["--set", "operator.peering.enabled=false", "--set", "networkPolicy.enabled=false"],
    ):
        rendered = testbed.helm(
            "template", "demo", str(CHART), "-n", "gym", "--kube-version", kube_version,
            "--include-crds", *values,
        ).stdout  # fmt: skip
        kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
        cp = testbed.kubeconform(
            "-strict", "-summary", "-output", "json", "-schema-location", location,
            "-skip", ",".join(NO_SCHEMA_KINDS), "-", input=rendered, check=False,
        )  # fmt: skip
        result = json.loads(cp.stdout)
        assert cp.returncode == 0, result["resources"]
        skipped = sum(kinds.count(k) for k in NO_SCHEMA_KINDS)
        assert result["summary"] == {
            "valid": len(kinds) - skipped,
            "invalid": 0,
            "errors": 0,
            "skipped": skipped,
        }, values

    # Only those kinds lack a schema: without -skip they, and nothing else, are errors.
    rendered = testbed.helm(
        "template", "demo", str(CHART), "--kube-version", kube_version,
        "--api-versions", MONITORING, *EVERYTHING_ON,
    ).stdout  # fmt: skip
    cp = testbed.kubeconform(
        "-strict", "-output", "json", "-schema-location", location, "-", input=rendered,
        check=False,
    )  # fmt: skip
    errors = {r["kind"] for r in json.loads(cp.stdout)["resources"] if r["status"] != "statusValid"}
    assert errors == set(NO_SCHEMA_KINDS)


def test_the_example_passes_the_crd_schema(
    testbed: Testbed, chart_crds: None, testbed_namespace: str
) -> None:
    location = testbed.kubeconform_schema_location(refresh=True)
    testbed.kubeconform("-strict", "-schema-location", location, str(EXAMPLE))
    # The API server's own check, CEL rules included.
    cp = testbed.kubectl("apply", "--dry-run=server", "-n", testbed_namespace, "-f", str(EXAMPLE))
    assert "coworkenvironment.coworkgym.dev/weather-report-demo created (server dry run)" in (
        cp.stdout
    )
    broken = yaml.safe_load(EXAMPLE.read_text())
    broken["spec"]["release"]["uri"] = "/tmp/envs"
    cp = testbed.kubectl(
        "apply", "--dry-run=server", "-n", testbed_namespace, "-f", "-",
        input=yaml.safe_dump(broken), check=False,
    )  # fmt: skip
    assert cp.returncode != 0 and "spec.release.uri" in cp.stderr


def test_monitoring_objects_need_the_prometheus_operator_api(
    testbed: Testbed, kube_version: str
) -> None:
    asked = ["--set", "metrics.serviceMonitor.enabled=true"]
    asked += ["--set", "metrics.prometheusRule.enabled=true"]
    without = render(testbed, kube_version, *asked)
    assert not by_kind(without, "ServiceMonitor") and not by_kind(without, "PrometheusRule")
    served = render(testbed, kube_version, *asked, "--api-versions", MONITORING)
    monitor = one(served, "ServiceMonitor")
    service = one(served, "Service")
    assert monitor["spec"]["jobLabel"] in service["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert not by_kind(
        render(testbed, kube_version, "--api-versions", MONITORING), "ServiceMonitor"
    )


def test_contradictory_values_fail_to_render(testbed: Testbed, kube_version: str) -> None:
    cp = testbed.helm(
        "template", "demo", str(CHART), "--kube-version", kube_version,
        "--set-json", "operator.replicas=2", "--set", "operator.peering.enabled=false",
        check=False,
    )  # fmt: skip
    assert cp.returncode != 0 and "needs operator.peering.enabled=true" in cp.stderr
    cp = testbed.helm(
        "template", "demo", str(CHART), "--kube-version", kube_version,
        "--set", "sandboxNamespaces={team-a}", check=False,
    )  # fmt: skip
    assert cp.returncode != 0 and "needs operator.clusterWide=true" in cp.stderr
    docs = render(testbed, kube_version, "--set", "operator.peering.enabled=false")
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--standalone" in container["args"] and "command" not in container
    assert one(docs, "Deployment")["spec"]["strategy"]["type"] == "Recreate"


def test_the_values_reach_the_operator(testbed: Testbed, kube_version: str) -> None:
    docs = render(testbed, kube_version, *EVERYTHING_ON)
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["COWORKGYM_SANDBOX_DEFAULTS"]) == {
        "image": "ghcr.io/cowork-gym/role-sandbox:0.1.0",
        "resources": {"cpu": "1", "memory": "2Gi"},
        "runtimeClassName": "gvisor",
        "nodeSelector": {"pool": "sandbox"},
        "tolerations": [],
    }
    assert env["COWORKGYM_SANDBOX_SA"] == "demo-cowork-gym-sandbox"
    assert env["COWORKGYM_GATEWAY_SELECTOR"] == "app=llm-gateway"
    assert env["COWORKGYM_S3_SECRET"] == "cowork-gym-s3"
    assert env["COWORKGYM_RELEASE_URI"] == "s3://cowork-gym/envs"
    assert env["COWORKGYM_STORAGE_CLASS"] == "fast"
    assert container["args"][:3] == [
        "--namespace=gym",
        "--peering=demo-cowork-gym",
        "--liveness=http://0.0.0.0:8081/healthz",
    ]
    # Each replica's kopf priority comes from its pod name (a tie pauses all of them).
    script = container["command"][2]
    assert "--priority=" in script and "$$(" in script and script.startswith("exec python -m")


def test_the_uninstall_hook_may_touch_the_four_kinds_only(
    testbed: Testbed, kube_version: str
) -> None:
    docs = [
        d
        for d in render(testbed, kube_version)
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "uninstall"
    ]
    assert sorted(d["kind"] for d in docs) == ["Job", "Role", "RoleBinding", "ServiceAccount"]
    assert all(d["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete" for d in docs)
    (rule,) = one(docs, "Role")["rules"]
    assert rule == {
        "apiGroups": ["coworkgym.dev"],
        "resources": ["coworkenvironments", "rolloutbatches", "synthesiscampaigns", "trainingruns"],
        "verbs": ["get", "list", "delete", "patch"],
    }
    pod = one(docs, "Job")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "demo-cowork-gym-uninstall"
    assert pod["containers"][0]["command"] == [
        "python", "-m", "coworkgym_operator.uninstall", "--namespace=gym", "--timeout=120",
    ]  # fmt: skip
    wide = render(testbed, kube_version, "--set", "operator.clusterWide=true",
                  "--set", "uninstall.deleteResources=false")  # fmt: skip
    job = next(d for d in by_kind(wide, "Job") if d["metadata"]["name"].endswith("-uninstall"))
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][3:] == [
        "--all-namespaces", "--timeout=120", "--keep",
    ]  # fmt: skip
    assert any(d["metadata"]["name"] == "gym-demo-cowork-gym-uninstall"
               for d in by_kind(wide, "ClusterRole"))  # fmt: skip
    off = render(testbed, kube_version, "--set", "uninstall.hook=false")
    assert not [d for d in off if d["metadata"]["name"].endswith("-uninstall")]


# ---- the alert rules ---------------------------------------------------------------------


def rule_count() -> int:
    """The rules of the file (every group's), as promtool counts them."""
    return sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])


def test_promtool_check_rules(testbed: Testbed) -> None:
    cp = testbed.promtool("check", "rules", str(RULES))
    assert f"SUCCESS: {rule_count()} rules found" in cp.stdout


def test_promtool_unit_tests_fire_and_hold_every_alert(testbed: Testbed) -> None:
    assert RULE_TESTS
    cp = testbed.promtool("test", "rules", *map(str, RULE_TESTS))
    assert "SUCCESS" in cp.stdout
    # Each alert has a scenario where it fires and one where it must stay quiet.
    tests = [t for f in RULE_TESTS for t in yaml.safe_load(f.read_text())["tests"]]
    checks = [c for t in tests for c in t.get("alert_rule_test", [])]
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
              if "alert" in r}  # fmt: skip
    for alert in alerts:
        mine = [c for c in checks if c["alertname"] == alert]
        assert any(c["exp_alerts"] for c in mine), f"{alert} never fires"
        assert any(not c["exp_alerts"] for c in mine), f"{alert} never holds"


def test_the_prometheus_rule_ships_the_rule_file(
    testbed: Testbed, kube_version: str, tmp_path: Path
) -> None:
    on = ["--api-versions", MONITORING, "--set", "metrics.prometheusRule.enabled=true"]
    shipped = one(render(testbed, kube_version, *on), "PrometheusRule")["spec"]
    assert shipped == yaml.safe_load(RULES.read_text())  # exactly the file, by default

    tuned = one(
        render(
            testbed, kube_version, *on,
            "--set-json", "metrics.prometheusRule.thresholds.failureRatio=0.35",
            "--set-json", "metrics.prometheusRule.thresholds.minFinished=20",
        ),
        "PrometheusRule",
    )["spec"]  # fmt: skip
    exprs = {r.get("alert") or r["record"]: r["expr"] for g in tuned["groups"] for r in g["rules"]}
    failure = exprs["CoworkGymSynthesisFailureRateHigh"]
    assert "> 0.35 # threshold: failureRatio" in failure
    assert ">= 20 # threshold: minFinished" in failure
    assert ">= 20 # threshold: minFinished" in exprs["CoworkGymReviseBudgetExhaustedOften"]
    # What the chart renders is still a valid rule file.
    rendered = tmp_path / "rendered-rules.yaml"
    rendered.write_text(yaml.safe_dump(tuned))
    assert f"SUCCESS: {rule_count()} rules found" in testbed.promtool(
        "check", "rules", str(rendered)
    ).stdout


# ---- install on the API server -----------------------------------------------------------


def test_install_creates_a_locked_down_operator(testbed: Testbed, release: tuple[str, str]) -> None:
    name, ns = release
    # The operator's pod must meet the "restricted" Pod Security Standard.
    testbed.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    testbed.helm("install", name, str(CHART), "-n", ns, "--wait=false")
    fullname = f"{name}-cowork-gym"

    deploy = get(testbed, "deployment", fullname, "-n", ns)
    assert deploy["spec"]["replicas"] == 1
    pod_spec = deploy["spec"]["template"]["spec"]
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod_spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["port"] == "health"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 8080,
        "health": 8081,
    }

    # The ReplicaSet's pod passes admission and waits for a node that never comes.
    def pods() -> list[Any]:
        items: list[Any] = get(
            testbed, "pods", "-n", ns, "-l", "app.kubernetes.io/component=operator"
        )["items"]
        return items

    wait_for("the operator pod (Pod Security admission may have refused it)", lambda: pods())
    assert pods()[0]["status"]["phase"] == "Pending"

    sandbox_sa = get(testbed, "serviceaccount", f"{fullname}-sandbox", "-n", ns)
    assert sandbox_sa["automountServiceAccountToken"] is False

    policies = {
        p["metadata"]["name"]: p["spec"] for p in get(testbed, "networkpolicy", "-n", ns)["items"]
    }
    deny = policies[f"{fullname}-sandbox-deny-all"]
    assert deny["podSelector"] == {"matchLabels": {"coworkgym.dev/sandbox": "true"}}
    assert sorted(deny["policyTypes"]) == ["Egress", "Ingress"]
    assert not deny.get("ingress") and not deny.get("egress")
    gateway = policies[f"{fullname}-sandbox-egress-gateway"]
    assert gateway["podSelector"]["matchLabels"]["coworkgym.dev/egress"] == "gateway"
    assert gateway["egress"] == [
        {
            "to": [
                {
                    "podSelector": {"matchLabels": {"app": "llm-gateway"}},
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                }
            ],
            "ports": [{"port": 8000, "protocol": "TCP"}],
        }
    ]  # no DNS by default
    assert f"{fullname}-sandbox-egress-object-store" in policies

    assert exists(testbed, "service", f"{fullname}-metrics", "-n", ns)
    assert exists(testbed, "kopfpeering", fullname, "-n", ns)

    # RBAC: what the operator does, in its namespace only; nothing for the sandbox.
    operator = f"system:serviceaccount:{ns}:{fullname}"
    sandbox = f"system:serviceaccount:{ns}:{fullname}-sandbox"
    for verb, resource in [
        ("watch", "coworkenvironments.coworkgym.dev"),
        ("patch", "coworkenvironments.coworkgym.dev/status"),
        ("update", "coworkenvironments.coworkgym.dev/finalizers"),
        ("create", "jobs.batch"),
        ("deletecollection", "persistentvolumeclaims"),
        ("create", "networkpolicies.networking.k8s.io"),
        ("get", "pods/log"),
        ("create", "events"),
        ("create", "events.events.k8s.io"),
        ("patch", "kopfpeerings.kopf.dev"),
        # a SynthesisCampaign creates its child environments and, when it is deleted,
        # removes them by label behind the garbage collector
        ("create", "coworkenvironments.coworkgym.dev"),
        ("delete", "coworkenvironments.coworkgym.dev"),
        # every kind is driven by its children's events (tests/unit/test_chart_rbac.py)
        ("watch", "jobs.batch"),
        ("watch", "pods"),
        ("watch", "rolloutbatches.coworkgym.dev"),
        ("watch", "deployments.apps"),
        ("watch", "services"),
    ]:
        assert can_i(testbed, operator, verb, resource, "-n", ns), (verb, resource)
    for verb, resource, where in [
        ("create", "jobs.batch", "default"),
        ("get", "secrets", ns),
        ("create", "pods", ns),
        # what users make, the operator never deletes
        ("delete", "rolloutbatches.coworkgym.dev", ns),
        ("delete", "trainingruns.coworkgym.dev", ns),
        ("delete", "synthesiscampaigns.coworkgym.dev", ns),
        ("list", "customresourcedefinitions.apiextensions.k8s.io", ns),
    ]:
        assert not can_i(testbed, operator, verb, resource, "-n", where), (verb, resource, where)
    for verb, resource in [("get", "pods"), ("list", "secrets"), ("get", "configmaps")]:
        assert not can_i(testbed, sandbox, verb, resource, "-n", ns), (verb, resource)

    # Uninstall leaves nothing of the release behind (kopf's CRD stays on purpose).
    testbed.helm("uninstall", name, "-n", ns, *NO_NODE)
    left = testbed.kubectl(
        "get", "deployment,service,serviceaccount,role,rolebinding,networkpolicy,kopfpeering",
        "-n", ns, "-l", f"app.kubernetes.io/instance={name}", "-o", "name",
    ).stdout  # fmt: skip
    assert left.strip() == ""
    assert not exists(testbed, "kopfpeering", fullname, "-n", ns)
    assert exists(testbed, "crd", "kopfpeerings.kopf.dev")


def test_cluster_wide_install(testbed: Testbed, release: tuple[str, str]) -> None:
    name, ns = release
    team = f"{ns}-team"
    testbed.kubectl("create", "namespace", team)
    fullname = f"{name}-cowork-gym"
    cluster_name = f"{ns}-{fullname}"
    try:
        testbed.helm(
            "install", name, str(CHART), "-n", ns,
            "--set", "operator.clusterWide=true", "--set", f"sandboxNamespaces={{{team}}}",
        )  # fmt: skip
        spec = get(testbed, "deployment", fullname, "-n", ns)["spec"]["template"]["spec"]
        assert "--all-namespaces" in spec["containers"][0]["args"]
        assert exists(testbed, "clusterrole", cluster_name)
        assert exists(testbed, "clusterrolebinding", cluster_name)
        assert not exists(testbed, "role", fullname, "-n", ns)
        assert exists(testbed, "clusterkopfpeering", fullname)
        # Sandboxes in the team namespace find their account and their fences there.
        for where in (ns, team):
            sandbox_sa = get(testbed, "serviceaccount", f"{fullname}-sandbox", "-n", where)
            assert sandbox_sa["automountServiceAccountToken"] is False
            assert exists(testbed, "networkpolicy", f"{fullname}-sandbox-deny-all", "-n", where)

        operator = f"system:serviceaccount:{ns}:{fullname}"
        assert can_i(testbed, operator, "create", "jobs.batch", "-n", team)
        assert can_i(testbed, operator, "patch", "clusterkopfpeerings.kopf.dev")
        assert can_i(testbed, operator, "watch", "customresourcedefinitions.apiextensions.k8s.io")
        assert not can_i(testbed, operator, "get", "secrets", "-n", team)
        assert not can_i(
            testbed, operator, "create", "customresourcedefinitions.apiextensions.k8s.io"
        )

        testbed.helm("uninstall", name, "-n", ns, *NO_NODE)
        assert not exists(testbed, "clusterrole", cluster_name)
        assert not exists(testbed, "clusterrolebinding", cluster_name)
        assert not exists(testbed, "clusterkopfpeering", fullname)
        assert not exists(testbed, "serviceaccount", f"{fullname}-sandbox", "-n", team)
        assert exists(testbed, "crd", "clusterkopfpeerings.kopf.dev")
    finally:
        testbed.kubectl("delete", "namespace", team, "--wait=false", check=False)


def _remove_our_peering_crds(testbed: Testbed) -> None:
    """Start from a cluster without kopf's peering CRDs, where they are ours to remove."""
    for name in KOPF_CRD_NAMES:
        if not exists(testbed, "crd", name):
            continue
        annotations = get(testbed, "crd", name)["metadata"].get("annotations", {})
        if "coworkgym.dev/installed-by" not in annotations:
            pytest.skip(f"{name} was installed by something else; not deleting it")
        testbed.kubectl("delete", "crd", name, "--wait=true", "--timeout=60s")


def test_first_install_brings_kopfs_crds_and_uninstall_keeps_them(
    testbed: Testbed, release: tuple[str, str]
) -> None:
    name, ns = release
    fullname = f"{name}-cowork-gym"
    _remove_our_peering_crds(testbed)
    # Helm installs the subchart's CRDs first, so the peering object maps at once.
    testbed.helm("install", name, str(CHART), "-n", ns)
    assert all(exists(testbed, "crd", crd) for crd in KOPF_CRD_NAMES)
    assert exists(testbed, "kopfpeering", fullname, "-n", ns)
    testbed.helm("uninstall", name, "-n", ns, *NO_NODE)
    assert not exists(testbed, "kopfpeering", fullname, "-n", ns)
    assert all(exists(testbed, "crd", crd) for crd in KOPF_CRD_NAMES)  # shared: kept


def test_without_crds_the_chart_needs_them_installed(testbed: Testbed, kube_version: str) -> None:
    kinds = [
        d["kind"]
        for d in yaml.safe_load_all(
            testbed.helm(
                "template", "demo", str(CHART), "--kube-version", kube_version,
                "--include-crds", "--set", "operator.peering.installCRDs=false",
            ).stdout
        )
        if d
    ]  # fmt: skip
    # the chart's own (one per kind: crds/*.yaml), not kopf's peering CRDs
    assert kinds.count("CustomResourceDefinition") == len(list((CHART / "crds").glob("*.yaml")))
    assert "KopfPeering" in kinds


def test_the_peering_object_keeps_its_peers_across_upgrades(
    testbed: Testbed, release: tuple[str, str]
) -> None:
    name, ns = release
    fullname = f"{name}-cowork-gym"
    testbed.helm("install", name, str(CHART), "-n", ns)
    before = get(testbed, "kopfpeering", fullname, "-n", ns)
    # A peer's keep-alive, as kopf writes it.
    alive = {"priority": 7, "lifetime": 60, "lastseen": "2026-01-01T00:00:00"}
    testbed.kubectl(
        "patch", "kopfpeering", fullname, "-n", ns, "--type=merge",
        "-p", json.dumps({"status": {"pod-a": alive}}),
    )  # fmt: skip
    # Patched in place, never recreated: a new object would wake every standby at once.
    testbed.helm("upgrade", name, str(CHART), "-n", ns, "--set-json", "operator.replicas=2")
    after = get(testbed, "kopfpeering", fullname, "-n", ns)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["status"] == {"pod-a": alive}
    assert exists(testbed, "poddisruptionbudget", fullname, "-n", ns)


def test_a_second_release_shares_the_peering_crd(
    testbed: Testbed, release: tuple[str, str]
) -> None:
    name, ns = release
    other = f"{ns}-b"
    testbed.kubectl("create", "namespace", other)
    try:
        testbed.helm("install", name, str(CHART), "-n", ns)
        testbed.helm("install", name, str(CHART), "-n", other)  # CRD owned by the first
        for where in (ns, other):
            assert exists(testbed, "kopfpeering", f"{name}-cowork-gym", "-n", where)
        testbed.helm("uninstall", name, "-n", other, *NO_NODE)
    finally:
        testbed.helm("uninstall", name, "-n", other, *NO_NODE, check=False)
        testbed.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_failed_install_names_the_bad_value(testbed: Testbed, testbed_namespace: str) -> None:
    with pytest.raises(subprocess.CalledProcessError) as err:
        testbed.helm(
            "install", "bad", str(CHART), "-n", testbed_namespace,
            "--set", "operator.replica=2",
        )  # fmt: skip
    assert "replica" in err.value.stderr and "additional properties" in err.value.stderr.lower()


def test_each_operator_shard_gets_its_deployment_and_peering(
    testbed: Testbed, kube_version: str
) -> None:
    docs = render(testbed, kube_version, "--set", "operator.shards={a,b}")
    deployments = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    assert set(deployments) == {"demo-cowork-gym-a", "demo-cowork-gym-b"}
    for shard in ("a", "b"):
        spec = deployments[f"demo-cowork-gym-{shard}"]["spec"]
        # selectors that do not overlap, so each Deployment keeps its own pods
        assert spec["selector"]["matchLabels"]["coworkgym.dev/shard"] == shard
        assert spec["template"]["metadata"]["labels"]["coworkgym.dev/shard"] == shard
        container = spec["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["COWORKGYM_SHARD"] == shard
        assert f"--peering=demo-cowork-gym-{shard}" in container["args"]
    peerings = {d["metadata"]["name"] for d in by_kind(docs, "KopfPeering")}
    assert peerings == {"demo-cowork-gym-a", "demo-cowork-gym-b"}
    unsharded = render(testbed, kube_version)
    (deployment,) = by_kind(unsharded, "Deployment")
    assert deployment["metadata"]["name"] == "demo-cowork-gym"
    assert "coworkgym.dev/shard" not in deployment["spec"]["selector"]["matchLabels"]
    bad = testbed.helm(
        "template", "demo", str(CHART), "--kube-version", kube_version,
        "--set", "operator.shards={Not_A_Name}", check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "shards" in bad.stderr
