#!/usr/bin/env bash
# `make testbed-operator`: install (or upgrade) the cowork-gym chart on the test-bed's node,
# with testbed/values.yaml and the S3 relay port of the running test-bed. Needs a test-bed
# with a node (`make testbed-up NODE=1`, as root). NAMESPACE and RELEASE default to
# cowork-gym, the namespace examples/specs/*.yaml name.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
NAMESPACE=${NAMESPACE:-cowork-gym}
RELEASE=${RELEASE:-cowork-gym}

# KUBECONFIG, the built kubectl/helm first on PATH, the S3 credentials and the relays.
eval "$("$PY" -m coworkgym_testbed env)"
if [[ -z "${COWORKGYM_S3_NODE_PORT:-}" ]]; then
  echo "testbed-operator: the test-bed in $COWORKGYM_TESTBED_DIR has no node; start one" \
    "with 'make testbed-up NODE=1' (as root)" >&2
  exit 1
fi

kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
# Only the release stage's pod gets these (envFrom); the operator never reads Secrets.
kubectl -n "$NAMESPACE" create secret generic cowork-gym-s3 \
  --from-literal=AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
  --from-literal=AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
  --from-literal=AWS_DEFAULT_REGION="$AWS_DEFAULT_REGION" \
  --dry-run=client -o yaml | kubectl apply -f -

# training.hostCheckout: training pods mount this checkout (its .venv with the training
# extra) read-only, the test-bed shortcut of testbed/values.yaml.
helm upgrade --install "$RELEASE" charts/cowork-gym -n "$NAMESPACE" -f testbed/values.yaml \
  --set s3.endpoint="$COWORKGYM_S3_NODE_ENDPOINT" \
  --set networkPolicy.objectStore.port="$COWORKGYM_S3_NODE_PORT" \
  --set training.hostCheckout="$PWD"
kubectl -n "$NAMESPACE" rollout status "deployment/$RELEASE" --timeout=300s
