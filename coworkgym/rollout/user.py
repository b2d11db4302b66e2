"""The stateful user (πU), played outside the agent's sandbox.

It holds what the agent must never read — ``.user/user.json`` (persona, latent goals,
knowledge boundary, signal plan) and ``.patch/turn-NN/`` (later turns and their files) —
and watches what the agent actually does:

- after every tool call it checks whether the next turn's trigger holds on the workspace
  (``artifact_appeared``: the deliverable was absent when the turn began and exists now;
  ``artifact_changed``: its digest differs from the one at the turn's start;
  ``tool_calls``: the agent made N calls in this turn) — if so, and the turn has had the
  ``min_tool_calls`` its plan gives, the user speaks at once;
- when the agent ends its turn (``finish`` or a reply without a tool call) the next turn
  fires: its own trigger (``after_agent_turn``) holds, or, when it waits for a deliverable
  that never came, the user moves on anyway (``trigger_detail`` says so). The user never
  lets the conversation end with planned turns unsaid; the episode is done once the agent
  ends its turn after the last one.

A turn applies only its authorized updates, and only to declared inputs (with an artifact
graph); anything else is refused and recorded as an ``unauthorized_update`` fault. The
update writes through no symlink: the agent may have planted one where the input lives,
and this process is not sandboxed.

The user speaks with a *voice*: scripted (the turn messages of ``patch.json``; answers
from the signal plan by keyword match) or an LLM (OpenAI-compatible). An LLM's words are
checked: private state said near-verbatim (``private_state_leaked``), a turn message that
omits or denies the files it patched (``contradicts_patch``); a failing model falls back
to the scripted words and records ``simulator_error``. Any reply, scripted or not, that
says a giveaway of one of the family's declared traps (``TaskFamily.traps``) is recorded
as ``trap_given_away``; a scripted answer reveals a signal only to a question about its
subject (``matches``). Faults are recorded, not hidden:
the filters decide what to keep.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import openai
import structlog

from ..package.cowork import ARTIFACT_TRIGGERS, FileUpdate, Signal, TurnPatch, UserState
from ..package.package import EnvironmentPackage
from ..runtime.workspace import apply_patch
from .trajectory import FileChange, SimulatorFault, SimulatorFaultKind, TriggerKind

if TYPE_CHECKING:
    from ..families.base import Trap

log = structlog.get_logger(__name__)

Speaker = Literal["scripted", "llm"]
USER_LANE_MARKER = "You are role-playing the user"  # the system prompt's first words

# Words that say nothing about *what* a signal is about ("agent asks about units").
STOPWORDS = frozenset(
    """a an the and or of to in on for with at by from is are was were be been it its this
    that these those what which who whom how when where why do does did can could would
    should will shall may might i you we they he she me my your our their agent asks ask
    asked asking about user question questions mentions mention says say tells tell any
    some there here if then than so not no yes please""".split()  # noqa: SIM905 - a word list
)
LEAK_OVERLAP = 0.6  # share of an item's word trigrams that makes a reply a leak
NEGATION = re.compile(
    r"\b(?:did\s*n[o']t|have\s*n[o']t|has\s*n[o']t|not|never|no)\s+(?:\w+\s+){0,2}?"
    r"(?:change|changed|replace|replaced|update|updated|edit|edited|touch|touched|modif\w*)\b",
    re.IGNORECASE,
)


# ---- words ------------------------------------------------------------------------------
def words(text: str) -> list[str]:
    """Lower-case word stems (a trailing plural 's' dropped), for matching and leak checks."""
    out = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def keywords(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS and len(w) > 1}


def matches(question: str, trigger: str) -> bool:
    """A signal's trigger holds for a question about its subject: the question shares two
    of the trigger's content words (its one word, if it has only one). One shared word is
    not enough for a longer subject: "which calendar…" is not a question about "the time
    zone of the calendars", and the user answers only what is asked."""
    subject = keywords(trigger)
    return len(subject & keywords(question)) >= min(2, len(subject)) > 0


# Where one question ends and the next begins within one ask: a question mark, a new line,
# a semicolon, or a numbered item ("1)", "2.").
CLAUSE_BREAK = re.compile(r"[?;\n]|(?:^|\s)\(?\d{1,2}[.)]\s")


