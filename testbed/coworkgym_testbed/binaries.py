"""Where the test-bed's programs are: the build cache of testbed/build.sh, or PATH.

build.sh and this module read the same versions.env, so a version bump in one place moves
both the build and the lookup.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

VERSIONS_FILE = Path(__file__).with_name("versions.env")


class MissingBinaryError(RuntimeError):
    """A program the test-bed needs has not been built or installed."""


def versions() -> dict[str, str]:
    """The component versions; environment variables override versions.env, as in build.sh."""
    found: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            found[key.strip()] = os.environ.get(key.strip()) or value.strip()
    return found


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "cowork-gym" / "testbed"
    return Path(os.environ.get("COWORKGYM_TESTBED_CACHE") or default)


@dataclass(frozen=True)
class Tool:
    """A program: either built by build.sh (component set) or taken from PATH."""

    name: str
    component: str | None  # build.sh component name; None = from PATH (e.g. Debian's promtool)
    cache_subdir: str | None = None  # <name>-<version> under the cache

    def path(self) -> Path:
        if self.cache_subdir is None:
            found = shutil.which(self.name)
            if found is None:
                raise MissingBinaryError(
                    f"{self.name} not on PATH; run testbed/ci-setup.sh (it apt-installs it)"
                )
            return Path(found)
        candidate = cache_dir() / self.cache_subdir / "bin" / self.name
        if not candidate.is_file():
            raise MissingBinaryError(
                f"{self.name} not built: {candidate} is missing; run `testbed/build.sh "
                f"{self.component}` (or `make testbed-build`)"
            )
        return candidate


def tools() -> dict[str, Tool]:
    v = versions()
    k8s = f"kubernetes-{v['K8S_VERSION']}-all"  # one build: control plane, kubelet, kube-proxy
    return {
        t.name: t
        for t in (
            Tool("etcd", "etcd", f"etcd-{v['ETCD_VERSION']}"),
            Tool("kube-apiserver", "k8s", k8s),
            Tool("kube-controller-manager", "k8s", k8s),
            Tool("kube-scheduler", "k8s", k8s),
            Tool("kubectl", "k8s", k8s),
            Tool("kubelet", "k8s", k8s),
            Tool("kube-proxy", "k8s", k8s),
            Tool("kube-router", "kube-router", f"kube-router-{v['KUBE_ROUTER_VERSION']}"),
            Tool("coredns", "coredns", f"coredns-{v['COREDNS_VERSION']}"),
            Tool("helm", "helm", f"helm-{v['HELM_VERSION']}"),
            Tool("kubeconform", "kubeconform", f"kubeconform-{v['KUBECONFORM_VERSION']}"),
            Tool("weed", "seaweedfs", f"seaweedfs-{v['SEAWEEDFS_VERSION']}"),
            Tool("kuberay-operator", "kuberay", f"kuberay-{v['KUBERAY_VERSION']}"),
            Tool("promtool", None),
        )
    }


def kuberay_crds() -> list[Path]:
    """The KubeRay CRDs (RayCluster, RayJob, RayService) that build.sh copied from the
    operator's module, beside its binary."""
    crds = sorted((which("kuberay-operator").parent.parent / "crds").glob("ray.io_*.yaml"))
    if not crds:
        raise MissingBinaryError(
            "no KubeRay CRDs beside kuberay-operator; run `testbed/build.sh kuberay`"
        )
    return crds


def which(name: str) -> Path:
    """Path of a test-bed program by its name (kubectl, helm, weed, promtool...)."""
    return tools()[name].path()
