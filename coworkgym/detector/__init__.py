"""The Issue Detector: reproduces an environment and judges whether its verifier separates
valid from shortcut states. It never repairs anything; every defect carries a code, an
owner (builder or verifier), a severity, evidence and a message.

A report has one of three verdicts: pass, fail (an error defect), or could not run (no
error, but this machine could not reproduce what the task needs; the reason is given).
One finding is reported once: a ``harbor lint`` rule that repeats one of our own findings
is dropped. On a plain Harbor task, lint findings that do not stop Harbor from loading the
task are warnings (Harbor runs it); our own packages must be lint-clean.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..package.errors import PackageError
from ..package.harbor_model import harbor_verdict
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from .audit import NO_ORACLE, audit
from .defects import CATALOGUE, Defect, DefectCode
from .harbor_lint import harbor_lint
from .partial_work import PARTIAL_WORK_BOUND
from .review import ExecutionReview, ReviewStats
from .task_image import (
    ImageInvalid,
    ImageSettings,
    ImageUnavailable,
    near_copies_in_context,
    placement,
    verifier_content_in_image,
)

__all__ = [
    "CATALOGUE",
    "PARTIAL_WORK_BOUND",
    "Defect",
    "DefectCode",
    "DetectorReport",
    "ImageSettings",
    "IssueDetector",
]


@dataclass
class DetectorReport:
    package: str
    path: str | None = None
    defects: list[Defect] = field(default_factory=list)
    stats: ReviewStats = field(default_factory=ReviewStats)
    seconds: dict[str, float] = field(default_factory=dict)
    harbor_lint_ran: bool = False
    could_not_run: str | None = None  # why this machine could not reproduce the task
    image: str | None = None  # the task image its phases ran in (None: emulated)
    image_cached: bool = False  # the image was already built

    @property
    def errors(self) -> list[Defect]:
        return [d for d in self.defects if d.severity == "error"]

    @property
    def passed(self) -> bool:
        return not self.errors

    @property
    def verdict(self) -> str:
        if self.errors:
            return "fail"
        return "could not run" if self.could_not_run else "pass"

    def to_json(self) -> dict[str, object]:
        return {
            "package": self.package,
            "path": self.path,
            "passed": self.passed,
            "verdict": self.verdict,
            "could_not_run": self.could_not_run,
            "defects": [d.model_dump(mode="json") for d in self.defects],
            "reference_reward": self.stats.reference_reward,
            "verifier_runs": self.stats.verifier_runs,
            "states_probed": self.stats.states_probed,
            "solution_runs": self.stats.solution_runs,
            "outputs": self.stats.outputs,
            "partial_work": self.stats.partial_work,
            "partial_skipped": self.stats.partial_skipped,
            "harbor_lint_ran": self.harbor_lint_ran,
            "image": self.image,
            "image_cached": self.image_cached,
            "seconds": self.seconds,
        }


class IssueDetector:
    def __init__(
        self,
        runtime: LocalRuntime | None = None,
        run_harbor_lint: bool = True,
        images: ImageSettings | None = None,
        partial_bound: float = PARTIAL_WORK_BOUND,
    ) -> None:
        self._runtime = runtime
        self.run_harbor_lint = run_harbor_lint
        self.images = images or ImageSettings()
        self.partial_bound = partial_bound  # the most a verifier may pay for partial work

    @property
    def runtime(self) -> LocalRuntime:
        if self._runtime is None:
            self._runtime = LocalRuntime()
        return self._runtime

    def check_dir(self, path: Path) -> DetectorReport:
        """Audit and execute a package directory (harbor lint needs it on disk). A plain
        Harbor task must also load with Harbor's own task model, where it is installed."""
        verdict = None if _is_cowork(path) else harbor_verdict(path)
        refused = [
            Defect.of(DefectCode.PACKAGE_INVALID, problem, source="harbor")
            for problem in (verdict.problems if verdict else [])
        ]
        try:
            pkg = EnvironmentPackage.load(path)
        except PackageError as exc:
            report = DetectorReport(package=str(path), path=str(path), defects=refused)
            for problem in exc.problems:
                report.defects.append(Defect.of(DefectCode.PACKAGE_INVALID, problem))
            return report
        if refused:
            return DetectorReport(package=pkg.name, path=str(path), defects=refused)
        report = self.check(pkg, path)
        report.path = str(path)
        return report

    def check(self, pkg: EnvironmentPackage, on_disk: Path | None = None) -> DetectorReport:
        report = DetectorReport(package=pkg.name)
        started = time.perf_counter()
        report.defects += audit(pkg)
        report.defects += near_copies_in_context(pkg)
        notes = [Defect.of(DefectCode.PACKAGE_INVALID, n, severity="warning") for n in pkg.notes]
        report.seconds["audit"] = time.perf_counter() - started
        if on_disk is not None and self.run_harbor_lint:
            started = time.perf_counter()
            lint = harbor_lint(on_disk)
            report.harbor_lint_ran = lint is not None
            if lint is not None:
                lint = _once(lint, report.defects, pkg.is_cowork)
                if any(d.evidence.get("rule") == "unknown-config-field" for d in lint):
                    notes = [n for n in notes if "Harbor ignores it" not in n.message]
            report.defects += lint or []
            report.seconds["harbor_lint"] = time.perf_counter() - started
        report.defects += notes
        if any(_unrunnable(d) for d in report.errors):
            return report  # nothing to execute
        started = time.perf_counter()
        try:
            with placement(pkg, self.images, self.runtime, on_disk) as place:
                if place.image is not None:
                    report.seconds["image"] = time.perf_counter() - started
                    report.image = place.image.image.ref
                    report.image_cached = place.image.image.cached
                    report.defects += verifier_content_in_image(pkg, place.image.written)
                elif place.note is not None:
                    report.defects.append(_unsupported(place.note))
                started = time.perf_counter()
                review = ExecutionReview(pkg, place.runtime, place.image, self.partial_bound)
                report.defects += review.run()
        except ImageInvalid as exc:
            report.defects.append(Defect.of(DefectCode.PACKAGE_INVALID, str(exc)))
            report.seconds["image"] = time.perf_counter() - started
            return report
        except ImageUnavailable as exc:
            report.could_not_run = str(exc)
            report.defects.append(_unsupported(f"could not run here: {exc}"))
            report.seconds["image"] = time.perf_counter() - started
            return report
        report.stats = review.stats
        report.could_not_run = review.could_not_run
        report.seconds["execution"] = time.perf_counter() - started
        return report