def answered(question: str, signals: Sequence[Signal]) -> list[Signal]:
    """The signals a question asks for: per thing asked (a clause), those whose subject it
    matches about as well as the best one (half its share of the subject's words, or more).
    An agent that asks two things in one message gets two answers; a question on one
    subject that brushes against another in passing (it says "lines" and "posted" while
    asking which account a charge goes to) does not get that other answer too, while a
    question that fits two subjects alike ("not settled … 60 days after its date … at the
    period end") gets both."""
    clauses = [c for c in CLAUSE_BREAK.split(question) if c and keywords(c)]
    chosen: list[Signal] = []
    for clause in clauses or [question]:
        for signal in _closest(clause, signals):
            if signal not in chosen:
                chosen.append(signal)
    if not chosen:  # the subject's words spread over clauses: the whole question decides
        chosen = _closest(question, signals)
    return [s for s in signals if s in chosen]  # in the plan's order


def _closest(text: str, signals: Sequence[Signal]) -> list[Signal]:
    asked = keywords(text)

    def share(signal: Signal) -> float:
        subject = keywords(signal.trigger)
        return len(subject & asked) / len(subject)

    held = [s for s in signals if matches(text, s.trigger)]
    if not held:
        return []
    best = max(share(s) for s in held)
    return [s for s in held if share(s) >= best / 2]


def near_verbatim(item: str, text: str) -> bool:
    """Whether ``text`` repeats ``item`` word for word, or nearly (most of its trigrams)."""
    mine, theirs = words(item), words(text)
    if not mine:
        return False
    if len(mine) < 4:
        joined = " ".join(theirs)
        return f" {' '.join(mine)} " in f" {joined} "
    grams = {tuple(mine[i : i + 3]) for i in range(len(mine) - 2)}
    seen = {tuple(theirs[i : i + 3]) for i in range(len(theirs) - 2)}
    return len(grams & seen) / len(grams) >= LEAK_OVERLAP


def leaked(text: str, private: Sequence[str]) -> list[str]:
    return [item for item in private if near_verbatim(item, text)]


def contradiction(message: str, patch: TurnPatch) -> str | None:
    """Why a turn message disagrees with the updates it applies, or None."""
    lowered = message.lower()
    missing = [
        u.path
        for u in patch.updates
        if u.path.lower() not in lowered and Path(u.path).name.lower() not in lowered
    ]
    if missing:
        return f"the message does not mention the patched file(s) {missing}"
    if patch.updates and NEGATION.search(message):
        return f"the message denies changing files it changed ({NEGATION.search(message)})"
    return None


# ---- voices -----------------------------------------------------------------------------
@dataclass(frozen=True)
class VoiceContext:
    state: UserState
    instruction: str
    request: str  # what the user currently asks for (the latest turn's message)


class Voice(Protocol):
    speaker: Speaker

    def turn_message(self, patch: TurnPatch, ctx: VoiceContext) -> str: ...

    def answer(self, question: str, allowed: Sequence[Signal], ctx: VoiceContext) -> str: ...


class ScriptedVoice:
    """The package's own words: turn messages from patch.json; answers from the signal
    plan, else a polite "I don't know" that points back at the request."""

    speaker: Speaker = "scripted"

    def turn_message(self, patch: TurnPatch, ctx: VoiceContext) -> str:
        return patch.message

    def answer(self, question: str, allowed: Sequence[Signal], ctx: VoiceContext) -> str:
        if allowed:
            return " ".join(_sentence(s.reveals) for s in allowed)
        if any(keywords(item) & keywords(question) for item in ctx.state.knowledge_boundary):
            return "I'm afraid I don't know that."
        return f"I don't know that, sorry. What I need is what I asked for: {_gist(ctx.request)}"


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _gist(request: str, limit: int = 700) -> str:
    """The request restated on one line (clipped: the agent still has the full text)."""
    text = " ".join(request.split())
    return text if len(text) <= limit else text[:limit] + "…"


