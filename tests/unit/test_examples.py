"""Every shipped example (examples/, the chart's examples/) is valid against the pydantic
model of its kind, the source of truth of the CRDs: a user who applies one is never refused.
Which examples run where is the docs' business (docs/deploy.md); this only keeps them valid
and in the namespace the docs install into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from coworkgym.spec import parse_spec_document
from coworkgym_operator.campaign.api.types import SynthesisCampaignSpec
from coworkgym_operator.rollouts.api.types import RolloutBatchSpec
from coworkgym_operator.training.api.types import TrainingRunSpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    [*(ROOT / "examples").rglob("*.yaml"), *(ROOT / "charts/cowork-gym/examples").glob("*.yaml")]
)
MODELS: dict[str, type[BaseModel]] = {
    "SynthesisCampaign": SynthesisCampaignSpec,
    "RolloutBatch": RolloutBatchSpec,
    "TrainingRun": TrainingRunSpec,
}


def test_there_is_an_example_of_every_kind() -> None:
    kinds = {yaml.safe_load(p.read_text())["kind"] for p in EXAMPLES}
    assert kinds == {"CoworkEnvironment", *MODELS}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_example_is_valid(path: Path) -> None:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == "coworkgym.dev/v1alpha1"
    if doc["kind"] == "CoworkEnvironment":
        parse_spec_document(doc, str(path))
    else:
        MODELS[doc["kind"]].model_validate(doc["spec"])


def test_the_oracle_nop_batch_selects_the_demo_campaigns_children() -> None:
    campaign = yaml.safe_load((ROOT / "examples/campaigns/demo.yaml").read_text())
    batch = yaml.safe_load((ROOT / "examples/rollouts/oracle-nop.yaml").read_text())
    selector = batch["spec"]["environments"]["selector"]["matchLabels"]
    assert selector == {"coworkgym.dev/campaign": campaign["metadata"]["name"]}
    assert batch["metadata"]["namespace"] == campaign["metadata"]["namespace"] == "cowork-gym"
