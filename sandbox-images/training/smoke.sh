#!/bin/sh
# Smoke test of the training image, run inside it (no cluster, no network, no GPU):
#
#   docker run --rm --read-only --tmpfs /tmp --entrypoint cowork-gym-smoke cowork-gym/training:dev
#
# The trainer and the reporter import, `cowork-gym train` is registered, and the image
# runs as the sandbox user.
set -eu

fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
ok() { echo "smoke: ok: $*"; }

[ "$(id -u)" = 10001 ] || fail "runs as uid $(id -u), want 10001"
ok "non-root (uid 10001)"
python -c "import torch, transformers, ray.train, coworkgym_training.trainer" \
    || fail "the training extra does not import"
ok "torch $(python -c 'import torch; print(torch.__version__)'), transformers, ray[train]"
python -m coworkgym_operator.training.pod 2>&1 | grep -q "check-data|train" \
    || fail "the pod's reporter is missing"
ok "python -m coworkgym_operator.training.pod"
cowork-gym train --help >/dev/null || fail "cowork-gym train is not registered"
ok "cowork-gym train"
