"""Later user turns fire on what the agent did in the turn, in a real rollout: the
formula_repair case of issue 25, where the repaired workbook existed since the first turn
and the next turn's trigger used to cut the agent off after its first tool call."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.harness import Episode, PolicyConfig, register
from coworkgym.rollout.trajectory import ToolCall
from tests.support.builders import good_package

REPAIRED = "generation_budget_repaired.xlsx"
# seed 4 plans the fossil-share requirement after the agent's first turn, then the EIA
# revision once the repaired workbook changes in the second turn
PACKAGE = good_package("formula_repair", turns=3, seed=4)
SEEN: dict[str, list[str | None]] = {}


def _solve(turn: int) -> str:
    """What a capable agent would run (the test knows the answer; the agent is scripted)."""
    return f"export COWORK_TURN={turn}\n{PACKAGE.files['solution/solve.sh'].decode()}"


def _call(episode: Episode, index: int, name: str, **arguments: object) -> str | None:
    """One model step with one tool call; what the user said right after it, if anything."""
    call = ToolCall(id=f"c{index}", name=name, arguments=json.dumps(arguments))
    episode.record_agent("", [call])
    episode.execute(call)
    return episode.pending_user_message()


class EditsThenChecks:
    """Turn 0 repairs and finishes. In turn 1 it rewrites the repaired workbook first, then
    reads its work back twice before it would finish; turn 2 redoes the work and finishes."""

    name = "t-edits-then-checks"

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        said = SEEN.setdefault(self.name, [])
        said.append(_call(episode, 0, "shell", command=_solve(0)))
        said.append(_call(episode, 1, "finish", summary="repaired", deliverables=[REPAIRED]))
        said.append(_call(episode, 2, "shell", command=_solve(1)))  # the workbook changes
        said.append(_call(episode, 3, "read_file", path="repairs.json"))
        said.append(_call(episode, 4, "list_files", path="."))
        said.append(_call(episode, 5, "shell", command=_solve(2)))
        said.append(_call(episode, 6, "finish", summary="revised", deliverables=[REPAIRED]))


register(EditsThenChecks.name)(EditsThenChecks)


@pytest.fixture(scope="module")
def engine() -> Iterator[RolloutEngine]:
    with RolloutEngine() as engine:
        yield engine


def test_a_rewritten_deliverable_does_not_cut_the_turn_after_one_call(
    engine: RolloutEngine,
) -> None:
    pkg: EnvironmentPackage = PACKAGE
    plan = sorted(pkg.patches, key=lambda p: p.turn)
    assert [p.trigger.kind for p in plan] == ["after_agent_turn", "artifact_changed"]
    assert plan[1].trigger.artifact == REPAIRED and plan[1].trigger.min_tool_calls == 3
    t = engine.run(pkg, EditsThenChecks.name, PolicyConfig(model="scripted"))
    said = SEEN[EditsThenChecks.name]
    # turn 1 is said on the finish; turn 2 only after the third call of turn 1, although
    # its first call already rewrote the workbook
    assert [s is not None for s in said] == [False, True, False, False, True, False, False]
    assert said[1] == plan[0].message and said[4] == plan[1].message
    turns = [i for i in t.interventions if i.kind == "turn"]
    assert [(i.turn, i.trigger) for i in turns] == [
        (1, "agent_claimed_done"),
        (2, "artifact_changed"),
    ]
    assert turns[0].trigger_detail == (
        "the agent finished in turn 0 after 1 tool calls: its turn 1 ended, as planned"
    )
    assert turns[1].trigger_detail == (
        f"{REPAIRED} changed since turn 1 began (after 3 tool calls in turn 1)"
    )
    assert sum(1 for m in t.messages if m.role == "tool" and m.turn == 1) == 3
    assert t.termination.reason == "agent_done" and t.reward == 1.0
