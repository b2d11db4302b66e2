"""The execution review: run the package and probe its verifier with controlled failures.

The reference completion must pass; the untouched workspace, missing, corrupted and
shortcut deliverables, damaged inputs and (multi-turn) results computed before a user
patch must all fail. Thresholds come from the verifier spec's scoring (Harbor tasks: a
reward of 1.0 passes, anything under 0.5 fails).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime, VerifyOutcome
from ..runtime.workspace import apply_patch, copy_tree, materialize, snapshot
from .defects import Defect, DefectCode
from .mutations import CORRUPTIONS, empty, remove


@dataclass
class ReviewStats:
    verifier_runs: int = 0
    solution_runs: int = 0
    reference_reward: float | None = None
    outputs: list[str] = field(default_factory=list)


@dataclass
class Thresholds:
    passing: float
    failing: float

    @classmethod
    def of(cls, pkg: EnvironmentPackage) -> Thresholds:
        if pkg.verifier is None:
            return cls(passing=1.0, failing=0.5)
        return cls(pkg.verifier.scoring.pass_threshold, pkg.verifier.scoring.fail_threshold)


class ExecutionReview:
    def __init__(self, pkg: EnvironmentPackage, runtime: LocalRuntime) -> None:
        self.pkg = pkg
        self.runtime = runtime
        self.limits = Thresholds.of(pkg)
        self.stats = ReviewStats()
        self.defects: list[Defect] = []
        self.root = Path(tempfile.mkdtemp(prefix="cwg-review-"))

    # ---- helpers --------------------------------------------------------------------
    @contextmanager
    def variant(self, base: Path, name: str) -> Iterator[Path]:
        path = self.root / name
        copy_tree(base, path)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def score(self, workspace: Path, label: str) -> VerifyOutcome | None:
        """Verify a workspace; an invalid run becomes a defect and returns None."""
        self.stats.verifier_runs += 1
        outcome = self.runtime.run_verifier(self.pkg, workspace, self.workdir)
        if not outcome.valid:
            self.defects.append(
                Defect.of(
                    DefectCode.VERIFIER_INVALID,
                    f"verifier gave no valid reward on the {label} workspace: {outcome.error}",
                    state=label,
                )
            )
            return None
        return outcome

    def must_fail(
        self, workspace: Path, label: str, code: DefectCode, bar: float, **evidence: object
    ) -> None:
        outcome = self.score(workspace, label)
        if outcome is not None and outcome.reward is not None and outcome.reward >= bar:
            message = f"the {label} workspace scores {outcome.reward:.3f} (must be < {bar})"
            scores = outcome.component_scores()
            found = {"state": label, "reward": outcome.reward, "components": scores, **evidence}
            self.defects.append(Defect.with_evidence(code, message, found))

    # ---- the review -----------------------------------------------------------------
    def run(self) -> list[Defect]:
        try:
            self._run()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
        return self.defects

    def _run(self) -> None:
        s0 = self.root / "s0"
        layout = materialize(self.pkg, s0)
        self.workdir = layout.workdir
        if layout.skipped and not self.pkg.is_cowork:
            self.defects.append(
                Defect.of(
                    DefectCode.EXECUTION_UNSUPPORTED,
                    f"{len(layout.skipped)} Dockerfile line(s) not emulated locally",
                    severity="warning",
                    skipped=layout.skipped[:5],
                )
            )
        reference = copy_tree(s0, self.root / "reference")
        if not self._solve(reference):
            return
        final_inputs = self._final_inputs(s0)
        outputs = self._outputs(final_inputs, reference)
        self.stats.outputs = outputs
        self._leaked_outputs(s0, reference, outputs)  # before scoring: a leak is a leak
        outcome = self.score(reference, "reference")
        if outcome is None:
            return
        self.stats.reference_reward = outcome.reward
        if outcome.reward is None or outcome.reward < self.limits.passing:
            failing = {k: v for k, v in outcome.component_scores().items() if v < 1.0}
            self.defects.append(
                Defect.of(
                    DefectCode.REFERENCE_REJECTED,
                    f"the reference completion scores {outcome.reward} "
                    f"(pass threshold {self.limits.passing})",
                    failing_components=failing,
                    details=_evidence(outcome),
                )
            )
            return
        self.must_fail(final_inputs, "untouched", DefectCode.ACCEPTS_UNTOUCHED, self.limits.failing)
        for rel in outputs:
            self._artifact_mutations(reference, rel)
        self._shortcuts(final_inputs, outputs)
        self._damaged_inputs(reference)
        self._stale(s0)

    def _solve(self, workspace: Path) -> bool:
        results = self.runtime.run_reference(self.pkg, workspace, self.workdir)
        self.stats.solution_runs += len(results)
        if results and results[-1].ok and len(results) == len(self.pkg.patches) + 1:
            return True
        failed = results[-1]
        code = DefectCode.SOLUTION_FAILED
        if not self.pkg.is_cowork and "apt-get" in failed.stderr + failed.stdout:
            code = DefectCode.EXECUTION_UNSUPPORTED
        self.defects.append(
            Defect.of(
                code,
                f"solution/solve.sh failed at turn {len(results) - 1}: {failed.describe()}",
                turn=len(results) - 1,
            )
        )
        return False

    def _final_inputs(self, s0: Path) -> Path:
        """s0 with every user patch applied: the inputs the final deliverables answer to."""
        final = copy_tree(s0, self.root / "final-inputs")
        for patch in self.pkg.patches:
            apply_patch(self.pkg, patch.turn, final)
        return final

    def _outputs(self, inputs: Path, reference: Path) -> list[str]:
        """Deliverables: the declared outputs, else whatever the solution created or changed."""
        before, after = snapshot(inputs), snapshot(reference)
        produced = sorted(rel for rel, data in after.items() if before.get(rel) != data)
        if self.pkg.artifacts is not None:
            declared = [a.path for a in self.pkg.artifacts.outputs if a.required]
            missing = [rel for rel in declared if rel not in after]
            if missing:
                self.defects.append(
                    Defect.of(
                        DefectCode.SOLUTION_FAILED,
                        f"the reference solution did not produce declared outputs {missing}",
                        missing=missing,
                    )
                )
            return [rel for rel in declared if rel in after]
        declared_plain = self._declared_harbor_artifacts()
        return sorted(set(produced) | {rel for rel in declared_plain if rel in after})

    def _declared_harbor_artifacts(self) -> list[str]:
        """A plain Harbor task's ``artifacts`` that are files inside the workdir."""
        found = []
        for source in self.pkg.config.artifact_sources():
            try:
                rel = Path(source).relative_to(self.workdir).as_posix()
            except ValueError:
                continue
            if rel not in (".", ""):
                found.append(rel)
        return found

    def _leaked_outputs(self, s0: Path, reference: Path, outputs: list[str]) -> None:
        initial = snapshot(s0)
        contents = {content_key(data): rel for rel, data in initial.items() if len(data) >= 16}
        for rel in outputs:
            data = content_key((reference / rel).read_bytes())
            if rel in initial and content_key(initial[rel]) == data:  # already there, as is
                contents[data] = rel
            if data in contents:
                self.defects.append(
                    Defect.of(
                        DefectCode.LEAK_REFERENCE_OUTPUT,
                        f"reference output {rel} already sits in s0 as {contents[data]}",
                        output=rel,
                        s0_file=contents[data],
                    )
                )

    def _artifact_mutations(self, reference: Path, rel: str) -> None:
        bar = self.limits.passing
        with self.variant(reference, "missing") as ws:
            remove(ws / rel)
            self.must_fail(ws, f"{rel}-missing", DefectCode.ACCEPTS_MISSING_ARTIFACT, bar, file=rel)
        for name, corrupt in CORRUPTIONS.items():
            with self.variant(reference, name) as ws:
                how = corrupt(ws / rel)
                self.must_fail(
                    ws,
                    f"{rel}-{name}",
                    DefectCode.ACCEPTS_CORRUPTED_ARTIFACT,
                    bar,
                    file=rel,
                    corruption=how,
                )

    def _shortcuts(self, inputs: Path, outputs: list[str]) -> None:
        bar = self.limits.failing
        with self.variant(inputs, "empty-outputs") as ws:
            for rel in outputs:
                (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / rel).touch()
                empty(ws / rel)
            self.must_fail(ws, "empty-deliverables", DefectCode.ACCEPTS_SHORTCUT, bar)
        input_files = sorted(snapshot(inputs))
        if not input_files or not outputs:
            return
        with self.variant(inputs, "copied-inputs") as ws:
            for rel in outputs:
                source = _closest_input(rel, input_files)
                if source != rel:
                    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(ws / source, ws / rel)
            self.must_fail(ws, "inputs-copied-to-outputs", DefectCode.ACCEPTS_SHORTCUT, bar)

    def _damaged_inputs(self, reference: Path) -> None:
        if self.pkg.artifacts is None or not self.pkg.is_cowork:
            return
        for artifact in self.pkg.artifacts.inputs[:3]:
            target = reference / artifact.path
            if not target.is_file():
                continue
            with self.variant(reference, "damaged-input") as ws:
                remove(ws / artifact.path)
                self.must_fail(
                    ws,
                    f"{artifact.path}-deleted",
                    DefectCode.ACCEPTS_DAMAGED_INPUTS,
                    self.limits.passing,
                    file=artifact.path,
                )

    def _stale(self, s0: Path) -> None:
        """Multi-turn: deliverables computed before the user's patches must not pass after."""
        if not self.pkg.patches:
            return
        stale = copy_tree(s0, self.root / "stale")
        results = self.runtime.run_reference(self.pkg, stale, self.workdir, upto_turn=0)
        self.stats.solution_runs += len(results)
        if not results[-1].ok:
            return
        for patch in self.pkg.patches:
            apply_patch(self.pkg, patch.turn, stale)
        self.must_fail(
            stale, "stale-after-patches", DefectCode.ACCEPTS_STALE_RESULT, self.limits.passing
        )


def content_key(data: bytes) -> bytes:
    """What a file *says*: XLSX and DOCX are zips whose metadata carries a save timestamp,
    so two saves of the same workbook differ byte-wise; compare their parts instead."""
    if not data.startswith(b"PK"):
        return data
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = sorted(n for n in archive.namelist() if not n.startswith("docProps/"))
            digest = hashlib.sha256()
            for name in parts:
                digest.update(name.encode() + b"\0" + archive.read(name))
            return b"zip:" + digest.digest()
    except zipfile.BadZipFile:
        return data


def _closest_input(output: str, inputs: list[str]) -> str:
    suffix = Path(output).suffix
    same_kind = [i for i in inputs if Path(i).suffix == suffix]
    return (same_kind or inputs)[0]


def _evidence(outcome: VerifyOutcome) -> list[dict[str, object]]:
    return [
        {"id": c["id"], "score": c["score"], "evidence": c["evidence"]}
        for c in outcome.details.get("components", []) + outcome.details.get("red_lines", [])
        if c.get("score", 1.0) < 1.0
    ]


ReviewFn = Callable[[EnvironmentPackage, LocalRuntime], list[Defect]]
