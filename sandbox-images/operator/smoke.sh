#!/bin/sh
# Smoke test of the operator image, run inside it (no cluster needed):
#
#   docker run --rm --entrypoint cowork-gym-smoke cowork-gym/operator:dev
#
# Checks the posture (uid, no heavy packages, read-only install) and that the entrypoint
# imports and answers. Exits non-zero on the first failed check.
set -eu

fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
ok() { echo "smoke: ok: $*"; }

[ "$(id -u)" = 10001 ] || fail "runs as uid $(id -u), want 10001"
ok "non-root (uid 10001)"

python - <<'PY' || fail "imports"
import importlib
import importlib.util as u

for name in ("kopf", "kubernetes", "prometheus_client", "coworkgym.spec",
             "coworkgym_operator.__main__", "coworkgym_operator.controllers"):
    importlib.import_module(name)
heavy = [m for m in ("torch", "ray", "vllm", "transformers", "openai") if u.find_spec(m)]
assert not heavy, f"packages the operator must not carry: {heavy}"
PY
ok "imports the operator and its handlers; no torch/ray/LLM clients"

site=$(python -c 'import coworkgym_operator, os; print(os.path.dirname(coworkgym_operator.__file__))')
if touch "$site/.smoke" 2>/dev/null; then
    rm -f "$site/.smoke"
    fail "the installed package is writable by uid 10001"
fi
ok "installed code is read-only for the runtime user"

# The entrypoint starts the metrics server, then hands its arguments to `kopf run`.
help=$(COWORKGYM_METRICS_PORT="${SMOKE_METRICS_PORT:-18080}" python -m coworkgym_operator --help) \
    || fail "python -m coworkgym_operator --help"
for flag in --namespace --all-namespaces --peering --priority --standalone --liveness; do
    case "$help" in *"$flag"*) ;; *) fail "kopf run has no $flag" ;; esac
done
ok "python -m coworkgym_operator --help lists the flags the Helm chart passes"

echo "smoke: PASS (operator image)"
