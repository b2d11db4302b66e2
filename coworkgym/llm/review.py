"""The Issue Detector's LLM review: an optional pass after the deterministic review.

The agent reproduces the task in its own sandbox (the package read-only, a scratch dir) and
judges whether the verifier separates valid from shortcut states. It can only *add*
defects, and only with evidence that checks out: each must quote a package file verbatim.
It repairs nothing — it has no write access to the package, and the loop routes what it
reports to the owner like any other defect. In a stage pod (``in_place``) its directories
are the pod's emptyDirs at /package and /scratch (coworkgym.roles.llm.role_dirs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..detector import DetectorReport, IssueDetector
from ..detector.defects import Defect, DefectCode
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from ..sandbox import Mount, Sandbox
from . import prompts
from .agent import Agent, AgentUsage
from .tools import Args, RoleMounts, Tool, ToolBox, ToolError, ToolResult, standard_tools

if TYPE_CHECKING:
    from .session import RoleSession

ROLE = "detector"


class Evidence(Args):
    file: str = Field(description="package file, e.g. tests/verifier.json")
    quote: str = Field(min_length=3, description="exact text from that file")


class ReportArgs(Args):
    code: DefectCode
    message: str = Field(min_length=10)
    evidence: list[Evidence] = Field(min_length=1)


class FinishArgs(Args):
    summary: str = ""


class LLMReviewer:
    def __init__(
        self, session: RoleSession, environment: str, sandbox: Sandbox, *, in_place: bool = False
    ) -> None:
        self.session = session
        self.environment = environment
        self.sandbox = sandbox
        self.in_place = in_place
        self.usage: AgentUsage | None = None  # the model calls of the last review, once run

    def review(self, pkg: EnvironmentPackage) -> list[Defect]:
        found: list[Defect] = []

        def report(args: ReportArgs) -> str:
            for item in args.evidence:
                _check_quote(pkg, item)
            found.append(
                Defect.of(
                    args.code,
                    args.message,
                    source="llm_review",
                    quotes=[item.model_dump() for item in args.evidence],
                )
            )
            return f"recorded {args.code} (defect {len(found)})"

        def finish(args: FinishArgs) -> ToolResult:
            return ToolResult(f"review finished with {len(found)} defect(s)", done=True)

        from ..roles.llm import role_dirs

        names = ("package", "scratch")
        with role_dirs("cwg-llm-review-", names, self.in_place) as (package_dir, scratch):
            pkg.write(package_dir)
            mounts = RoleMounts(
                (Mount(package_dir, "/package"), Mount(scratch, "/scratch", writable=True)),
                cwd="/scratch",
            )
            tools: list[Tool[Any]] = [
                *standard_tools(mounts, self.sandbox, names=("shell", "read_file", "list_files")),
                Tool("report_defect", "Report one defect with evidence.", ReportArgs, report),
                Tool("finish", "End the review.", FinishArgs, finish),
            ]
            with self.session.client(self.environment, ROLE) as client:
                agent = Agent(
                    client,
                    ToolBox.of(tools),
                    self.session.agent_config(ROLE),
                    name=f"{ROLE}/{self.environment}",
                )
                self.usage = agent.usage
                agent.run(prompts.review_system(), prompts.review_task(pkg.name))
        return found


def _check_quote(pkg: EnvironmentPackage, evidence: Evidence) -> None:
    rel = evidence.file.removeprefix("/package/").lstrip("/")
    content = pkg.files.get(rel)
    if content is None:
        raise ToolError(f"evidence file {evidence.file} is not in the package")
    text = " ".join(content.decode("utf-8", errors="replace").split())
    if " ".join(evidence.quote.split()) not in text:
        raise ToolError(f"the quote does not occur in {rel}; quote the file verbatim")


class ReviewingDetector(IssueDetector):
    """The deterministic Issue Detector, then — for a candidate it would release — the LLM
    review (a package that already has errors goes back for revision anyway; reviewing it
    would spend tokens on a version that is about to change)."""

    def __init__(
        self,
        reviewer: LLMReviewer,
        runtime: LocalRuntime | None = None,
        run_harbor_lint: bool = True,
    ) -> None:
        super().__init__(runtime, run_harbor_lint=run_harbor_lint)
        self.reviewer = reviewer

    def check(self, pkg: EnvironmentPackage, on_disk: Path | None = None) -> DetectorReport:
        report = super().check(pkg, on_disk)
        if report.passed:
            report.defects += self.reviewer.review(pkg)
        return report