class LLMVoice:
    """The user played by a model (through the LLM gateway). It is told the private state
    with the instruction to keep it private; what it says is checked afterwards."""

    speaker: Speaker = "llm"

    def __init__(self, client: openai.OpenAI, model: str, *, temperature: float = 0.7) -> None:
        self.client = client
        self.model = model
        self.temperature = temperature

    def _system(self, ctx: VoiceContext) -> str:
        s = ctx.state
        goals = "\n".join(f"- {g}" for g in s.latent_goals)
        unknown = "\n".join(f"- {k}" for k in s.knowledge_boundary) or "- (nothing listed)"
        return (
            f"{USER_LANE_MARKER} in a conversation with an AI coworker who works on your "
            f"files.\nYou are: {s.persona} (role: {s.role}). Tone: {s.tone}.\n"
            f"Your first request was:\n{ctx.instruction.strip()}\n\n"
            f"Private wishes (never state them; they only colour how you react):\n{goals}\n"
            f"Things you do not know (if asked, say you don't know; never invent):\n{unknown}\n"
            "Write only what you say to the coworker, in one short message."
        )

    def _say(self, system: str, prompt: str) -> str:
        reply = self.client.chat.completions.create(
            model=self.model,
            messages=cast(
                Any,
                [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            ),
            temperature=self.temperature,
        )
        text = (reply.choices[0].message.content or "").strip() if reply.choices else ""
        if not text:
            raise ValueError("the user model returned an empty message")
        return text

    def turn_message(self, patch: TurnPatch, ctx: VoiceContext) -> str:
        files = ", ".join(u.path for u in patch.updates) or "(no files changed)"
        prompt = (
            "Tell the coworker the following, in your own words. Name every changed file by "
            f"its path.\nWhat to say: {patch.message}\nFiles you changed: {files}"
        )
        return self._say(self._system(ctx), prompt)

    def answer(self, question: str, allowed: Sequence[Signal], ctx: VoiceContext) -> str:
        reveal = "\n".join(f"- {s.reveals}" for s in allowed) or "- nothing new"
        prompt = (
            f"The coworker asks: {question}\nYou may tell them:\n{reveal}\n"
            "Answer briefly. If you may tell them nothing that answers it, say you don't "
            f"know and restate what you need: {_gist(ctx.request)}"
        )
        return self._say(self._system(ctx), prompt)


# ---- the simulator -----------------------------------------------------------------------
@dataclass(frozen=True)
class Due:
    """The next turn's trigger held; the turn is said when the agent is next shown it."""

    patch: TurnPatch
    trigger: TriggerKind
    detail: str


@dataclass
class Fired:
    """A later user turn: what was said, why, and what it did to the workspace."""

    patch: TurnPatch
    message: str
    trigger: TriggerKind
    detail: str
    speaker: Speaker
    files: list[FileChange] = field(default_factory=list)
    invalidates: list[str] = field(default_factory=list)


@dataclass
class Answer:
    text: str
    revealed: list[str]
    speaker: Speaker


class UserSimulator:
    def __init__(
        self, pkg: EnvironmentPackage, workspace: Path, voice: Voice | None = None
    ) -> None:
        self.pkg = pkg
        self.workspace = workspace
        self.voice: Voice = voice or ScriptedVoice()
        self.state = pkg.user or UserState(
            persona="A user who asked for the task in instruction.md.",
            role="user",
            latent_goals=["the task done as asked"],
        )
        self.patches = sorted(pkg.patches, key=lambda p: p.turn)
        self.turn = 0  # the user turn the agent is working on
        self.fired = 0  # later turns said so far
        self.agent_turns = 0  # turns the agent has ended
        self.calls_this_turn = 0
        self.request = pkg.instruction
        self.revealed: list[str] = []
        self.faults: list[SimulatorFault] = []
        self.seconds = 0.0  # time spent being the user (for the benchmarks)
        self._baseline: dict[str, str | None] = {}
        self.traps = family_traps(pkg)
        self._mark_turn_start()

    # ---- what the engine asks ---------------------------------------------------------
    @property
    def planned(self) -> int:
        return len(self.patches)

    @property
    def remaining(self) -> int:
        return self.planned - self.fired

    @property
    def upcoming(self) -> TurnPatch | None:
        return self.patches[self.fired] if self.fired < self.planned else None

    def after_tool_call(self) -> Due | None:
        """The agent made a tool call: does the next turn's trigger hold now? A mid-turn
        trigger waits until the turn has had the calls its plan gives (``min_tool_calls``)."""
        self.calls_this_turn += 1
        patch = self.upcoming
        if patch is None:
            return None
        trigger = patch.trigger
        if self.calls_this_turn < (trigger.min_tool_calls or 1):
            return None
        calls = f"after {self.calls_this_turn} tool calls in turn {self.turn}"
        if trigger.kind in ARTIFACT_TRIGGERS and trigger.artifact:
            artifact = trigger.artifact
            if trigger.kind == "artifact_changed" and self._changed(artifact):
                detail = f"{artifact} changed since turn {self.turn} began ({calls})"
                return Due(patch, "artifact_changed", detail)
            if trigger.kind != "artifact_changed" and self._appeared(artifact):
                detail = f"{artifact} appeared: absent when turn {self.turn} began ({calls})"
                return Due(patch, "artifact_appeared", detail)
        if trigger.kind == "tool_calls" and trigger.tool_calls:
            if self.calls_this_turn >= trigger.tool_calls:
                return Due(
                    patch, "tool_calls", f"{self.calls_this_turn} tool calls in turn {self.turn}"
                )
        return None

    def after_agent_turn(self, *, claimed_done: bool) -> Due | None:
        """The agent ended its turn: the next turn is due, or there is none (done). The
        detail says what happened, and how it differs from the plan when it does (an
        earlier turn that fired mid-turn shifts the agent's count of ended turns)."""
        self.agent_turns += 1
        patch = self.upcoming
        if patch is None:
            return None
        kind: TriggerKind = "agent_claimed_done" if claimed_done else "agent_ended_turn"
        how = "finished" if claimed_done else "ended its turn"
        ended = f"the agent {how} in turn {self.turn} after {self.calls_this_turn} tool calls"
        trigger = patch.trigger
        if trigger.kind == "after_agent_turn":
            if trigger.agent_turn == self.agent_turns:
                detail = f"{ended}: its turn {self.agent_turns} ended, as planned"
            else:
                detail = (
                    f"{ended}: its turn {self.agent_turns} ended; the plan said after its turn "
                    f"{trigger.agent_turn}, and the user never leaves a planned turn unsaid"
                )
        elif trigger.kind in ARTIFACT_TRIGGERS and trigger.artifact:
            changed = trigger.kind == "artifact_changed"
            if (self._changed if changed else self._appeared)(trigger.artifact):
                detail = f"{ended}, with {trigger.artifact} {'changed' if changed else 'produced'}"
            else:
                what = "changing" if changed else "producing"
                detail = f"{ended} without {what} {trigger.artifact}; the user moves on"
        else:
            detail = f"{ended}, before the planned {trigger.tool_calls}; the user moves on"
        return Due(patch, kind, detail)

    def answer(self, question: str) -> Answer:
        started = time.perf_counter()
        try:
            allowed = answered(question, self.state.signal_plan)
            ctx = self._context()
            speaker = self.voice.speaker
            try:
                text = self.voice.answer(question, allowed, ctx)
            except (openai.APIError, ValueError) as exc:
                self.fault("simulator_error", f"the user model failed to answer: {exc}")
                text, speaker = ScriptedVoice().answer(question, allowed, ctx), "scripted"
            if speaker == "llm":
                self._check_leak(text, allowed)
            self._check_traps(text)
            revealed = [s.reveals for s in allowed]
            self.revealed += [r for r in revealed if r not in self.revealed]
            return Answer(text, revealed, speaker)
        finally:
            self.seconds += time.perf_counter() - started

    # ---- firing a turn --------------------------------------------------------------
    def fire(self, due: Due) -> Fired:
        """Say the due turn and apply its authorized updates (at the moment the agent is
        shown the message, so the record has one point where the user spoke and edited)."""
        if due.patch is not self.upcoming:
            raise RuntimeError(f"turn {due.patch.turn} is not the next turn (at {self.turn})")
        patch, kind, detail = due.patch, due.trigger, due.detail
        started = time.perf_counter()
        try:
            files, invalidates = self._apply(patch)
            ctx = self._context()
            speaker = self.voice.speaker
            try:
                message = self.voice.turn_message(patch, ctx)
            except (openai.APIError, ValueError) as exc:
                self.fault("simulator_error", f"the user model failed at turn {patch.turn}: {exc}")
                message, speaker = patch.message, "scripted"
            self._check_traps(message, turn=patch.turn)
            if speaker == "llm":
                self._check_leak(message, [])
                why = contradiction(message, patch)
                if why:
                    self.fault("contradicts_patch", why, turn=patch.turn)
            self.turn = patch.turn
            self.fired += 1
            self.request = message
            self._mark_turn_start()
            return Fired(patch, message, kind, detail, speaker, files, invalidates)
        finally:
            self.seconds += time.perf_counter() - started

    def _apply(self, patch: TurnPatch) -> tuple[list[FileChange], list[str]]:
        allowed = [u for u in patch.updates if self._authorized(u, patch.turn)]
        before = {u.path: _digest(self.workspace / u.path) for u in allowed}
        for update in allowed:
            _clear_way(self.workspace, update.path)
        if len(allowed) == len(patch.updates):
            apply_patch(self.pkg, patch.turn, self.workspace)
        else:  # apply the authorized part only; the rest is already recorded as a fault
            sources = self.pkg.patch_files(patch.turn)
            for update in allowed:
                target = self.workspace / update.path
                if update.op == "delete":
                    target.unlink(missing_ok=True)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(sources[update.source or ""])
        files = []
        for update in allowed:
            after = _digest(self.workspace / update.path)
            old = before[update.path]
            change: Literal["created", "modified", "deleted"] = (
                "deleted" if after is None else "created" if old is None else "modified"
            )
            files.append(
                FileChange(path=update.path, change=change, sha256_before=old, sha256_after=after)
            )
        invalidates = set(patch.invalidates)
        if self.pkg.artifacts is not None:
            for update in allowed:
                invalidates |= self.pkg.artifacts.dependents(update.path)
        return files, sorted(invalidates)

    def _authorized(self, update: FileUpdate, turn: int) -> bool:
        graph = self.pkg.artifacts
        if graph is not None and update.path not in {a.path for a in graph.inputs}:
            self.fault(
                "unauthorized_update",
                f"turn {turn} would {update.op} {update.path}, which is not a declared input",
                turn=turn,
            )
            return False
        if update.op == "write" and update.source not in self.pkg.patch_files(turn):
            self.fault(
                "unauthorized_update",
                f"turn {turn} writes {update.path} from {update.source}, which the patch lacks",
                turn=turn,
            )
            return False
        return True

    # ---- helpers --------------------------------------------------------------------
    def _context(self) -> VoiceContext:
        return VoiceContext(self.state, self.pkg.instruction, self.request)

    def _mark_turn_start(self) -> None:
        self.calls_this_turn = 0
        patch = self.upcoming
        self._baseline = {}
        if patch is not None and patch.trigger.artifact:
            artifact = patch.trigger.artifact
            self._baseline[artifact] = _digest(self.workspace / artifact)

    def _appeared(self, artifact: str) -> bool:
        """Created in this turn: absent when the turn began, present now."""
        return (
            self._baseline.get(artifact) is None and _digest(self.workspace / artifact) is not None
        )

    def _changed(self, artifact: str) -> bool:
        """Its digest differs from the one at the turn's start (created, rewritten, deleted)."""
        return _digest(self.workspace / artifact) != self._baseline.get(artifact)

    def _check_leak(self, text: str, allowed: Sequence[Signal]) -> None:
        said_ok = {s.reveals for s in allowed} | set(self.revealed)
        private = [*self.state.latent_goals, *self.state.knowledge_boundary]
        private += [s.reveals for s in self.state.signal_plan if s.reveals not in said_ok]
        for item in leaked(text, private):
            self.fault("private_state_leaked", f"said near-verbatim: {item!r}")

    def _check_traps(self, text: str, *, turn: int | None = None) -> None:
        """A reply that gives away one of the family's declared traps (phrases the
        instruction itself does not state) is recorded: the user must not do the agent's
        noticing for it."""
        for trap in self.traps:
            phrase = trap.given_away(text)
            if phrase and not re.search(phrase, self.pkg.instruction, re.IGNORECASE):
                self.fault("trap_given_away", f"{trap.name}: said {phrase!r}", turn=turn)

    def fault(self, kind: SimulatorFaultKind, detail: str, *, turn: int | None = None) -> None:
        log.info("user simulator fault", kind=kind, detail=detail)
        self.faults.append(
            SimulatorFault(kind=kind, turn=self.turn if turn is None else turn, detail=detail)
        )


def family_traps(pkg: EnvironmentPackage) -> tuple[Trap, ...]:
    """The traps the package's family declares (none for a plain Harbor task)."""
    from ..families import FAMILIES  # the families are heavy (openpyxl, docx): on need

    cowork = pkg.config.cowork
    family = FAMILIES.get(cowork.family or "") if cowork is not None else None
    return family.traps if family is not None else ()


def _digest(path: Path) -> str | None:
    """sha256 of a regular file (never through a symlink), None when there is none."""
    if path.is_symlink() or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _clear_way(workspace: Path, rel: str) -> None:
    """Remove whatever the agent put on the way to ``rel``: a symlinked directory or file,
    or a directory where the file goes. The user's authorized file replaces it; nothing is
    ever written through a link (this process is not sandboxed)."""
    current = workspace
    parts = Path(rel).parts
    for index, part in enumerate(parts):
        current = current / part
        last = index == len(parts) - 1
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            current.unlink()
        elif last and stat.S_ISDIR(mode):
            shutil.rmtree(current)
        elif not stat.S_ISDIR(mode) and not (last and stat.S_ISREG(mode)):
            current.unlink()  # a file where a directory goes, or a FIFO/socket: never opened


__all__ = [
    "USER_LANE_MARKER",
    "Answer",
    "Due",
    "Fired",
    "LLMVoice",
    "ScriptedVoice",
    "UserSimulator",
    "Voice",
    "VoiceContext",
    "contradiction",
    "leaked",
    "matches",
    "near_verbatim",
]
