"""Entry point used by a package's tests/test.sh:

    python3 -m cowork_verifier --spec /tests/verifier.json --workspace /app --out /logs/verifier

Writes reward.json (flat) and details.json; on an invalid run writes only details.json and
exits 2, so Harbor records a missing reward (an error), never a 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .run import verify


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cowork_verifier")
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--tests-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trajectory", type=Path, default=None)
    parser.add_argument("--rubric-scores", type=Path, default=None)
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # evidence may quote any name the agent chose
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")

    args.out.mkdir(parents=True, exist_ok=True)
    for stale in ("reward.json", "reward.txt"):  # a reward left behind must never count
        (args.out / stale).unlink(missing_ok=True)
    try:
        spec = json.loads(args.spec.read_text(encoding="utf-8"))
        trajectory = _optional_json(args.trajectory)
        rubric_scores = _optional_json(args.rubric_scores)
    except (OSError, ValueError) as exc:
        details = {"status": "invalid", "error": f"cannot read verifier inputs: {exc}"}
        (args.out / "details.json").write_text(json.dumps(details, indent=2))
        return 2
    report = verify(
        spec,
        args.workspace,
        args.tests_dir or args.spec.parent,
        trajectory=trajectory,
        rubric_scores=rubric_scores,
    )
    (args.out / "details.json").write_text(json.dumps(report.details(), indent=2, default=str))
    if report.status != "valid":
        print(f"verifier invalid: {report.error}", file=sys.stderr)
        return 2
    (args.out / "reward.json").write_text(json.dumps(report.reward_json()))
    for c in report.components + report.red_lines:
        print(f"{c.status:8} {c.score:5.2f} {c.id}: {c.evidence}")
    print(f"reward {report.reward}")
    return 0


def _optional_json(path: Path | None) -> dict | None:  # type: ignore[type-arg]
    if path is None or not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


if __name__ == "__main__":
    sys.exit(main())
