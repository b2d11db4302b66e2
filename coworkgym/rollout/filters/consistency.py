"""Consistency rules: the record must agree with itself, with its package and with the
stored final workspace, whatever the harness, the simulator or the verifier said.

Each rule is one concern; a check that needs something the filter was not given (the
package for this digest, a stored final workspace) is skipped with a ``Note``, and what
can be checked from the record alone still is. ``UniqueRecords`` is the one rule that
remembers earlier trajectories: the pipeline asks it in input order, in the process that
counts, so the first copy is kept whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import ClassVar

from ...verifier.engine.scoring import Scoring, combine, weighted_mean
from ..trajectory import FileDigest, Trajectory, VerificationRecord
from .base import Drop, Note
from .context import FilterContext, PackageFacts, PrivateItem, Span, spans
from .settings import DEFAULT_MAX_FILE_BYTES, RuleName

NO_PACKAGE = "no_package"
NO_STORED_WORKSPACE = "no_stored_workspace"
STORED_WORKSPACE_UNREADABLE = "stored_workspace_unreadable"
# The verifier rounds the reward and the code score to 6 decimals; the record keeps the
# component scores unrounded.
REWARD_TOLERANCE = 1e-4
# An agent message repeating another message word for word counts from this many
# characters: "Done." after a tool that printed "Done." is no echo worth a drop.
ECHO_MIN_CHARS = 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


def content_digest(trajectory: Trajectory, line: str | None = None) -> str:
    """sha256 of the record without its key: the same rollout stored under another id
    (another sample number, model or harness name) has the same digest. Given the stored
    line and holding the key as ``dump_line`` writes it, the line without the key is hashed
    (no second serialization of a record just parsed); otherwise the record's own JSON. The
    two are told apart, so a copy is found among lines of one writer."""
    if line is not None:
        key = '"key":' + trajectory.key.model_dump_json()
        if line.count(key) == 1:
            bare = line.strip().replace(key, "", 1)
            return "line:" + hashlib.sha256(bare.encode()).hexdigest()
    record = trajectory.model_dump_json(exclude={"key"})
    return "record:" + hashlib.sha256(record.encode()).hexdigest()


@dataclass
class UniqueRecords:
    """Keeps the first of trajectories with the same id or the same content."""

    name: ClassVar[RuleName] = "unique_records"
    concern: ClassVar[str] = "each rollout once: no repeated id, no copy under another id"
    _ids: set[str] = field(default_factory=set)
    _digests: dict[str, str] = field(default_factory=dict)  # content digest -> first id

    def see(self, trajectory_id: str, digest: str) -> Drop | None:
        """Remember this trajectory; a Drop when its id or its content was seen before."""
        if trajectory_id in self._ids:
            return Drop("duplicate_id", f"id {trajectory_id} already seen; the first is kept")
        self._ids.add(trajectory_id)
        first = self._digests.setdefault(digest, trajectory_id)
        if first != trajectory_id:
            return Drop("duplicate_content", f"the same record as {first}, under another key")
        return None


# ---- the user's private state -----------------------------------------------------------
@dataclass(frozen=True)
class PrivateState:
    """No user message quotes the package's private state (``.user/``: latent goals, the
    knowledge boundary, signals not revealed on request), whatever the simulator reported.
    A quote is a run of ``PRIVATE_SPAN_WORDS`` words of an item (the whole item when
    shorter) that the package's own instruction and turn messages do not contain."""

    context: FilterContext = field(default_factory=FilterContext)
    name: ClassVar[RuleName] = "private_state"
    concern: ClassVar[str] = "no user message quotes the package's private state (.user/)"

    def check(self, trajectory: Trajectory) -> Drop | Note | None:
        facts = self.context.package(trajectory)
        if facts is None:
            return Note(NO_PACKAGE)
        revealed = {r for i in trajectory.interventions for r in i.revealed}
        items = [*facts.private, *(s for s in facts.signals if s.text not in revealed)]
        if not items:
            return None
        allowed: dict[int, set[Span]] = {}  # width -> word runs of the revealed signals
        for index, message in enumerate(trajectory.messages):
            if message.source != "user":  # the user's turns and answers to ask_user
                continue
            runs: dict[int, set[Span]] = {}  # width -> word runs of this message
            for item in items:
                width = item.width
                if width not in runs:
                    runs[width] = spans(message.content, width)
                if width not in allowed:
                    allowed[width] = set().union(*(spans(r, width) for r in revealed))
                quoted = (item.spans & runs[width]) - allowed[width]
                if quoted:
                    return _quote(index, message.turn, item, quoted)
        return None


