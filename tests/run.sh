#!/usr/bin/env bash
# `make test`: the whole suite. With the test-bed enabled (COWORKGYM_TESTBED=1) its tests
# mostly wait, on pods, Jobs and API calls, while the rest (sandboxed solves, Ray, torch)
# keep both CPUs busy; one after the other they ran well over 90 minutes on the 2-core CI
# machine. So they run as pytest sessions side by side, each with its own test-bed:
#   - the tests that build many task images (-m image_builds: the real Harbor corpus),
#     prefixed "[images]"; they start first, beside
#   - everything else that needs no test-bed, unprefixed; meanwhile the
#     test-bed's binaries and images are built (testbed/build.sh, testbed/build-images.sh:
#     both cached, no-ops when warm; on a new machine the Go builds take most of an hour,
#     and a build already running, as .ci/run starts one, is waited for by its lock);
#   - the real-pod tests (-m node; with COWORKGYM_TESTBED_NODE=1), on the one node there
#     can be, their lines prefixed "[node]";
#   - the other test-bed tests, on a test-bed without a node, prefixed "[test-bed]".
# Without the test-bed, or with arguments (pytest's own), it is a single plain session.
# The sessions' lines interleave, and CI shows only the tail of the log; so each session's
# output is also kept in a file, and the run ends with every session's failures and result.
# Exit status: pytest's, or 1 if any session failed (or the test-bed could not be built).
set -uo pipefail
PYTEST=${PYTEST:-.venv/bin/pytest}
on() { case "${1:-}" in 1 | true | yes) return 0 ;; *) return 1 ;; esac; }
if ! on "${COWORKGYM_TESTBED:-}" || [[ $# -gt 0 ]]; then
  exec "$PYTEST" -q --durations=40 "$@"
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=() names=()
session() { # session NAME PREFIX PYTEST-ARGS...: in the background, lines prefixed
  local name=$1 prefix=$2; shift 2
  "$@" 2>&1 | tee "$logs/$name.log" | sed -u "s/^/$prefix/" &
  pids+=($!) names+=("$name")
}
# A session's verdict: pytest's short summary (FAILED/ERROR lines) and its last line.
verdict() { # verdict NAME
  grep -E '^(FAILED|ERROR) ' "$logs/$1.log" | sed "s/^/[suite] $1: /"
  tail -n 1 "$logs/$1.log" | sed "s/^/[suite] $1: /"
}
rc=0
# The real Harbor corpus builds its 44 task images (and, cold, their Debian and Python
# bases): mostly downloads and dpkg, so beside the rest rather than before it (cold, it
# took 35 of the not-test-bed session's minutes when it ran inside it).
session image-builds "[images] " "$PYTEST" -q --durations=10 -m "image_builds and not testbed"
session not-test-bed "" "$PYTEST" -q --durations=40 -m "not testbed and not image_builds"
t=$SECONDS
components=() # build.sh's default set; KubeRay only for its opt-in e2e
on "${COWORKGYM_TESTBED_KUBERAY:-}" && components=(etcd k8s kube-router coredns helm kubeconform seaweedfs kuberay)
if testbed/build.sh "${components[@]}" && testbed/build-images.sh; then
  echo "[suite] test-bed built (or found cached) in $((SECONDS - t)) s"
  if on "${COWORKGYM_TESTBED_NODE:-}"; then
    session node "[node] " "$PYTEST" -q --durations=25 -m node
  fi
  session test-bed "[test-bed] " env -u COWORKGYM_TESTBED_NODE "$PYTEST" -q --durations=25 \
    -m "testbed and not node"
else
  echo "[suite] the test-bed could not be built: its sessions did not run"
  rc=1
fi
for i in "${!pids[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  echo "[suite] ${names[$i]}: exit $status"
  [[ $status -eq 0 ]] || rc=1
done
for name in "${names[@]}"; do verdict "$name"; done
exit $rc
