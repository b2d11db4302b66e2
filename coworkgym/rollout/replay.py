"""Scripted policies for smoke runs and baselines: ``oracle`` and ``nop``.

``oracle`` replays the package's reference solution turn by turn, as the tool calls an
agent would make: one ``shell`` call whose command is ``solution/solve.sh`` for that turn
(``COWORK_TURN`` set), then ``finish``. It is a **privileged replay, not a policy**: it
reads the solution through the engine's ``reference_solution()``, in this process. The
solution travels only inside that one shell command (into a per-call ``/tmp``); it is never
written into the workspace, so no other harness's sandbox can ever see it. Its trajectory
should score 1 — a check that the environment, the engine and the verifier agree.

``nop`` calls ``finish`` at once, every turn: it should score 0.
"""

from __future__ import annotations

import base64
import json
import shlex
from typing import Any, Protocol

from .harness import (
    FINISH_TOOL,
    Episode,
    HarnessError,
    PolicyConfig,
    register,
)
from .trajectory import ToolCall

SOLVE_SH = "solve.sh"
ORACLE_SHELL_TIMEOUT_S = 600.0


class _Reference(Protocol):
    files: dict[str, bytes]
    outputs: list[str]
    env: dict[str, str]


def oracle_command(
    files: dict[str, bytes], turn: int, workdir: str, env: dict[str, str] | None = None
) -> str:
    """The shell command that runs solve.sh for ``turn`` (with the task's [solution.env],
    as the runtime's reference run has). When the solution is solve.sh alone, the command
    *is* its text (readable in the trajectory, usable as a demonstration); other solution
    files are unpacked into a fresh temp dir first."""
    if SOLVE_SH not in files:
        raise HarnessError("harness_crash", "the package has no solution/solve.sh to replay")
    variables = {**(env or {}), "COWORK_TURN": str(turn), "COWORK_WORKSPACE": workdir}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
    env_line = f"export {exports}\n"
    script = files[SOLVE_SH].decode("utf-8", errors="replace")
    if set(files) == {SOLVE_SH}:
        return env_line + f"cd {shlex.quote(workdir)}\n" + script
    lines = [env_line.rstrip("\n"), 'SOLUTION_DIR="$(mktemp -d)"']
    for rel, content in sorted(files.items()):
        target = f'"$SOLUTION_DIR"/{shlex.quote(rel)}'
        encoded = base64.b64encode(content).decode()
        lines.append(f"mkdir -p \"$(dirname {target})\" && base64 -d > {target} <<'B64'")
        lines += [encoded[i : i + 76] for i in range(0, len(encoded), 76)] + ["B64"]
    lines.append(f'cd {shlex.quote(workdir)} && bash "$SOLUTION_DIR"/{SOLVE_SH}')
    return "\n".join(lines) + "\n"


def _call(kind: str, step: int, name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id=f"{kind}-{step}-{name}", name=name, arguments=json.dumps(arguments))


@register("oracle")
class OracleHarness:
    name = "oracle"

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        reference_solution = getattr(episode, "reference_solution", None)
        if reference_solution is None:
            raise HarnessError(
                "harness_crash", "the oracle replays only through the rollout engine's episode"
            )
        reference: _Reference = reference_solution()
        turn = 0
        step = 0
        while not episode.done:
            command = oracle_command(reference.files, turn, episode.workdir, reference.env)
            shell = _call(
                "oracle", step, "shell", {"command": command, "timeout_s": ORACLE_SHELL_TIMEOUT_S}
            )
            episode.record_agent(f"Running the reference solution for turn {turn}.", [shell])
            episode.execute(shell)
            step += 1
            message = episode.pending_user_message()
            if message is None and not episode.done:
                summary = f"Reference solution for turn {turn} done."
                finish = _call(
                    "oracle",
                    step,
                    FINISH_TOOL,
                    {"summary": summary, "deliverables": reference.outputs},
                )
                episode.record_agent("", [finish])
                episode.execute(finish)
                step += 1
                message = episode.pending_user_message()
            if message is None:
                return
            turn += 1


@register("nop")
class NopHarness:
    name = "nop"

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        step = 0
        while not episode.done:
            finish = _call(
                "nop", step, FINISH_TOOL, {"summary": "Nothing done.", "deliverables": []}
            )
            episode.record_agent("", [finish])
            episode.execute(finish)
            step += 1
            if episode.pending_user_message() is None:
                return


__all__ = ["NopHarness", "OracleHarness", "oracle_command"]