def _quote(index: int, turn: int, item: PrivateItem, quoted: AbstractSet[Span]) -> Drop:
    run = " ".join(sorted(quoted)[0])
    return Drop(
        "private_state_quoted",
        f"messages[{index}] (turn {turn}) quotes the {item.kind} {item.text!r}: {run!r}",
    )


# ---- turns ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnConsistency:
    """The record's turns agree: one user message per turn, in order (0, 1, 2, …); every
    other message in the turn of the user message before it; no turn past the recorded
    count; every turn said when the agent finished; each intervention at the message that
    carries it; and the recorded count is the package's (its first request plus one per
    ``.patch/`` turn)."""

    context: FilterContext = field(default_factory=FilterContext)
    name: ClassVar[RuleName] = "turn_consistency"
    concern: ClassVar[str] = "turns recorded agree with the record's and the package's count"

    def check(self, trajectory: Trajectory) -> Drop | Note | None:
        count = trajectory.environment.turns
        facts = self.context.package(trajectory)
        if facts is not None and facts.turns != count:
            return Drop(
                "turn_count_mismatch",
                f"the record says {count} turn(s); package {facts.name} has {facts.turns}",
            )
        said, current = 0, 0
        for index, message in enumerate(trajectory.messages):
            if message.turn >= count:
                return Drop(
                    "turn_beyond_count",
                    f"messages[{index}] is in turn {message.turn}; the record has {count}",
                )
            if message.role == "user":
                if message.turn != said:
                    return Drop(
                        "user_turns_out_of_order",
                        f"messages[{index}]: the user's message of turn {message.turn} where "
                        f"turn {said} was next",
                    )
                said, current = said + 1, message.turn
            elif message.turn != current:
                return Drop(
                    "message_outside_its_turn",
                    f"messages[{index}] says turn {message.turn} during turn {current}",
                )
        if trajectory.termination.reason == "agent_done" and said != count:
            return Drop(
                "turns_missing",
                f"the agent finished, but the record holds the user's messages of {said} of "
                f"its {count} turn(s)",
            )
        return _misplaced_intervention(trajectory) or (None if facts else Note(NO_PACKAGE))


def _misplaced_intervention(trajectory: Trajectory) -> Drop | None:
    messages = trajectory.messages
    for index, event in enumerate(trajectory.interventions):
        at = event.at_message
        message = messages[at] if at < len(messages) else None
        if event.kind == "turn":
            fits = message is not None and message.role == "user" and message.turn == event.turn
        else:  # an answer to ask_user: the tool result that carries it
            fits = message is not None and message.role == "tool" and message.source == "user"
        if not fits:
            return Drop(
                "intervention_without_message",
                f"interventions[{index}] ({event.kind}, turn {event.turn}) points at "
                f"messages[{at}], which is not the user's {event.kind}",
            )
    return None


