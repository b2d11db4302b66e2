"""The execution review: run the package and probe its verifier with controlled failures.

The reference completion must pass; the untouched workspace, missing, corrupted and
shortcut deliverables, damaged inputs, a forged grader in the agent's workspace and
(multi-turn) results computed before a user patch must all fail. Thresholds come from the
verifier spec's scoring (Harbor tasks: a reward of 1.0 passes, anything under 0.5 fails).
A Cowork package's verifier must also not pay for partial work (``partial_work``): stale
states (a later turn ignored, a new input unused, a changed requirement not applied) and
one-deliverable-missing states score at most ``PARTIAL_WORK_BOUND``, blank free text fails.

A Harbor multi-step task runs as Harbor runs it: each step's ``workdir/`` and ``setup.sh``,
then its oracle, then its verifier, in order; the trial reward is the per-key mean over the
steps (or the final step's, as the task says). Controlled failures probe the last step.

A failure this machine may cause itself (no network, Dockerfile ``RUN`` lines not executed)
stops the review as "could not run here" with the reason, never as a defect.

Cost: the controlled failures are independent, so they are queued and scored together
(``LocalRuntime.verify_many``: one engine process for a stock Cowork verifier, else as many
test.sh runs at once as there are cores), optimistically in the same batch as the reference
completion, whose verdict still decides whether they count; byte-identical states (say, a
removed deliverable that leaves exactly the untouched workspace) are scored once.
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
from pathlib import Path, PurePosixPath

from ..image.leaks import meaning, near_output
from ..image.mounted import MountedImage
from ..package.limits import zip_problem
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime, VerifyOutcome
from ..runtime.workspace import apply_patch, copy_tree, materialize, root_changes, snapshot
from ..sandbox import SandboxResult
from .audit import is_private
from .defects import Defect, DefectCode
from .environment_limits import Phase, unreproduced
from .grader_tamper import forge, grader_candidates, success_words
from .mutations import CORRUPTIONS, blank_free_text, empty, remove
from .partial_work import (
    PARTIAL_WORK_BOUND,
    Rung,
    StalePlan,
    blank_rungs,
    missing_rungs,
    rubric_over,
    stale_plans,
    stale_rungs,
)
from .separate_verifier import declared_artifacts, verified_apart, view_apart


class CouldNotRun(Exception):
    """This machine cannot reproduce what the task needs; the message says what."""


@dataclass
class ReviewStats:
    verifier_runs: int = 0  # distinct workspace states the verifier scored
    states_probed: int = 0  # states judged, identical ones answered from one score
    solution_runs: int = 0
    reference_reward: float | None = None
    outputs: list[str] = field(default_factory=list)
    # partial-work states judged (label → reward), and those that could not be built (why)
    partial_work: dict[str, float | None] = field(default_factory=dict)
    partial_skipped: dict[str, str] = field(default_factory=dict)


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
    def __init__(
        self,
        pkg: EnvironmentPackage,
        runtime: LocalRuntime,
        image: MountedImage | None = None,
        partial_bound: float = PARTIAL_WORK_BOUND,
    ) -> None:
        self.pkg = pkg
        self.runtime = runtime
        self.image = image  # the task's built image, which the runtime's sandbox runs in
        self.limits = Thresholds.of(pkg)
        self.partial_bound = partial_bound
        self.after_turn: list[Path] = []  # the reference after turns 0..N-1 (multi-turn)
        self.stats = ReviewStats()
        self.defects: list[Defect] = []
        self.root = Path(tempfile.mkdtemp(prefix="cwg-review-"))
        self.could_not_run: str | None = None
        self.skipped: list[str] = []  # Dockerfile lines not emulated
        # The Harbor step whose verifier judges a single workspace (multi-step: the last).
        self.probe_step: str | None = pkg.step_names[-1] if pkg.is_multi_step else None

        self.queue: list[_Probe] = []  # controlled failures waiting to be scored together
        self._variants = 0
        self._views = 0
        self.s0 = self.root / "s0"  # the environment as built, where a separate verifier starts

    # ---- helpers --------------------------------------------------------------------
    @contextmanager
    def variant(self, base: Path, name: str) -> Iterator[Path]:
        """A copy of ``base`` to damage; it stays until the review ends (queued probes)."""
        self._variants += 1
        path = self.root / f"{name}-{self._variants}"
        copy_tree(base, path)
        yield path

    def unless_unreproduced(self, phase: Phase, run: SandboxResult | None) -> None:
        """Stop as "could not run" when this machine may be why ``run`` went wrong."""
        reason = unreproduced(self.pkg, phase, run, self.skipped, self.workdir)
        if reason is not None:
            raise CouldNotRun(reason)

    def score(self, workspace: Path, label: str, step: str | None = None) -> VerifyOutcome | None:
        """Verify a workspace now; an invalid run becomes a defect and returns None."""
        (outcome,) = self._verify([workspace], step or self.probe_step)
        return outcome if self._valid(outcome, label) else None

    def _verify(self, workspaces: list[Path], step: str | None) -> list[VerifyOutcome]:
        """Score workspaces together, each distinct state once."""
        if verified_apart(self.pkg, step):  # Harbor's verifier sees only the artifacts
            workspaces = [self._view_apart(ws, step) for ws in workspaces]
        keys = [tree_key(ws) for ws in workspaces]
        first = dict(reversed(list(zip(keys, workspaces, strict=True))))
        distinct = list(dict.fromkeys(keys))
        scored = self.runtime.verify_many(
            self.pkg, [first[k] for k in distinct], self.workdir, step
        )
        self.stats.verifier_runs += len(distinct)
        self.stats.states_probed += len(workspaces)
        by_key = dict(zip(distinct, scored, strict=True))
        return [by_key[key] for key in keys]

    def _view_apart(self, workspace: Path, step: str | None) -> Path:
        """What Harbor's separate verifier gets of ``workspace``: the built environment and
        the declared artifacts (``separate_verifier``)."""
        self._views += 1
        dest = self.root / f"apart-{self._views}"
        sources = declared_artifacts(self.pkg, step)
        return view_apart(workspace, self.s0, dest, sources, self.workdir)

    def _valid(self, outcome: VerifyOutcome, label: str) -> bool:
        if not outcome.valid:
            self.unless_unreproduced("verifier", outcome.run)
            self.defects.append(
                Defect.of(
                    DefectCode.VERIFIER_INVALID,
                    f"verifier gave no valid reward on the {label} workspace: {outcome.error}",
                    state=label,
                )
            )
            return False
        return True

    def must_fail(
        self, workspace: Path, label: str, code: DefectCode, bar: float, **evidence: object
    ) -> None:
        """Queue a controlled failure; ``flush`` scores the queue and judges each."""
        self.queue.append(_Probe(workspace, label, (Rung(code, bar),), evidence))

    def must_not_pay(
        self,
        workspace: Path,
        label: str,
        rungs: tuple[Rung, ...],
        rubric: list[str] | None = None,
        **evidence: object,
    ) -> None:
        """Queue a partial-work state: the first rung its reward reaches is the defect;
        ``rubric``: the unjudged rubric items that might fail it instead of code."""
        probe = _Probe(workspace, label, rungs, evidence, partial=True, rubric=rubric or [])
        self.queue.append(probe)

    def flush(self, reference: Path | None = None) -> None:
        """Score the queued probes (with the reference completion first, when given: it
        must pass, or the probes' outcomes mean nothing and are dropped)."""
        queue, self.queue = self.queue, []
        first = [reference] if reference is not None else []
        outcomes = self._verify(first + [p.workspace for p in queue], self.probe_step)
        if reference is not None:
            outcome = outcomes.pop(0)
            if not self._valid(outcome, "reference"):
                return
            self.stats.reference_reward = outcome.reward
            # On a plain Harbor task the verifier is the task's given and a wrong oracle
            # the solution's; a Cowork package's verifier is derived to grade its
            # reference, so a rejected reference stays the Verifier Constructor's to fix.
            sound = not self.pkg.is_cowork and _tells_reference_from_untouched(
                outcome, queue, outcomes
            )
            if not self._reference_passes(outcome, sound=sound):
                return
        for probe, outcome in zip(queue, outcomes, strict=True):
            if self._valid(outcome, probe.label):
                self._judge(probe, outcome)

    def _judge(self, probe: _Probe, outcome: VerifyOutcome) -> None:
        if probe.partial:
            self.stats.partial_work[probe.label] = outcome.reward
        if outcome.reward is None:
            return
        rung = next((r for r in probe.rungs if r.reached(outcome.reward)), None)
        if rung is None:
            return
        must = f"≤ {rung.bar}" if rung.strict else f"< {rung.bar}"
        message = f"the {probe.label} workspace scores {outcome.reward:.3f} (must be {must})"
        scores = outcome.component_scores()
        found = {"state": probe.label, "reward": outcome.reward, "components": scores}
        found |= probe.evidence
        if len(outcome.rewards) > 1:
            found["rewards"] = outcome.rewards
        if rung.code == DefectCode.ACCEPTS_BLANK_TEXT and probe.rubric:
            # free text is what a rubric may judge; no judge runs here, so flag, don't fail
            found["rubric_items"] = probe.rubric
            message += f"; only the rubric items {probe.rubric} could fail it, and no judge ran"
            flag = Defect.with_evidence(DefectCode.RUBRIC_UNJUDGED, message, found)
            self.defects.append(flag.model_copy(update={"severity": "warning"}))
            return
        self.defects.append(Defect.with_evidence(rung.code, message, found))

    # ---- the review -----------------------------------------------------------------
    def run(self) -> list[Defect]:
        try:
            self._run()
        except _StepsStop:
            pass
        except CouldNotRun as exc:
            self.could_not_run = str(exc)
            self.defects.append(
                Defect.of(
                    DefectCode.EXECUTION_UNSUPPORTED,
                    f"could not run here: {exc}",
                    severity="warning",
                )
            )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
        return self.defects

    def _run(self) -> None:
        s0 = self.s0
        if self.image is not None:
            layout = self.image.materialize(self.pkg, s0)
        else:
            layout = materialize(self.pkg, s0)
        self.workdir = layout.workdir
        self.skipped = layout.skipped
        image = self.pkg.config.environment.docker_image
        if image and "environment/Dockerfile" not in self.pkg.files:
            raise CouldNotRun(f"the task runs in the prebuilt image {image}, not built here")
        if PurePosixPath(self.workdir) == PurePosixPath("/"):
            raise CouldNotRun(
                "the task's working directory is / (no WORKDIR in environment/Dockerfile); "
                "this machine mounts the workspace at the working directory, which cannot be /"
            )
        if layout.skipped and not self.pkg.is_cowork:
            self.defects.append(
                Defect.of(
                    DefectCode.EXECUTION_UNSUPPORTED,
                    f"{len(layout.skipped)} Dockerfile line(s) not emulated locally",
                    severity="warning",
                    skipped=layout.skipped[:5],
                )
            )
        if not self._has_oracle():
            self._untouched_only(s0)
            return
        if self.pkg.is_multi_step:
            self._run_steps(s0)
            return
        reference = copy_tree(s0, self.root / "reference")
        if not self._solve(reference):
            return
        final_inputs = self._final_inputs(s0)
        outputs = self._outputs(final_inputs, reference)
        self.stats.outputs = outputs
        self._leaked_outputs(s0, reference, outputs)  # before scoring: a leak is a leak
        self.must_fail(final_inputs, "untouched", DefectCode.ACCEPTS_UNTOUCHED, self.limits.failing)
        self._probe(reference, final_inputs, outputs)
        self._damaged_inputs(reference)
        self._stale(reference, outputs)
        self._blank_text(reference, outputs)
        self.flush(reference)

    def _probe(self, reference: Path, inputs: Path, outputs: list[str]) -> None:
        """The controlled failures on one solved workspace and the inputs it answers to."""
        for rel in outputs:
            self._artifact_mutations(reference, rel)
        for path in self._root_outputs(reference):
            self._artifact_mutations(reference, path, _in_root_changes(path))
        self._shortcuts(inputs, outputs)
        self._forged_graders(inputs)

    def _reference_passes(
        self, outcome: VerifyOutcome, run: SandboxResult | None = None, sound: bool = False
    ) -> bool:
        """``sound``: the verifier failed the untouched workspace and rewards the reference
        more; a reference short of passing is then the solution's fault (a wrong oracle),
        owned by the builder, not the verifier's."""
        if outcome.reward is not None and outcome.reward >= self.limits.passing:
            return True
        self.unless_unreproduced("verifier", outcome.run)
        self.unless_unreproduced("agent", run)
        failing = {k: v for k, v in outcome.component_scores().items() if v < 1.0}
        failing |= {k: v for k, v in outcome.rewards.items() if v < self.limits.passing}
        wrong_oracle = sound and outcome.reward is not None
        printed = _verifier_said(outcome) if not self.pkg.is_cowork else ""
        self.defects.append(
            Defect.of(
                DefectCode.REFERENCE_REJECTED,
                f"the reference completion scores {outcome.reward} "
                f"(pass threshold {self.limits.passing})"
                + (f"; rewards {outcome.rewards}" if len(outcome.rewards) > 1 else "")
                + (
                    "; the verifier rejects the untouched workspace, so the reference "
                    "solution is what falls short"
                    if wrong_oracle
                    else ""
                )
                + (f"; the verifier printed: {printed}" if printed else "")
                + _blind_apart(self.pkg),
                owner="builder" if wrong_oracle else None,
                blamed="solution" if wrong_oracle else "verifier",
                reward=outcome.reward,
                rewards=outcome.rewards,
                failing_components=failing,
                details=_evidence(outcome),
            )
        )
        return False

    def _has_oracle(self) -> bool:
        if self.pkg.is_multi_step:
            return all(
                f"steps/{n}/solution/solve.sh" in self.pkg.files for n in self.pkg.step_names
            )
        return "solution/solve.sh" in self.pkg.files

    def _untouched_only(self, s0: Path) -> None:
        """No oracle to run: only the no-op can be checked."""
        if self.pkg.is_multi_step:
            self._steps_noop(s0)
        else:
            self.must_fail(s0, "untouched", DefectCode.ACCEPTS_UNTOUCHED, self.limits.failing)
            self.flush()

    # ---- Harbor multi-step tasks ------------------------------------------------------
    def _run_steps(self, s0: Path) -> None:
        reference = copy_tree(s0, self.root / "reference")
        before_last = self.root / "before-last-step"
        per_step: list[dict[str, float]] = []
        for index, name in enumerate(self.pkg.step_names):
            self._prepare_step(name, reference)
            if index == len(self.pkg.step_names) - 1:
                copy_tree(reference, before_last)
            solved = self.runtime.run_solution(self.pkg, reference, self.workdir, step=name)
            self.stats.solution_runs += 1
            if not solved.ok:
                self.unless_unreproduced("agent", solved)
                self.defects.append(
                    Defect.of(
                        DefectCode.SOLUTION_FAILED,
                        f"steps/{name}/solution/solve.sh failed: {solved.describe()}",
                        step=name,
                    )
                )
                return
            outcome = self.score(reference, f"step {name} reference", step=name)
            if outcome is None:
                return
            if outcome.reward is None or outcome.reward < self.limits.passing:
                self._reference_passes(outcome, solved)  # the step's own finding
                return
            per_step.append(outcome.rewards)
            if not self._min_reward_met(name, outcome.rewards):
                break
        trial = self._trial_rewards(per_step)
        self.stats.reference_reward = _headline(trial)
        self._steps_noop(s0)
        outputs = self._outputs(before_last, reference)
        self.stats.outputs = outputs
        self._leaked_outputs(s0, reference, outputs)
        self._probe(reference, before_last, outputs)
        self.flush()

    def _prepare_step(self, name: str, workspace: Path) -> None:
        setup = self.runtime.prepare_step(self.pkg, name, workspace, self.workdir)
        if setup is not None and not setup.ok:
            self.unless_unreproduced("agent", setup)
            self.defects.append(
                Defect.of(
                    DefectCode.SOLUTION_FAILED,
                    f"steps/{name}/workdir/setup.sh failed: {setup.describe()}",
                    step=name,
                )
            )
            raise _StepsStop

    def _steps_noop(self, s0: Path) -> None:
        """An agent that does nothing at any step must not earn the trial's reward."""
        noop = copy_tree(s0, self.root / "noop")
        per_step = []
        for name in self.pkg.step_names:
            self._prepare_step(name, noop)
            outcome = self.score(noop, f"step {name} untouched", step=name)
            if outcome is None:
                return
            per_step.append(outcome.rewards)
            if not self._min_reward_met(name, outcome.rewards):
                break
        reward = _headline(self._trial_rewards(per_step))
        if reward is not None and reward >= self.limits.failing:
            self.defects.append(
                Defect.of(
                    DefectCode.ACCEPTS_UNTOUCHED,
                    f"doing nothing at every step scores {reward:.3f} "
                    f"(must be < {self.limits.failing})",
                    state="untouched",
                    reward=reward,
                    steps=dict(zip(self.pkg.step_names, per_step, strict=False)),
                )
            )

    def _min_reward_met(self, name: str, rewards: dict[str, float]) -> bool:
        """Harbor skips the remaining steps when a step's ``min_reward`` is not met."""
        step = next(s for s in self.pkg.config.steps or [] if s.name == name)
        if step.min_reward is None:
            return True
        bars = step.min_reward if isinstance(step.min_reward, dict) else {"reward": step.min_reward}
        return all(rewards.get(key, float("-inf")) >= bar for key, bar in bars.items())

    def _trial_rewards(self, per_step: list[dict[str, float]]) -> dict[str, float]:
        """Harbor's trial reward: the final step's, or the per-key mean (a missing key
        counts 0) over the steps that produced a reward."""
        if not per_step:
            return {}
        if self.pkg.config.multi_step_reward_strategy == "final":
            return per_step[-1]
        keys = {key for rewards in per_step for key in rewards}
        return {k: sum(r.get(k, 0.0) for r in per_step) / len(per_step) for k in keys}

    # ---- a grader the agent can rewrite ------------------------------------------------
    def _forged_graders(self, inputs: Path) -> None:
        if self.pkg.is_cowork:
            return  # the Cowork engine lives in tests/, out of the agent's reach
        candidates = grader_candidates(self.pkg, sorted(snapshot(inputs)), self.workdir)
        words = success_words(self.pkg)
        for rel in candidates[:3]:
            with self.variant(inputs, "forged-grader") as ws:
                forge(ws, rel, words)
                self.must_fail(
                    ws,
                    f"untouched-with-forged-{rel}",
                    DefectCode.VERIFIER_AGENT_WRITABLE,
                    self.limits.passing,
                    file=rel,
                    how=f"the verifier runs {self.workdir}/{rel}, which the agent can rewrite",
                )

    def _solve(self, workspace: Path) -> bool:
        """The reference completion, turn by turn (as ``run_reference``), keeping a copy of
        the workspace after each turn but the last: where the stale states start."""
        results = []
        for turn in range(len(self.pkg.patches) + 1):
            if turn > 0:
                apply_patch(self.pkg, turn, workspace)
            results.append(self.runtime.run_solution(self.pkg, workspace, self.workdir, turn))
            if not results[-1].ok:
                break
            if turn < len(self.pkg.patches):
                self.after_turn.append(copy_tree(workspace, self.root / f"after-turn-{turn}"))
        self.stats.solution_runs += len(results)
        if results and results[-1].ok and len(results) == len(self.pkg.patches) + 1:
            return True
        failed = results[-1]
        self.unless_unreproduced("agent", failed)
        self.defects.append(
            Defect.of(
                DefectCode.SOLUTION_FAILED,
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
        if self.pkg.config.artifact_sources() and not declared_plain:
            # every artifact the task declares lies outside the working directory (a
            # service's request log): those are what it grades, and the files its solution
            # left in the workspace (the script it ran) are its means, not deliverables
            return []
        return sorted(set(produced) | {rel for rel in declared_plain if rel in after})

    def _root_outputs(self, reference: Path) -> list[str]:
        """A plain Harbor task's declared artifacts outside the working directory that the
        reference's runs left in its root changes (absolute paths)."""
        found = []
        for source in self.pkg.config.artifact_sources():
            path = PurePosixPath(source)
            if not path.is_absolute() or path.is_relative_to(self.workdir):
                continue
            if (root_changes(reference) / path.relative_to("/")).is_file():
                found.append(str(path))
        return found

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
            elif self.image is not None:
                self._output_in_image(rel, (reference / rel).read_bytes(), initial)

    def _output_in_image(self, rel: str, data: bytes, inputs: dict[str, bytes]) -> None:
        """A reference output that a build step already wrote somewhere in the image (a
        RUN line that computes the answer), in any formatting, or nearly (``near_output``:
        the similarity is in the finding). The output's own path in the image is the input
        the solution rewrote, not a leak."""
        assert self.image is not None
        where = self.image.written.saying(data)
        own = str(PurePosixPath(self.workdir) / rel)
        if meaning(data) in self._private_meanings():
            return  # a copy of a verifier answer file is reported as that (one finding)
        similar: dict[str, object] = {}
        if where is None or where == own:
            near = near_output(data, self.image.written, own, inputs, inputs.get(rel))
            if near is None:
                return
            where, similar = near.where, {"similarity": near.similarity}
        self.defects.append(
            Defect.with_evidence(
                DefectCode.LEAK_REFERENCE_OUTPUT,
                f"reference output {rel} is already in the image as {where} (written by "
                "environment/Dockerfile"
                + (f"; a near copy, similarity {similar['similarity']:.2f}" if similar else "")
                + "); the agent can read it",
                {"output": rel, "image_path": where, **similar},
            )
        )

    def _private_meanings(self) -> set[str | None]:
        return {
            meaning(content)
            for rel, content in self.pkg.files.items()
            if rel.startswith(("tests/", "solution/", "steps/")) and is_private(rel)
        }

    def _artifact_mutations(
        self, reference: Path, rel: str, at: Callable[[Path], Path] | None = None
    ) -> None:
        """``at``: where the artifact ``rel`` is in a copy of the reference (default: the
        workspace's own ``rel``; a declared artifact outside it: its root changes)."""
        bar = self.limits.passing
        locate = at or (lambda ws: ws / rel)
        with self.variant(reference, "missing") as ws:
            remove(locate(ws))
            if self.pkg.is_cowork:
                rungs = missing_rungs(bar, self.partial_bound)
                self.must_not_pay(ws, f"{rel}-missing", rungs, file=rel)
            else:  # a plain Harbor task's reward is its own: it must only not pass
                self.must_fail(
                    ws, f"{rel}-missing", DefectCode.ACCEPTS_MISSING_ARTIFACT, bar, file=rel
                )
        for name, corrupt in CORRUPTIONS.items():
            with self.variant(reference, name) as ws:
                how = corrupt(locate(ws))
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

    # ---- partial work (Cowork packages) -------------------------------------------------
    def _stale(self, reference: Path, outputs: list[str]) -> None:
        """Multi-turn: each later turn ignored, each new input unused, each changed
        requirement not applied must score at most the partial-work bound (and not pass)."""
        if not self.pkg.patches or len(self.after_turn) != len(self.pkg.patches):
            return
        seen = {self._deliverables(reference, outputs): "the reference's"}
        rungs = stale_rungs(self.limits.passing, self.partial_bound)
        for plan in stale_plans(self.pkg):
            with self.variant(self.after_turn[plan.turn - 1], "stale") as ws:
                why = self._carry(plan, ws)
                same = seen.get(self._deliverables(ws, outputs)) if why is None else None
                if same is not None:  # no partial work, or a state already judged
                    why = f"its deliverables are {same}"
                if why is not None:
                    self.stats.partial_skipped[plan.label] = why
                    continue
                seen[self._deliverables(ws, outputs)] = plan.label + "'s"
                self.must_not_pay(ws, plan.label, rungs, turn=plan.turn, how=plan.what)

    def _carry(self, plan: StalePlan, ws: Path) -> str | None:
        """Play the later turns on ``ws`` as ``plan`` says; None, or why it could not."""
        last = len(self.pkg.patches)
        for turn in range(plan.turn, last + 1):
            if turn != plan.held_back:
                apply_patch(self.pkg, turn, ws)
            if not plan.solve:
                continue
            as_turn = turn if plan.solve_as is None else plan.solve_as
            solved = self.runtime.run_solution(self.pkg, ws, self.workdir, as_turn)
            self.stats.solution_runs += 1
            if not solved.ok:
                return f"the solution failed as turn {as_turn}: {solved.describe()[:200]}"
        if plan.held_back is not None:
            for turn in range(plan.held_back, last + 1):  # the newest inputs, in turn order
                apply_patch(self.pkg, turn, ws)
        return None

    def _deliverables(self, workspace: Path, outputs: list[str]) -> tuple[bytes | None, ...]:
        return tuple(
            content_key((workspace / rel).read_bytes()) if (workspace / rel).is_file() else None
            for rel in outputs
        )

    def _blank_text(self, reference: Path, outputs: list[str]) -> None:
        """Every free-text field of the deliverables emptied must not pass."""
        if not self.pkg.is_cowork or not outputs:
            return
        with self.variant(reference, "blank-text") as ws:
            blanked = {rel: n for rel in outputs if (n := blank_free_text(ws / rel))}
            if not blanked:
                self.stats.partial_skipped["blank-free-text"] = "no free text in the deliverables"
                return
            rubric = rubric_over(self.pkg, list(blanked))
            rungs = blank_rungs(self.limits.passing)
            self.must_not_pay(ws, "blank-free-text", rungs, rubric, blanked=blanked)


@dataclass
class _Probe:
    workspace: Path
    label: str
    rungs: tuple[Rung, ...]
    evidence: dict[str, object]
    partial: bool = False  # a partial-work state: its reward is recorded in the stats
    rubric: list[str] = field(default_factory=list)


def _in_root_changes(path: str) -> Callable[[Path], Path]:
    """Where a workspace's runs left the file at the absolute ``path``."""
    where = PurePosixPath(path).relative_to("/")
    return lambda workspace: root_changes(workspace) / where


def tree_key(root: Path) -> str:
    """A workspace state: every file's path, executable bit and content, and the same of
    what its runs wrote outside the working directory (deletions there too)."""
    digest = hashlib.sha256()
    for base, prefix in ((root, ""), (root_changes(root), "/")):
        for path in sorted(base.rglob("*")) if base.is_dir() else []:
            rel = prefix + path.relative_to(base).as_posix()
            if path.is_file() and not path.is_symlink():
                executable = "x" if path.stat().st_mode & 0o100 else "-"
                digest.update(f"{rel}\0{executable}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            elif path.is_symlink():
                digest.update(f"{rel}\0->{path.readlink()}\0".encode())
            elif path.is_char_device():  # overlayfs' mark of a deleted image file
                digest.update(f"{rel}\0deleted\0".encode())
    return digest.hexdigest()


class _StepsStop(Exception):
    """A step's setup failed: the finding is recorded, the review of the steps ends."""


def _tells_reference_from_untouched(
    reference: VerifyOutcome, queue: list[_Probe], outcomes: list[VerifyOutcome]
) -> bool:
    """The verifier gave the untouched workspace a valid failing reward, and the reference a
    higher one: it sees the work done and grades it, so a reference short of passing is
    what falls short. (A verifier that gives both the same — a 0 for everything, say, when
    its test runner is missing — proves nothing about the reference.)"""
    if reference.reward is None:
        return False
    for probe, outcome in zip(queue, outcomes, strict=False):
        if probe.label == "untouched" and outcome.valid and outcome.reward is not None:
            fails = not any(rung.reached(outcome.reward) for rung in probe.rungs)
            return fails and reference.reward > outcome.reward
    return False


def _headline(rewards: dict[str, float]) -> float | None:
    if not rewards:
        return None
    return rewards.get("reward", min(rewards.values()))


def content_key(data: bytes) -> bytes:
    """What a file *says*: XLSX and DOCX are zips whose metadata carries a save timestamp,
    so two saves of the same workbook differ byte-wise; compare their parts instead."""
    if not data.startswith(b"PK") or zip_problem("content.zip", data):
        return data  # not a zip, or one never to inflate here (a bomb): its bytes, then
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = sorted(n for n in archive.namelist() if not n.startswith("docProps/"))
            digest = hashlib.sha256()
            for name in parts:
                digest.update(name.encode() + b"\0")
                with archive.open(name) as member:  # in blocks: memory stays flat
                    while block := member.read(1 << 20):
                        digest.update(block)
            return b"zip:" + digest.digest()
    except (zipfile.BadZipFile, ValueError, EOFError):
        return data


def _closest_input(output: str, inputs: list[str]) -> str:
    suffix = Path(output).suffix
    same_kind = [i for i in inputs if Path(i).suffix == suffix]
    return (same_kind or inputs)[0]


def _verifier_said(outcome: VerifyOutcome, chars: int = 300) -> str:
    """The end of what a plain Harbor verifier printed (its test runner's verdict, or why it
    could not run: ``No module named pytest``), so a rejected reference says why."""
    if outcome.run is None:
        return ""
    printed = f"{outcome.run.stdout}\n{outcome.run.stderr}".strip()
    return " ".join(printed[-chars:].split())


def _evidence(outcome: VerifyOutcome) -> list[dict[str, object]]:
    return [
        {"id": c["id"], "score": c["score"], "evidence": c["evidence"]}
        for c in outcome.details.get("components", []) + outcome.details.get("red_lines", [])
        if c.get("score", 1.0) < 1.0
    ]


ReviewFn = Callable[[EnvironmentPackage, LocalRuntime], list[Defect]]


def _blind_apart(pkg: EnvironmentPackage) -> str:
    """Why a verifier Harbor runs apart may see none of the work, when that is so."""
    blind = [
        step or "the task"
        for step in (pkg.step_names if pkg.is_multi_step else [None])
        if verified_apart(pkg, step) and not declared_artifacts(pkg, step)
    ]
    if not blind:
        return ""
    return (
        f"; Harbor verifies {', '.join(blind)} apart ([verifier] environment_mode = "
        '"separate"), in a fresh environment that receives only the declared artifacts, and '
        "none is declared: the verifier sees none of the work (declare [[artifacts]])"
    )
