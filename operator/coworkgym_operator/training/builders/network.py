"""The NetworkPolicy that fences a TrainingRun's training pods: ``<run>-training``. Pure.

It selects the pods of the run's training step (``coworkgym.dev/step: train``): the plain
Job's pod, an on-policy round's training pod, a RayJob's head, workers and submitter. They
also carry ``coworkgym.dev/sandbox: "true"``, so the chart's sandbox policies (deny all,
then the object store for ``egress: object-store``) select them too; this policy stands
on its own where the chart's are off, and adds only what Ray needs. Policies add up, so
together they allow:

    in    from the run's own training pods, any port
          from KubeRay's operator, to the dashboard port (the RayJob's state)
    out   to the run's own training pods, any port
          to the object store (store_cidr, store_port): data, weights, checkpoints
          to the cluster DNS on port 53 (a worker finds the head by its Service's name)

Why any port between the run's own pods: Ray's GCS (6379), raylets, object managers and
worker processes (10002-19999 by default) and the agents are only part of it; Ray Train's
torch process group (gloo, NCCL over sockets) listens on ports the workers pick at run time.
Those pods are one trust domain (one image, one set of credentials); the fence is the run,
not the port. Nothing else reaches them, and they reach nothing else: no API server (no
token is mounted either), no gateway, no other run. A round's checkpoint server is not
selected (``step: serve``): ``<run>-serving`` (builders/rounds.py) fences it.

The kubelet's probes come from the node, which NetworkPolicies let through.
"""

from __future__ import annotations

from coworkgym_operator.core.builders import child_name
from coworkgym_operator.training.builders.rayjob import DASHBOARD_PORT
from coworkgym_operator.training.builders.run import LABEL_STEP, LABEL_TRAINING, OWNER, Manifest
from coworkgym_operator.training.settings import TrainingSettings

DNS_PORT = 53


def training_policy_name(run: str) -> str:
    return child_name(run, "training")


def training_pods(run: str) -> dict[str, str]:
    """The labels of the run's training pods (every start's, every round's)."""
    return {LABEL_TRAINING: run, LABEL_STEP: "train"}


def _peer(labels: dict[str, str], namespace: str | None) -> Manifest:
    """Pods with ``labels`` in ``namespace`` (None: the policy's own; "": any)."""
    peer: Manifest = {"podSelector": {"matchLabels": dict(labels)}}
    if namespace == "":
        peer["namespaceSelector"] = {}
    elif namespace is not None:
        peer["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return peer


def _dns(settings: TrainingSettings) -> Manifest:
    if settings.dns_cidrs:
        to = [{"ipBlock": {"cidr": cidr}} for cidr in settings.dns_cidrs]
    else:
        to = [_peer(settings.dns_labels, settings.dns_namespace)]
    ports = [{"protocol": protocol, "port": DNS_PORT} for protocol in ("UDP", "TCP")]
    return {"to": to, "ports": ports}


def training_policy(run: Manifest, settings: TrainingSettings) -> Manifest:
    """``<run>-training``, owned by the run (the garbage collector deletes it with it)."""
    name = run["metadata"]["name"]
    op = settings.operator
    own = _peer(training_pods(name), None)
    kuberay = {
        "from": [_peer(settings.kuberay_labels, settings.kuberay_namespace)],
        "ports": [{"protocol": "TCP", "port": DASHBOARD_PORT}],
    }
    store = {
        "to": [{"ipBlock": {"cidr": op.store_cidr}}],
        "ports": [{"protocol": "TCP", "port": op.store_port}],
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": OWNER.metadata(run, training_policy_name(name), **{LABEL_STEP: "train"}),
        "spec": {
            "podSelector": {"matchLabels": training_pods(name)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [own]}, kuberay],
            "egress": [{"to": [own]}, store, _dns(settings)],
        },
    }


__all__ = ["DNS_PORT", "training_pods", "training_policy", "training_policy_name"]
