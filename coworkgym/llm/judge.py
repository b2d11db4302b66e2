"""The rubric judge (V_LLM): scores a workspace against a verifier spec's rubric items.

One judge call shows the model the user's instruction, the rubric items and the evidence
files (rendered as text: XLSX as rows, DOCX as paragraphs) and asks for JSON matching a
schema — per item a score in [0, 1], a rationale and quotes of the evidence it relied on.
The request asks for ``response_format`` json_schema (strict); a server that refuses that
gets the same request without it, and the answer is parsed from the text (code fences
allowed). Temperature 0.

A malformed answer (not JSON, an item missing or unknown, a score out of range, no cited
evidence) is retried with the problem stated, up to ``max_attempts`` per sample. With
``samples`` > 1 the per-item scores are combined by mean or majority. When too few samples
are valid the judge raises ``JudgeError``: the verification is then *invalid* — never a 0
(``judged_verification`` turns it into an invalid ``VerifyOutcome``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any, Literal, cast

import openai
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..package.limits import zip_problem
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime, VerifyOutcome
from ..verifier.spec import RubricItem
from .errors import JudgeError

log = structlog.get_logger(__name__)

TEXT_SUFFIXES = {".csv", ".md", ".txt", ".json", ".py", ".tsv", ".yaml", ".yml", ".html"}
MAX_EVIDENCE_FILE_BYTES = 5_000_000
FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)

JUDGE_SYSTEM = """\
You are an impartial grader of work an AI coworker did for a user. For each rubric item,
score how well the workspace meets the criterion, from 0 (not at all) to 1 (fully), using
only the evidence shown. Quote the evidence you relied on verbatim (short quotes). If the
evidence needed is missing, the score is 0 and the quote says what is missing. Answer with
one JSON object: {"items": [{"id", "score", "rationale", "evidence": [quotes]}]}, one entry
per rubric item, nothing else.
"""


class ItemScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    score: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(min_length=1)
    evidence: list[str] = Field(min_length=1)


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[ItemScore]


@dataclass
class Judgement:
    scores: dict[str, float]  # item id → combined score: what run_verifier(rubric_scores=) takes
    samples: list[Verdict] = field(default_factory=list)
    attempts: int = 0

    def rationale(self, item: str) -> list[str]:
        return [i.rationale for v in self.samples for i in v.items if i.id == item]


def response_schema(ids: Sequence[str]) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(ids)},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "rationale": {"type": "string"},
            "evidence": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
        "required": ["id", "score", "rationale", "evidence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"items": {"type": "array", "items": item}},
        "required": ["items"],
        "additionalProperties": False,
    }


class RubricJudge:
    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        samples: int = 1,
        combine: Literal["mean", "majority"] = "mean",
        max_attempts: int = 3,
        temperature: float = 0.0,
        evidence_chars: int = 40_000,
    ) -> None:
        if samples < 1 or max_attempts < 1:
            raise ValueError("samples and max_attempts must be at least 1")
        self.client = client
        self.model = model
        self.samples = samples
        self.combine = combine
        self.max_attempts = max_attempts
        self.temperature = temperature
        self.evidence_chars = evidence_chars
        self.structured = True  # until a server refuses response_format

    def judge(self, rubric: Sequence[RubricItem], workspace: Path, instruction: str) -> Judgement:
        if not rubric:
            return Judgement(scores={})
        ids = [item.id for item in rubric]
        prompt = self._prompt(rubric, workspace, instruction)
        judgement = Judgement(scores={})
        errors: list[str] = []
        for _ in range(self.samples):
            verdict = self._sample(prompt, ids, judgement, errors)
            if verdict is not None:
                judgement.samples.append(verdict)
        needed = self.samples // 2 + 1
        if len(judgement.samples) < needed:
            raise JudgeError(
                f"{len(judgement.samples)} of {self.samples} judge samples valid (need {needed}); "
                f"last problems: {'; '.join(errors[-3:])}"
            )
        judgement.scores = {i: self._combine(i, judgement.samples) for i in ids}
        return judgement

    def scores(
        self, rubric: Sequence[RubricItem], workspace: Path, instruction: str
    ) -> dict[str, float] | None:
        """The scores, or None when the judge failed (the caller must treat it as invalid)."""
        try:
            return self.judge(rubric, workspace, instruction).scores
        except JudgeError as exc:
            log.warning("rubric judge invalid", error=str(exc))
            return None

    # ---- one sample -----------------------------------------------------------------
    def _sample(
        self, prompt: str, ids: list[str], judgement: Judgement, errors: list[str]
    ) -> Verdict | None:
        messages: list[dict[str, str]] = [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": prompt},
        ]
        for _ in range(self.max_attempts):
            judgement.attempts += 1
            try:
                content = self._ask(messages, ids)
            except openai.APIError as exc:  # the client already retried 429/5xx/timeouts
                errors.append(f"API error: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            try:
                return parse_verdict(content, ids)
            except ValueError as exc:
                errors.append(str(exc))
                messages += [
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"That answer is invalid: {exc}. Answer again "
                        "with one JSON object that follows the schema exactly.",
                    },
                ]
        return None

    def _ask(self, messages: list[dict[str, str]], ids: list[str]) -> str:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": cast(Any, messages),
            "temperature": self.temperature,
        }
        if self.structured:
            schema = {"name": "rubric_scores", "schema": response_schema(ids), "strict": True}
            try:
                reply = self.client.chat.completions.create(
                    **kwargs,
                    response_format=cast(Any, {"type": "json_schema", "json_schema": schema}),
                )
                return _content(reply)
            except openai.BadRequestError as exc:
                # Servers without structured output answer 400; ask for plain JSON instead.
                log.info("judge: response_format refused, parsing JSON from text", error=str(exc))
                self.structured = False
        return _content(self.client.chat.completions.create(**kwargs))

    def _combine(self, item: str, verdicts: list[Verdict]) -> float:
        scores = [i.score for v in verdicts for i in v.items if i.id == item]
        if self.combine == "mean":
            return round(mean(scores), 6)
        counts = Counter(round(s, 2) for s in scores)
        top = max(counts.values())
        return min(s for s, c in counts.items() if c == top)  # a tie goes to the lower score

    # ---- the evidence ---------------------------------------------------------------
    def _prompt(self, rubric: Sequence[RubricItem], workspace: Path, instruction: str) -> str:
        paths = sorted({p for item in rubric for p in item.evidence_paths})
        if not paths or any(not item.evidence_paths for item in rubric):
            paths = sorted({*paths, *_listing(workspace)})
        per_file = max(2_000, self.evidence_chars // max(1, len(paths)))
        evidence = "\n\n".join(
            f"=== {rel} ===\n{render(workspace, rel, per_file)}" for rel in paths
        )
        items = "\n".join(f"- {item.id}: {item.criterion}" for item in rubric)
        return (
            f"## The user's request\n{instruction.strip()}\n\n## Rubric items\n{items}\n\n"
            f"## Evidence (files from the final workspace)\n{evidence}\n"
        )


def _content(reply: Any) -> str:
    return (reply.choices[0].message.content or "") if reply.choices else ""


def parse_verdict(content: str, ids: Sequence[str]) -> Verdict:
    """A verdict from the model's text; ValueError says what is wrong with it."""
    text = content.strip()
    fenced = FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        text = text[start : end + 1] if 0 <= start < end else text
    try:
        verdict = Verdict.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from exc
    got = [i.id for i in verdict.items]
    missing = [i for i in ids if i not in got]
    unknown = [i for i in got if i not in ids]
    twice = sorted({i for i in got if got.count(i) > 1})
    if missing or unknown or twice:
        raise ValueError(f"items missing {missing}, unknown {unknown}, repeated {twice}")
    return verdict


