"""Shared fixtures of the test-bed smoke tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster

FIXTURES = Path(__file__).parent / "fixtures"
CRD = Path(__file__).resolve().parents[2] / "crds" / "coworkenvironments.yaml"
# the operator watches both kinds: without this CRD its RolloutBatch watch would fail
BATCH_CRD = CRD.with_name("rolloutbatches.yaml")
CAMPAIGN_CRD = CRD.with_name("synthesiscampaigns.yaml")  # the operator watches it too
TRAINING_CRD = CRD.with_name("trainingruns.yaml")  # and TrainingRuns


@pytest.fixture(scope="session")
def widgets_crd(testbed: Testbed) -> str:
    """The `widgets.cowork.test` CRD, applied and Established."""
    testbed.kubectl("apply", "-f", str(FIXTURES / "crd-widgets.yaml"))
    testbed.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.cowork.test"
    )
    return "widgets.cowork.test"


@pytest.fixture(scope="session")
def crd(testbed: Testbed) -> None:
    testbed.kubectl(
        "apply", "-f", str(CRD), "-f", str(BATCH_CRD), "-f", str(CAMPAIGN_CRD),
        "-f", str(TRAINING_CRD),
    )  # fmt: skip
    testbed.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/coworkenvironments.coworkgym.dev",
        "crd/rolloutbatches.coworkgym.dev",
        "crd/synthesiscampaigns.coworkgym.dev",
        "crd/trainingruns.coworkgym.dev",
    )


@pytest.fixture
def ns(testbed_env: Testbed, crd: None, testbed_namespace: str) -> str:
    testbed_env.kubectl("create", "serviceaccount", "cowork-gym-sandbox", "-n", testbed_namespace)
    return testbed_namespace


@pytest.fixture
def cluster(testbed_env: Testbed, ns: str) -> Iterator[Cluster]:
    yield Cluster(testbed_env, ns)