# ---- provenance -------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentEcho:
    """No agent message (a training target) is word for word a user or tool message: the
    policy would be trained to produce text it was given."""

    name: ClassVar[RuleName] = "agent_echo"
    concern: ClassVar[str] = "no agent message repeats a user or tool message word for word"

    def check(self, trajectory: Trajectory) -> Drop | None:
        messages = trajectory.messages
        said: dict[str, int] = {}  # an agent message's text -> its first index
        for index, message in enumerate(messages):
            # whitespace only shortens a text: a shorter one cannot reach the minimum
            if message.trainable and len(message.content) >= ECHO_MIN_CHARS:
                said.setdefault(_normal(message.content), index)
        said = {text: index for text, index in said.items() if len(text) >= ECHO_MIN_CHARS}
        if not said:
            return None
        for index, message in enumerate(messages):
            if message.source not in ("user", "tool") or len(message.content) < ECHO_MIN_CHARS:
                continue
            echo = said.get(_normal(message.content))
            if echo is not None:
                return Drop(
                    f"agent_echoes_{message.source}",
                    f"messages[{echo}] repeats messages[{index}] ({message.source}) word for word",
                )
        return None


def _normal(text: str) -> str:
    return " ".join(text.split())


# ---- the verdict ------------------------------------------------------------------------
@dataclass(frozen=True)
class VerdictConsistency:
    """``valid`` agrees with ``invalid_reason``, and a valid verdict of a Cowork verifier
    has its component scores: the package's components, when the package is given."""

    context: FilterContext = field(default_factory=FilterContext)
    name: ClassVar[RuleName] = "verdict_consistency"
    concern: ClassVar[str] = "valid agrees with invalid_reason; a valid verdict has components"

    def check(self, trajectory: Trajectory) -> Drop | Note | None:
        verdict = trajectory.verification
        if verdict is None:
            return None
        reason = (verdict.invalid_reason or "").strip()
        if verdict.valid and reason:
            return Drop("valid_with_invalid_reason", f"valid, yet invalid_reason {reason!r}")
        if not verdict.valid:
            return None if reason else Drop("invalid_without_reason", "invalid, with no reason")
        facts = self.context.package(trajectory)
        if _cowork_verified(trajectory, facts) and not verdict.components:
            return Drop(
                "valid_without_components",
                f"valid reward {verdict.reward!r} with no component scores: the verifier "
                "scores every component, so this verdict did not come from it",
            )
        if verdict.rubric_score is not None and not verdict.judge_ran:
            return Drop("rubric_without_judge", f"rubric_score {verdict.rubric_score!r}, no judge")
        if facts is None:
            return Note(NO_PACKAGE)
        return _components_mismatch(verdict, facts) or _passed_disagrees(verdict, facts)


def _cowork_verified(trajectory: Trajectory, facts: PackageFacts | None) -> bool:
    """Whether a valid verdict must carry components: the package has a Cowork verifier
    spec (without the package: the record names a family, or has a code score). A plain
    Harbor task's own test.sh reports a reward and nothing more."""
    if facts is not None:
        return facts.cowork_verifier
    verdict = trajectory.verification
    return trajectory.environment.family is not None or (
        verdict is not None and verdict.code_score is not None
    )


def _components_mismatch(verdict: VerificationRecord, facts: PackageFacts) -> Drop | None:
    if not facts.cowork_verifier:
        return None
    missing = sorted(set(facts.weights) - set(verdict.components))
    unknown = sorted(set(verdict.components) - set(facts.weights))
    if missing or unknown:
        return Drop(
            "components_mismatch",
            f"package {facts.name}: components missing {missing}, not in its verifier {unknown}",
        )
    return None


def _passed_disagrees(verdict: VerificationRecord, facts: PackageFacts) -> Drop | None:
    reward = verdict.reward
    if verdict.passed is None or reward is None or not math.isfinite(reward):
        return None
    threshold = facts.scoring.pass_threshold
    if verdict.passed != (reward >= threshold):
        return Drop(
            "passed_disagrees",
            f"passed {verdict.passed} for reward {reward:g} (pass threshold {threshold:g})",
        )
    return None


