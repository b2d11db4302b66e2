"""pytest plugin for the test-bed.

Register it in a conftest.py: `pytest_plugins = ["coworkgym_testbed.pytest_plugin"]`.

- Tests marked `@pytest.mark.testbed` run only with `--testbed` or COWORKGYM_TESTBED=1;
  otherwise they are skipped, with the reason saying how to enable them.
- Tests marked `@pytest.mark.node` need pods that really run: they run only when the
  test-bed has a node (`--testbed-node` or COWORKGYM_TESTBED_NODE=1; root only), and the
  session's test-bed then starts with one.
- `testbed` (session): a running `Testbed`. A healthy test-bed already running in
  <rootdir>/.testbed (e.g. from `make testbed-up`) is reused and left running; otherwise
  the session starts its own in a pytest temporary dir and stops it at the end. With
  $COWORKGYM_TESTBED_DIR set, that dir is used either way (reused or started there).
- COWORKGYM_TESTBED_KUBERAY=1: the session's test-bed gets KubeRay's CRDs and operator
  (added in place to a reused one); a test can also call `add_kuberay(testbed)` itself.
- `testbed_env` (function): the same, with KUBECONFIG, AWS_* and COWORKGYM_S3_* set in
  os.environ for the test (for code that reads the environment, like kopf's login).
- `testbed_namespace` (function): a fresh namespace, deleted after the test.
- When a test that used the test-bed fails, the tail of each component's log is attached
  to its report.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from .testbed import Testbed, add_kuberay, kuberay_requested, running, up

ENV_FLAG = "COWORKGYM_TESTBED"
NODE_FLAG = "COWORKGYM_TESTBED_NODE"
_SESSION_TESTBED = pytest.StashKey[Testbed]()
SKIP_REASON = (
    "needs the Kubernetes/S3 test-bed: run with --testbed or COWORKGYM_TESTBED=1 "
    "(binaries from testbed/build.sh)"
)
NODE_SKIP_REASON = (
    "needs the test-bed's node (pods that run): --testbed-node or COWORKGYM_TESTBED_NODE=1, "
    "as root, with `testbed/build.sh k8s` and `testbed/build-images.sh` done"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("testbed").addoption(
        "--testbed",
        action="store_true",
        help="run tests marked `testbed` against the local Kubernetes/S3 test-bed "
        f"(same as {ENV_FLAG}=1)",
    )
    parser.getgroup("testbed").addoption(
        "--testbed-node",
        action="store_true",
        help=f"give the test-bed a node and run tests marked `node` (same as {NODE_FLAG}=1)",
    )


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def node_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--testbed-node")) or _flag(NODE_FLAG)


def enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--testbed")) or _flag(ENV_FLAG) or node_enabled(config)


def _shared_run_dir(config: pytest.Config) -> Path:
    explicit = os.environ.get("COWORKGYM_TESTBED_DIR")
    return Path(explicit) if explicit else config.rootpath / ".testbed"


def pytest_report_header(config: pytest.Config) -> str:
    if not enabled(config):
        return f"testbed: off (--testbed or {ENV_FLAG}=1)"
    node = "with a node" if node_enabled(config) else f"no node ({NODE_FLAG}=1 for one)"
    return f"testbed: on, {node} (reused if running in {_shared_run_dir(config)})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason=SKIP_REASON)
    skip_node = pytest.mark.skip(reason=NODE_SKIP_REASON)
    for item in items:
        # What needs the test-bed carries the marker, so that `-m testbed` / `-m "not
        # testbed"` split the suite exactly (make test runs the halves side by side): a
        # test under tests/testbed/, one marked node, one using the fixture.
        needs = "testbed" in item.keywords or "node" in item.keywords
        if item.get_closest_marker("testbed") is None and (
            needs or "testbed" in getattr(item, "fixturenames", ())
        ):
            item.add_marker(pytest.mark.testbed)
        if "testbed" in item.keywords and not enabled(config):
            item.add_marker(skip)
        elif "node" in item.keywords and not node_enabled(config):
            item.add_marker(skip_node)
    # A test that leaves the shared test-bed busy for a while (thousands of objects to
    # delete, a namespace terminating) runs after the others of its session, whose timing
    # it would otherwise skew (a stage pod's scheduling problem reported late).
    items.sort(key=lambda item: item.get_closest_marker("runs_last") is not None)


@pytest.fixture(scope="session")
def testbed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Testbed]:
    if not enabled(request.config):
        pytest.skip(SKIP_REASON)
    node = node_enabled(request.config)
    kuberay = kuberay_requested()
    if os.environ.get("COWORKGYM_TESTBED_DIR"):
        tb, started = up(_shared_run_dir(request.config), node=node, kuberay=kuberay)
    else:
        reusable = running(_shared_run_dir(request.config))
        if reusable is not None and (reusable.node or not node):
            tb, started = reusable, False
            if kuberay:
                tb = add_kuberay(tb)
        else:
            # A private run dir (kept by pytest with its other temporary dirs, for the logs):
            # two sessions running at once never stop each other's test-bed.
            tb, started = up(
                tmp_path_factory.mktemp("testbed"), node=node, kuberay=kuberay, timeout=300
            )
    request.config.stash[_SESSION_TESTBED] = tb
    yield tb
    if started:
        tb.stop()


@pytest.fixture
def testbed_env(testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Testbed:
    for key, value in testbed.env().items():
        monkeypatch.setenv(key, value)
    # The kubernetes package reads $KUBECONFIG once, when kubernetes.config is first
    # imported (usually at collection time, long before this fixture). kopf's default login
    # goes through it, so point its default at the test-bed for this test as well.
    try:
        from kubernetes.config import kube_config
    except ImportError:
        pass
    else:
        monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(testbed.kubeconfig))
    return testbed


@pytest.fixture
def testbed_namespace(testbed: Testbed) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    testbed.kubectl("create", "namespace", name)
    yield name
    # The controller-manager finishes the deletion; no need to wait for it.
    testbed.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    tb = item.config.stash.get(_SESSION_TESTBED, None)
    if report.failed and tb is not None and "testbed" in getattr(item, "fixturenames", ()):
        report.sections.append(("test-bed component logs (last lines)", tb.logs_tail()))
    return report
