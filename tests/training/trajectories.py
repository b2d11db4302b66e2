"""Trajectory records for the training tests: a two-turn rollout with tool calls, reasoning
in the first reply, a user follow-up after a workspace patch, and a final answer. It
records sampling at temperature 1.0, so the losses' references (untempered log-softmax)
hold; tests of other temperatures set theirs."""

from __future__ import annotations

from typing import Any

from coworkgym.rollout.trajectory import Trajectory
from tests.fixtures.trajectories import solved_data

SYSTEM = "You are a careful analyst."
REQUEST = "Summarise data/sales.csv into out/report.xlsx."
THINKING = "<think>\nread the file first\n</think>\n\nHello, I will read the file first."
TOOL_RESULT = "region,sales\nnorth,10\n"
FOLLOW_UP = "The totals look wrong; the user replaced the table."
FINAL = "I saved the quarterly report to /app/out/report.xlsx."


def messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "source": "system", "content": SYSTEM},
        {"role": "user", "source": "user", "content": REQUEST},
        {
            "role": "assistant",
            "source": "agent",
            "content": THINKING,
            "tool_calls": [
                {"id": "call_0", "name": "read_file", "arguments": '{"path": "data/sales.csv"}'}
            ],
        },
        {"role": "tool", "source": "tool", "content": TOOL_RESULT, "tool_call_id": "call_0"},
        {"role": "user", "source": "workspace", "content": FOLLOW_UP, "turn": 1},
        {"role": "assistant", "source": "agent", "content": FINAL, "turn": 1},
    ]


def two_turns(*, sample: int = 0, **message_changes: dict[str, Any]) -> Trajectory:
    """The rollout; `message_changes` maps a message index (as "m<i>") to fields to set."""
    data = solved_data(with_tokens=False, sample=sample)
    listed = messages()
    for key, changes in message_changes.items():
        listed[int(key.removeprefix("m"))].update(changes)
    data["messages"] = listed
    data["policy"]["sampling"] = {"temperature": 1.0}
    return Trajectory.model_validate(data)


AGENT_INDICES = (2, 5)