# ---- the reward -------------------------------------------------------------------------
@dataclass(frozen=True)
class RewardConsistency:
    """A valid reward lies in [0, 1] and is what its components give, computed with the
    verifier's own functions (``verifier.engine.scoring``: ``weighted_mean`` of the
    components, ``combine`` with the rubric and a red line's cap). With the package the
    weights and scoring are its own, and the reward is what they give, or that capped by a
    failed red line (red lines are not recorded); when one of its gate components fell
    short, at most what they give. Without the package, a weighted mean lies between the
    lowest and the highest component, and a reward is at most what the scores combine to
    (gates and red lines only lower it)."""

    context: FilterContext = field(default_factory=FilterContext)
    name: ClassVar[RuleName] = "reward_consistency"
    concern: ClassVar[str] = "reward in [0, 1] and equal to what its components give"

    def check(self, trajectory: Trajectory) -> Drop | Note | None:
        verdict = trajectory.verification
        if verdict is None or not verdict.valid or verdict.reward is None:
            return None
        reward = verdict.reward
        if not _unit(reward):
            return Drop("reward_out_of_range", f"reward {reward!r} is not in [0, 1]")
        scores = {"code_score": verdict.code_score, "rubric_score": verdict.rubric_score}
        for name, score in [*verdict.components.items(), *scores.items()]:
            if score is not None and not _unit(score):
                return Drop("score_out_of_range", f"{name} {score!r} is not in [0, 1]")
        facts = self.context.package(trajectory)
        code, rubric = verdict.code_score, verdict.rubric_score
        if code is None:
            if _cowork_verified(trajectory, facts):
                return Drop("code_score_missing", f"reward {reward:g} with no code_score")
            return None  # a plain Harbor task: its test.sh's reward is the whole verdict
        if facts is not None and facts.cowork_verifier:
            return _against_package(reward, code, rubric, verdict.components, facts)
        return _bounded(reward, code, rubric, verdict.components) or Note(NO_PACKAGE)


def _unit(value: float) -> bool:
    return math.isfinite(value) and 0.0 <= value <= 1.0


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REWARD_TOLERANCE


def _against_package(
    reward: float,
    code: float,
    rubric: float | None,
    components: Mapping[str, float],
    facts: PackageFacts,
) -> Drop | None:
    pairs = [(facts.weights[c], s) for c, s in components.items() if c in facts.weights]
    expected = weighted_mean(pairs)
    if expected is None or not _close(code, expected):
        return Drop(
            "code_score_disagrees",
            f"code_score {code:g}; package {facts.name}'s weights give {expected!r}",
        )
    plain = combine(code, rubric, 0, facts.scoring)
    if any(components.get(gate, 1.0) < 1.0 for gate in facts.gates):
        # a gate fell short: the verifier scaled the reward down (a red line may cap it)
        return _above(reward, plain, code, rubric)
    capped = combine(code, rubric, 1, facts.scoring)
    if not (_close(reward, plain) or _close(reward, capped)):
        return Drop(
            "reward_disagrees",
            f"reward {reward:g}; code_score {code:g} and rubric_score {rubric!r} give "
            f"{plain:g} ({capped:g} with a failed red line)",
        )
    return None


def _above(reward: float, most: float, code: float, rubric: float | None) -> Drop | None:
    if reward > most + REWARD_TOLERANCE:
        return Drop(
            "reward_disagrees",
            f"reward {reward:g} exceeds the {most:g} that code_score {code:g} and "
            f"rubric_score {rubric!r} can give",
        )
    return None


def _bounded(
    reward: float, code: float, rubric: float | None, components: Mapping[str, float]
) -> Drop | None:
    if components:
        low, high = min(components.values()), max(components.values())
        if not low - REWARD_TOLERANCE <= code <= high + REWARD_TOLERANCE:
            return Drop(
                "code_score_disagrees",
                f"code_score {code:g} is no weighted mean of components in [{low:g}, {high:g}]",
            )
    if rubric is None:
        most = combine(code, None, 0, Scoring())  # no rubric: the weights play no part
    else:  # a weighted geometric mean of the two, whatever the weights
        most = max(code, rubric) if min(code, rubric) > 0 else 0.0
    return _above(reward, most, code, rubric)