def _listing(workspace: Path) -> list[str]:
    return sorted(
        p.relative_to(workspace).as_posix()
        for p in workspace.rglob("*")
        if p.is_file() and not p.is_symlink()
    )[:30]


def render(workspace: Path, rel: str, limit: int) -> str:
    """A workspace file as text for the judge (never following a symlink out)."""
    path = workspace / rel
    if ".." in Path(rel).parts or path.is_symlink() or not path.is_file():
        return "(missing)"
    size = path.stat().st_size
    if size > MAX_EVIDENCE_FILE_BYTES:
        return f"(too large to show: {size} bytes)"
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".docx") and (bomb := zip_problem(rel, path.read_bytes())):
        return f"(not opened: {bomb})"
    try:
        if suffix == ".xlsx":
            text = _xlsx_text(path)
        elif suffix == ".docx":
            text = _docx_text(path)
        elif suffix in TEXT_SUFFIXES:
            text = path.read_text(encoding="utf-8", errors="replace")
        else:
            return f"(binary file, {size} bytes)"
    except Exception as exc:  # a corrupt deliverable is evidence too
        return f"(unreadable: {type(exc).__name__}: {exc})"
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more chars]"


def _xlsx_text(path: Path) -> str:
    import openpyxl

    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    lines = []
    for sheet in workbook.worksheets:
        lines.append(f"[sheet {sheet.title}]")
        for row in sheet.iter_rows(max_row=500, values_only=True):
            lines.append(",".join("" if v is None else str(v) for v in row))
    workbook.close()
    return "\n".join(lines)


def _docx_text(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    lines = [p.text for p in document.paragraphs]
    for table in document.tables:
        lines += [" | ".join(cell.text for cell in row.cells) for row in table.rows]
    return "\n".join(lines)


def judged_verification(
    runtime: LocalRuntime,
    pkg: EnvironmentPackage,
    workspace: Path,
    workdir: str,
    judge: RubricJudge,
    *,
    trajectory: dict[str, Any] | None = None,
) -> VerifyOutcome:
    """Verify a workspace with both halves of V: the judge's rubric scores feed the engine;
    a judge failure makes the whole verification invalid (never a 0)."""
    rubric = pkg.verifier.rubric if pkg.verifier else []
    scores: dict[str, float] | None = None
    if rubric:
        try:
            scores = judge.judge(rubric, workspace, pkg.instruction).scores
        except JudgeError as exc:
            return VerifyOutcome(False, None, error=f"rubric judge failed: {exc}")
    return runtime.run_verifier(
        pkg, workspace, workdir, trajectory=trajectory, rubric_scores=scores
    )


__all__ = ["Judgement", "RubricJudge", "judged_verification", "parse_verdict", "response_schema"]
