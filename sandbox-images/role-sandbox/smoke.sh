#!/bin/sh
# Smoke test of the role sandbox image, run inside it (no cluster, no network needed):
#
#   docker run --rm --read-only --tmpfs /tmp --entrypoint cowork-gym-smoke \
#       cowork-gym/role-sandbox:dev
#
# Runs the four stages of one small procedural environment the way the operator's Jobs do
# (python -m coworkgym.roles.job <stage>, outputs on separate directories, the result as
# JSON in the termination log), with the release going to a local directory.
set -eu

fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
ok() { echo "smoke: ok: $*"; }

[ "$(id -u)" = 10001 ] || fail "runs as uid $(id -u), want 10001"
ok "non-root (uid 10001)"

# What the package's solution and verifier import, with the PATH the stages give them.
PATH=/usr/local/bin:/usr/bin:/bin python3 -c "import openpyxl, docx, jsonschema" \
    || fail "python3 on the sandbox PATH lacks openpyxl/python-docx/jsonschema"
ok "python3 on the stages' PATH has the verifier's libraries"

python -c "import importlib.util as u, sys; extra = [m for m in ('kopf', 'kubernetes', 'openai', 'torch', 'ray') if u.find_spec(m)]; sys.exit(f'not for sandboxes: {extra}' if extra else 0)" \
    || fail "the image carries packages a role sandbox must not have"
ok "no Kubernetes client, LLM client or training packages"

work=$(mktemp -d "${TMPDIR:-/tmp}/smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/builder" "$work/verifier" "$work/scratch"
export COWORKGYM_BUILDER_DIR="$work/builder" COWORKGYM_VERIFIER_DIR="$work/verifier"
export COWORKGYM_SCRATCH_DIR="$work/scratch" COWORKGYM_RELEASE_URI="$work/released"
export COWORKGYM_TERMINATION_LOG="$work/termination-log" HOME="$work"
export COWORKGYM_STAGE_INPUT='{"name":"smoke","iteration":0,"feedback":[],"spec":{"task":{"labels":{"scenario":"data_analysis/reporting/periodic_report","capabilities":["data_analysis","spreadsheet_authoring"]},"family":"weather_report","turns":2,"seed":1}}}'

for stage in builder verifier detector release; do
    python -m coworkgym.roles.job "$stage" >"$work/$stage.out" 2>"$work/$stage.err" || {
        cat "$work/$stage.err" >&2
        fail "stage $stage exited non-zero: $(cat "$work/termination-log" 2>/dev/null)"
    }
    result=$(cat "$work/termination-log")
    case "$result" in
        *'"ok":true'*) ok "stage $stage: $(printf %s "$result" | cut -c1-100)" ;;
        *) fail "stage $stage: $result" ;;
    esac
done
[ -f "$work/released/smoke/task.toml" ] || fail "no released package at $work/released/smoke"
ok "released package has task.toml"

echo "smoke: PASS (role-sandbox image)"
