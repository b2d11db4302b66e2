"""Shared fixtures of the test-bed smoke tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkgym_testbed.testbed import Testbed

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def widgets_crd(testbed: Testbed) -> str:
    """The `widgets.cowork.test` CRD, applied and Established."""
    testbed.kubectl("apply", "-f", str(FIXTURES / "crd-widgets.yaml"))
    testbed.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.cowork.test"
    )
    return "widgets.cowork.test"
