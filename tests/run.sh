#!/usr/bin/env bash
# `make test`: the whole suite. With the test-bed enabled (COWORKGYM_TESTBED=1) its tests
# mostly wait, on pods, Jobs and API calls, while the rest (sandboxed solves, Ray, torch)
# keep both CPUs busy; one after the other they ran well over 90 minutes on the 2-core CI
# machine. So they run as pytest sessions side by side, each with its own test-bed:
#   - the real-pod tests (-m node; with COWORKGYM_TESTBED_NODE=1), on the one node there
#     can be, their lines prefixed "[node]";
#   - the other test-bed tests, on a test-bed without a node, prefixed "[test-bed]";
#   - everything else, unprefixed.
# Without the test-bed, or with arguments (pytest's own), it is a single plain session.
# Exit status: pytest's, or 1 if any session failed.
set -uo pipefail
PYTEST=${PYTEST:-.venv/bin/pytest}
on() { case "${1:-}" in 1 | true | yes) return 0 ;; *) return 1 ;; esac; }
if ! on "${COWORKGYM_TESTBED:-}" || [[ $# -gt 0 ]]; then
  exec "$PYTEST" -q --durations=40 "$@"
fi

pids=() names=()
session() { # session NAME PREFIX PYTEST-ARGS...: in the background, lines prefixed
  local name=$1 prefix=$2; shift 2
  "$@" 2>&1 | sed -u "s/^/$prefix /" &
  pids+=($!) names+=("$name")
}
if on "${COWORKGYM_TESTBED_NODE:-}"; then
  session node "[node]" "$PYTEST" -q --durations=25 -m node
fi
session test-bed "[test-bed]" env -u COWORKGYM_TESTBED_NODE "$PYTEST" -q --durations=25 \
  -m "testbed and not node"
rc=0
"$PYTEST" -q --durations=40 -m "not testbed" || rc=1
echo "[suite] not test-bed: exit $([[ $rc -eq 0 ]] && echo 0 || echo non-zero)"
for i in "${!pids[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  echo "[suite] ${names[$i]}: exit $status"
  [[ $status -eq 0 ]] || rc=1
done
exit $rc
