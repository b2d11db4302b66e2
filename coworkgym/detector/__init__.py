"""The Issue Detector: reproduces an environment and judges whether its verifier separates
valid from shortcut states. It never repairs anything; every defect carries a code, an
owner (builder or verifier), a severity, evidence and a message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..package.errors import PackageError
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from .audit import audit
from .defects import CATALOGUE, Defect, DefectCode
from .harbor_lint import harbor_lint
from .review import ExecutionReview, ReviewStats

__all__ = ["CATALOGUE", "Defect", "DefectCode", "DetectorReport", "IssueDetector"]


@dataclass
class DetectorReport:
    package: str
    path: str | None = None
    defects: list[Defect] = field(default_factory=list)
    stats: ReviewStats = field(default_factory=ReviewStats)
    seconds: dict[str, float] = field(default_factory=dict)
    harbor_lint_ran: bool = False

    @property
    def errors(self) -> list[Defect]:
        return [d for d in self.defects if d.severity == "error"]

    @property
    def passed(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, object]:
        return {
            "package": self.package,
            "path": self.path,
            "passed": self.passed,
            "defects": [d.model_dump(mode="json") for d in self.defects],
            "reference_reward": self.stats.reference_reward,
            "verifier_runs": self.stats.verifier_runs,
            "solution_runs": self.stats.solution_runs,
            "outputs": self.stats.outputs,
            "harbor_lint_ran": self.harbor_lint_ran,
            "seconds": self.seconds,
        }


class IssueDetector:
    def __init__(self, runtime: LocalRuntime | None = None, run_harbor_lint: bool = True) -> None:
        self._runtime = runtime
        self.run_harbor_lint = run_harbor_lint

    @property
    def runtime(self) -> LocalRuntime:
        if self._runtime is None:
            self._runtime = LocalRuntime()
        return self._runtime

    def check_dir(self, path: Path) -> DetectorReport:
        """Audit and execute a package directory (harbor lint needs it on disk)."""
        try:
            pkg = EnvironmentPackage.load(path)
        except PackageError as exc:
            report = DetectorReport(package=str(path), path=str(path))
            for problem in exc.problems:
                report.defects.append(Defect.of(DefectCode.PACKAGE_INVALID, problem))
            return report
        report = self.check(pkg, path)
        report.path = str(path)
        return report

    def check(self, pkg: EnvironmentPackage, on_disk: Path | None = None) -> DetectorReport:
        report = DetectorReport(package=pkg.name)
        started = time.perf_counter()
        report.defects += audit(pkg)
        report.seconds["audit"] = time.perf_counter() - started
        if on_disk is not None and self.run_harbor_lint:
            started = time.perf_counter()
            lint = harbor_lint(on_disk)
            report.harbor_lint_ran = lint is not None
            report.defects += lint or []
            report.seconds["harbor_lint"] = time.perf_counter() - started
        if any(d.code == DefectCode.PACKAGE_STRUCTURE for d in report.defects):
            return report  # nothing to execute
        started = time.perf_counter()
        review = ExecutionReview(pkg, self.runtime)
        report.defects += review.run()
        report.stats = review.stats
        report.seconds["execution"] = time.perf_counter() - started
        return report
