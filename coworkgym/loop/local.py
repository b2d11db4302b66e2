"""Drive the loop on one machine: procedural (or LLM) roles, the local Issue Detector and a
publisher. The Kubernetes controller runs the same state machine with Jobs instead."""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from ..detector import IssueDetector
from ..package.assemble import BuilderOutput, VerifierOutput, assemble
from ..package.package import EnvironmentPackage
from ..release import Publisher
from ..roles.base import Builder, RoleError, RoleRequest, VerifierConstructor
from ..spec import EnvironmentSpec
from .machine import (
    Budget,
    Event,
    Executed,
    LoopStatus,
    RunStage,
    StageFailed,
    StageSucceeded,
    Start,
    step,
)

log = structlog.get_logger(__name__)


@dataclass
class EnvironmentRun:
    name: str
    spec: EnvironmentSpec
    status: LoopStatus = field(default_factory=LoopStatus)
    built: BuilderOutput | None = None
    verifier: VerifierOutput | None = None
    package: EnvironmentPackage | None = None
    location: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def record(self) -> dict[str, Any]:
        """The manifest record of a released environment."""
        assert self.package is not None
        cowork = self.package.config.cowork
        return {
            "name": self.name,
            "task": self.package.name,
            "spec_digest": self.spec.digest(),
            "digest": self.package.digest(),
            "harbor_digest": self.package.harbor_digest(),
            "iterations": self.status.iteration,
            "family": cowork.family if cowork else None,
            "scenario": cowork.taxonomy.scenario if cowork else None,
            "capabilities": cowork.taxonomy.capabilities if cowork else [],
            "turns": cowork.turns if cowork else 1,
        }


class LocalLoop:
    def __init__(
        self,
        builder: Builder,
        constructor: VerifierConstructor,
        detector: IssueDetector,
        publisher: Publisher,
    ) -> None:
        self.builder = builder
        self.constructor = constructor
        self.detector = detector
        self.publisher = publisher

    def run(self, name: str, spec: EnvironmentSpec) -> EnvironmentRun:
        run = EnvironmentRun(name, spec)
        budget = Budget(max_iterations=spec.budget.max_iterations)
        decision = step(run.status, Start(), budget)
        while decision.actions:
            run.status = decision.status
            action = decision.actions[0]
            started = time.perf_counter()
            event = self._perform(run, action)
            run.stage_seconds[action.stage] += time.perf_counter() - started
            decision = step(decision.status, event, budget)
        run.status = decision.status
        log.info("environment finished", name=name, phase=run.status.phase, it=run.status.iteration)
        return run

    def _perform(self, run: EnvironmentRun, action: RunStage) -> Event:
        request = RoleRequest(run.name, run.spec, run.status.iteration, action.feedback)
        try:
            match action.stage:
                case "builder":
                    run.built = self.builder.build(request, run.built)
                case "verifier":
                    assert run.built is not None
                    run.verifier = self.constructor.construct(request, run.built, run.verifier)
                case "detector":
                    return self._execute(run)
                case "release":
                    assert run.package is not None
                    run.location = self.publisher.publish(run.name, run.package, run.record())
        except RoleError as exc:
            return StageFailed(action.stage, str(exc), exc.retryable)
        except OSError as exc:  # infrastructure (disk, store): worth one retry
            return StageFailed(action.stage, f"{type(exc).__name__}: {exc}", retryable=True)
        return StageSucceeded(action.stage)

    def _execute(self, run: EnvironmentRun) -> Event:
        assert run.built is not None and run.verifier is not None
        run.package = assemble(run.built, run.verifier)
        with tempfile.TemporaryDirectory(prefix="cwg-candidate-") as tmp:
            report = self.detector.check(run.package, run.package.write(Path(tmp) / "pkg"))
        return Executed(report.defects)
