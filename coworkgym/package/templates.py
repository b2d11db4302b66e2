"""The fixed files every Cowork package carries: Dockerfiles, test.sh, step setup scripts.

Base images are pinned to a dated Debian snapshot tag; the distribution's Python packages
give the solution and the verifier the same libraries the local sandbox has.
"""

from __future__ import annotations

import shlex

BASE_IMAGE = "debian:bookworm-20250520-slim"
RUNTIME_PACKAGES = "bash ca-certificates python3 python3-openpyxl python3-docx python3-pytest"
VERIFIER_PACKAGES = RUNTIME_PACKAGES + " python3-jsonschema"
AGENT_USER = "agent"
WORKDIR = "/app"

AGENT_DOCKERFILE = f"""\
# The acting agent's image: the initial workspace s0 and the tools the task needs.
# Nothing from tests/, solution/, .user/ or .patch/ is copied here.
FROM {BASE_IMAGE}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends {RUNTIME_PACKAGES} \\
 && rm -rf /var/lib/apt/lists/* \\
 && useradd --create-home --uid 1000 {AGENT_USER}
WORKDIR {WORKDIR}
COPY --chown={AGENT_USER}:{AGENT_USER} workspace/ {WORKDIR}/
USER {AGENT_USER}
"""

VERIFIER_DOCKERFILE = f"""\
# The separate verifier's image: the engine, the spec and its private inputs are baked in;
# only the collected workspace ({WORKDIR}) arrives from the agent's container.
FROM {BASE_IMAGE}
RUN apt-get update \\
 && apt-get install -y --no-install-recommends {VERIFIER_PACKAGES} \\
 && rm -rf /var/lib/apt/lists/*
COPY . /tests/
"""

TEST_SH = """\
#!/usr/bin/env bash
# Score the workspace with the Cowork verifier engine. Writes /logs/verifier/reward.json
# (flat: reward + one key per component) and details.json. A verifier fault writes no
# reward at all, so Harbor records an error instead of a 0.
set -u
tests="${COWORK_TESTS_DIR:-/tests}"
logs="${COWORK_LOGS_DIR:-/logs/verifier}"
mkdir -p "$logs"
extra=()
if [ -n "${COWORK_TRAJECTORY:-}" ]; then extra+=(--trajectory "$COWORK_TRAJECTORY"); fi
if [ -n "${COWORK_RUBRIC_SCORES:-}" ]; then extra+=(--rubric-scores "$COWORK_RUBRIC_SCORES"); fi
cd "$tests"
PYTHONPATH="$tests" exec python3 -m cowork_verifier --spec "$tests/verifier.json" \\
  --workspace "${COWORK_WORKSPACE:-/app}" --out "$logs" "${extra[@]}"
"""


def step_solve_sh(solve_sh: str, turn: int) -> str:
    """A Harbor step's oracle: the package's reference solution pinned to one turn."""
    body = solve_sh.split("\n", 1)[1] if solve_sh.startswith("#!") else solve_sh
    return f"#!/usr/bin/env bash\nexport COWORK_TURN={turn}\n{body}"


def step_setup_sh(deleted: list[str]) -> str:
    """Harbor copies a step's workdir/ into the workspace; this removes what the user deleted."""
    lines = ["#!/usr/bin/env bash", "# Apply the user's deletions for this turn.", "set -eu"]
    lines += [f"rm -f -- {shlex.quote(path)}" for path in deleted]
    lines.append("rm -f -- ./setup.sh")
    return "\n".join(lines) + "\n"