def _unrunnable(defect: Defect) -> bool:
    """A structure error that leaves nothing to execute (a missing oracle still lets the
    no-op run)."""
    return (
        defect.code == DefectCode.PACKAGE_STRUCTURE and defect.evidence.get("absent") != NO_ORACLE
    )


def _unsupported(message: str) -> Defect:
    return Defect.of(DefectCode.EXECUTION_UNSUPPORTED, message, severity="warning")


# harbor lint rules that say what one of our own codes already says
LINT_RULE_TWINS = {
    "shared-verifier": DefectCode.VERIFIER_SHARED_MODE,
    "invalid-task-files": DefectCode.PACKAGE_STRUCTURE,
    "invalid-task-config": DefectCode.PACKAGE_INVALID,
}
# rules whose finding means Harbor cannot load or run the task at all
LINT_RULES_HARBOR_REFUSES = {"invalid-task-config", "invalid-task-files"}


def _once(lint: list[Defect], own: list[Defect], cowork: bool) -> list[Defect]:
    """Drop lint findings that repeat ours; on a plain Harbor task keep as errors only the
    findings that stop Harbor from loading it."""
    codes = {d.code for d in own}
    kept = []
    for finding in lint:
        rule = str(finding.evidence.get("rule"))
        if LINT_RULE_TWINS.get(rule) in codes:
            continue
        if not cowork and rule not in LINT_RULES_HARBOR_REFUSES:
            finding = finding.model_copy(update={"severity": "warning"})
        kept.append(finding)
    return kept


def _is_cowork(path: Path) -> bool:
    try:
        raw = tomllib.loads((path / "task.toml").read_text())
    except (OSError, ValueError):
        return False
    metadata = raw.get("metadata")
    return isinstance(metadata, dict) and "cowork" in metadata
