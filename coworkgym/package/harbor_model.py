"""Ask Harbor's own task model whether it loads a task (Harbor is an optional extra).

Our loader mirrors Harbor's legacy-field handling; where Harbor is installed its
``harbor.models.task.task.Task`` has the last word on what Harbor can read, so a check never
refuses a task Harbor runs, nor accepts one Harbor cannot load.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class HarborVerdict:
    problems: list[str] = field(default_factory=list)  # why Harbor cannot load the task
    deprecations: list[str] = field(default_factory=list)  # what Harbor warned about
    steps: list[str] = field(default_factory=list)  # step names Harbor will run, in order

    @property
    def loads(self) -> bool:
        return not self.problems


def harbor_verdict(task_dir: Path) -> HarborVerdict | None:
    """Load ``task_dir`` with Harbor's ``Task``; None when Harbor is not installed."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from harbor.models.task.task import Task
    except ImportError:
        return None
    verdict = HarborVerdict()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            task = Task(task_dir)
        except (OSError, ValueError, RuntimeError) as exc:  # pydantic and TOML errors too
            verdict.problems.append(f"Harbor cannot load the task: {_one_line(exc)}")
        else:
            verdict.steps = [step.name for step in task.config.steps or []]
    verdict.deprecations = sorted({str(w.message) for w in caught})
    return verdict


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"
