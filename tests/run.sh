#!/usr/bin/env bash
# `make test`: the whole suite. With the test-bed enabled (COWORKGYM_TESTBED=1) its tests
# mostly wait, on pods, Jobs and API calls, while the rest (sandboxed solves, Ray, torch)
# keep both CPUs busy; one after the other they took about 100 minutes on the 2-core CI
# machine. So they run as two pytest sessions side by side: the test-bed session (one
# test-bed, one node; its lines prefixed "[test-bed]") and everything else. Without the
# test-bed, or with arguments (pytest's own), it is a single plain session.
# Exit status: pytest's, or 1 if either session failed.
set -uo pipefail
PYTEST=${PYTEST:-.venv/bin/pytest}
case "${COWORKGYM_TESTBED:-}" in 1 | true | yes) split=1 ;; *) split= ;; esac
if [[ -z $split || $# -gt 0 ]]; then
  exec "$PYTEST" -q --durations=40 "$@"
fi

"$PYTEST" -q --durations=40 -m testbed 2>&1 | sed -u 's/^/[test-bed] /' &
testbed_session=$!
rest=0
"$PYTEST" -q --durations=40 -m "not testbed" || rest=$?
testbed=0
wait "$testbed_session" || testbed=$?
echo "[suite] not test-bed: exit $rest; test-bed: exit $testbed"
[[ $rest -eq 0 && $testbed -eq 0 ]]