# ---- the final workspace ----------------------------------------------------------------
@dataclass(frozen=True)
class FinalWorkspace:
    """The recorded final workspace is possible (sha256 digests, one entry per path, no
    file above the rollout's file limit), is what the initial workspace and the recorded
    events (the agent's changes, the user's patches) add up to, and, where the final
    workspace is stored, is what its files hash to now."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    context: FilterContext = field(default_factory=FilterContext)
    name: ClassVar[RuleName] = "final_workspace"
    concern: ClassVar[str] = "final-workspace digests and sizes hold, recomputed where stored"

    def check(self, trajectory: Trajectory) -> Drop | Note | None:
        drop = self._possible(trajectory.final_workspace) or _replayed(trajectory)
        if drop is not None:
            return drop
        folder = self.context.stored_workspace(trajectory.id)
        if folder is None:
            return Note(NO_STORED_WORKSPACE)
        from ..agent_tools import digests  # the engine's own digests of a workspace

        try:
            stored = digests(folder)
        except OSError:  # a file this process may not read (the agent's chmod 000)
            return Note(STORED_WORKSPACE_UNREADABLE)
        return _against_store(trajectory.final_workspace, stored)

    def _possible(self, files: list[FileDigest]) -> Drop | None:
        seen: set[str] = set()
        for entry in files:
            if not _SHA256.fullmatch(entry.sha256):
                return Drop("final_digest_malformed", f"{entry.path}: {entry.sha256!r}")
            if entry.path in seen:
                return Drop("final_duplicate_path", f"{entry.path} is listed twice")
            seen.add(entry.path)
            if entry.size > self.max_file_bytes:
                return Drop(
                    "final_size_impossible",
                    f"{entry.path}: {entry.size:,} bytes; a rollout's files stop at "
                    f"{self.max_file_bytes:,}",
                )
        return None


def _replayed(trajectory: Trajectory) -> Drop | None:
    """The initial workspace with every recorded change applied, in order, must be the
    final one: the engine records the agent's changes at each turn's end and at the close,
    and each patch the user applied."""
    state = {f.path: f.sha256 for f in trajectory.initial_workspace}
    for event in trajectory.workspace_events:
        for change in event.files:
            if change.change == "deleted" or change.sha256_after is None:
                state.pop(change.path, None)
            else:
                state[change.path] = change.sha256_after
    final = {f.path: f.sha256 for f in trajectory.final_workspace}
    if state == final:
        return None
    path = sorted(p for p in state.keys() | final.keys() if state.get(p) != final.get(p))[0]
    return Drop(
        "final_disagrees_with_events",
        f"{path}: the events leave {_short(state.get(path))}, the final workspace lists "
        f"{_short(final.get(path))}",
    )


def _against_store(recorded: list[FileDigest], stored: Mapping[str, FileDigest]) -> Drop | None:
    listed = {f.path: f for f in recorded}
    for path in sorted(listed.keys() | stored.keys()):
        mine, found = listed.get(path), stored.get(path)
        if mine is None or found is None:
            where = "not in the stored workspace" if found is None else "stored, not recorded"
            return Drop("final_files_differ", f"{path}: {where}")
        if mine.sha256 != found.sha256:
            return Drop(
                "final_digest_mismatch",
                f"{path}: recorded {_short(mine.sha256)}, stored {_short(found.sha256)}",
            )
        if mine.size != found.size:
            return Drop(
                "final_size_mismatch",
                f"{path}: recorded {mine.size:,} bytes, stored {found.size:,}",
            )
    return None


def _short(digest: str | None) -> str:
    return "nothing" if digest is None else f"sha256 {digest[:12]}…"


__all__ = [
    "AgentEcho",
    "FinalWorkspace",
    "PrivateState",
    "RewardConsistency",
    "TurnConsistency",
    "UniqueRecords",
    "VerdictConsistency",
    "content_digest",
]
