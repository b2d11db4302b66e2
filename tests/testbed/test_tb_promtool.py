"""Alert rules are checked and unit-tested with promtool."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed
FIXTURES = Path(__file__).parent / "fixtures"
RULES = FIXTURES / "prometheus"


def test_promtool_check_rules(testbed: Testbed) -> None:
    cp = testbed.promtool("check", "rules", str(RULES / "rules.yaml"))
    assert "SUCCESS: 1 rules found" in cp.stdout


def test_promtool_check_rules_rejects_bad_promql(testbed: Testbed) -> None:
    cp = testbed.promtool("check", "rules", str(RULES / "rules-bad.yaml"), check=False)
    assert cp.returncode != 0
    assert "rules-bad.yaml" in cp.stdout + cp.stderr


def test_promtool_test_rules(testbed: Testbed) -> None:
    cp = testbed.promtool("test", "rules", str(RULES / "rules-test.yaml"))
    assert "SUCCESS" in cp.stdout


def test_promtool_test_rules_catches_a_wrong_expectation(testbed: Testbed) -> None:
    cp = testbed.promtool("test", "rules", str(RULES / "rules-test-wrong.yaml"), check=False)
    assert cp.returncode != 0
    assert "SynthesisFailuresHigh" in cp.stdout + cp.stderr
