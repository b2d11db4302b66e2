"""Helpers for tests that drive CoworkEnvironments on the test-bed's API server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coworkgym_testbed.testbed import Testbed


def manifest(name: str, **spec: Any) -> str:
    body = {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "CoworkEnvironment",
        "metadata": {"name": name},
        "spec": {
            "task": {
                "labels": {
                    "capabilities": ["data_analysis"],
                    "scenario": "data_analysis/reporting/periodic_report",
                },
                "turns": 2,
                "seed": 3,
            },
            "release": {"uri": "s3://cowork-gym/envs"},
            **spec,
        },
    }
    return json.dumps(body)


class Cluster:
    def __init__(self, tb: Testbed, ns: str) -> None:
        self.tb, self.ns = tb, ns
        self.core = tb.kubernetes_client()  # CoreV1-capable ApiClient
        from kubernetes import client

        self.v1 = client.CoreV1Api(self.core)
        self.batch = client.BatchV1Api(self.core)
        self.custom = client.CustomObjectsApi(self.core)

    def apply(self, text: str) -> None:
        path = Path(f"/tmp/cwe-{self.ns}.json")
        path.write_text(text)
        self.tb.kubectl("apply", "-n", self.ns, "-f", str(path))

    def env(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.custom.get_namespaced_custom_object(
            "coworkgym.dev", "v1alpha1", self.ns, "coworkenvironments", name
        )
        return got

    def jobs(self) -> list[str]:
        return sorted(j.metadata.name for j in self.batch.list_namespaced_job(self.ns).items)

    def wait(self, what: Callable[[], Any], timeout: float = 45, message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = what()
            if value:
                return value
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {message or what}")

    def job(self, name: str) -> Any:
        return self.wait(
            lambda: next(
                (
                    j
                    for j in self.batch.list_namespaced_job(self.ns).items
                    if j.metadata.name == name
                ),
                None,
            ),
            message=f"job {name}",
        )

    def finish(self, job: str, result: dict[str, Any], ok: bool = True) -> None:
        """Play the kubelet: the Job's pod ran and wrote ``result`` to its termination log."""
        pod = self.wait(
            lambda: next(
                iter(self.v1.list_namespaced_pod(self.ns, label_selector=f"job-name={job}").items),
                None,
            ),
            message=f"pod of {job}",
        )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        terminated = {
            "exitCode": 0 if ok else 1,
            "reason": "Completed" if ok else "Error",
            "message": json.dumps(result),
            "startedAt": now,
            "finishedAt": now,
        }
        status = {
            "status": {
                "phase": "Succeeded" if ok else "Failed",
                "containerStatuses": [
                    {
                        "name": "role",
                        "ready": False,
                        "restartCount": 0,
                        "image": "role",
                        "imageID": "",
                        "state": {"terminated": terminated},
                    }
                ],
            }
        }
        self.v1.patch_namespaced_pod_status(pod.metadata.name, self.ns, status)

    def phase(self, name: str) -> str:
        return str(self.env(name).get("status", {}).get("phase", ""))


def stage_input(job: Any) -> dict[str, Any]:
    env = {e.name: e.value for e in job.spec.template.spec.containers[0].env}
    return json.loads(env["COWORKGYM_STAGE_INPUT"])
