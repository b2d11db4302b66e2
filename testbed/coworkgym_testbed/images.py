"""The test-bed's container images, built without a Docker engine, and their import into
containerd.

testbed/build-images.sh builds them with buildah from the same Dockerfiles users build
(sandbox-images/*/Dockerfile), on a locally bootstrapped Python base image, and writes
docker-archive files plus an index, images.json, under IMAGES_DIR:

    {"<image ref>": {"archive": "<file name>", "id": "sha256:<config digest>", "size": N}}

`build()` runs the script (cached: a warm run with no change is a no-op) and returns
ref -> archive; `import_into()` imports archives into a containerd (k8s.io namespace, where
the kubelet's CRI looks), skipping an image already there with the same id. Pods use them
with imagePullPolicy: Never. This module starts no containerd: the caller owns it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from coworkgym_testbed.binaries import cache_dir

BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "build-images.sh"

ROLE_IMAGE = "localhost/cowork-gym/role-sandbox:dev"
OPERATOR_IMAGE = "localhost/cowork-gym/operator:dev"
# KubeRay's Ray pods: ray/torch/the project come from the host's venv (sandbox-images/ray-testbed)
RAY_TESTBED_IMAGE = "localhost/cowork-gym/ray-testbed:dev"
PAUSE_IMAGE = "localhost/pause:v1"
ALL_IMAGES = (PAUSE_IMAGE, ROLE_IMAGE, OPERATOR_IMAGE, RAY_TESTBED_IMAGE)
NAMESPACE = "k8s.io"


def images_dir() -> Path:
    """${COWORKGYM_TESTBED_CACHE:-~/.cache/cowork-gym/testbed}/images, read now."""
    return cache_dir() / "images"


IMAGES_DIR = images_dir()  # as resolved at import time; images_dir() re-reads the environment


class ImageError(RuntimeError):
    """An image could not be built or imported, or has not been built yet."""


@dataclass(frozen=True)
class ImageArchive:
    ref: str
    archive: Path
    id: str  # sha256:<config digest>, the image id as `crictl images` shows it


def index(directory: Path | None = None) -> dict[str, ImageArchive]:
    """The built images (images.json), ref -> archive; empty when nothing was built."""
    directory = directory or images_dir()
    path = directory / "images.json"
    if not path.is_file():
        return {}
    raw: dict[str, dict[str, object]] = json.loads(path.read_text())
    return {
        ref: ImageArchive(ref, directory / str(entry["archive"]), str(entry["id"]))
        for ref, entry in raw.items()
    }


def build(
    say: Callable[[str], None] = lambda _msg: None,
    steps: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
) -> dict[str, Path]:
    """Run testbed/build-images.sh (all steps, or `steps` of pause/base/role/operator/ray),
    passing its log lines to `say`; return ref -> archive of every built image.

    Needs root, buildah, mmdebstrap, gcc and the pyenv CPython; a cold build takes minutes,
    a warm one about a second.
    """
    tail: deque[str] = deque(maxlen=40)
    with subprocess.Popen(
        ["bash", str(BUILD_SCRIPT), *steps],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            say(line)
        rc = proc.wait()
    if rc != 0:
        raise ImageError(f"{BUILD_SCRIPT} exited {rc}:\n" + "\n".join(tail))
    directory = Path((env or {}).get("COWORKGYM_TESTBED_CACHE") or cache_dir()) / "images"
    return {ref: image.archive for ref, image in index(directory).items()}


def _ctr(ctr_address: Path, *args: str, ctr: str = "ctr", namespace: str = NAMESPACE) -> str:
    cmd = [ctr, "--address", str(ctr_address), "-n", namespace, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImageError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def present(
    ctr_address: Path,
    refs: Iterable[str] | None = None,
    *,
    ctr: str = "ctr",
    namespace: str = NAMESPACE,
) -> dict[str, str]:
    """ref -> image id (config digest) of the images containerd holds (only `refs`, if given)."""
    wanted = set(refs) if refs is not None else None
    found: dict[str, str] = {}
    for line in _ctr(ctr_address, "images", "ls", ctr=ctr, namespace=namespace).splitlines()[1:]:
        fields = line.split()
        if len(fields) < 3 or (wanted is not None and fields[0] not in wanted):
            continue
        ref, digest = fields[0], fields[2]
        doc = json.loads(_ctr(ctr_address, "content", "get", digest, ctr=ctr, namespace=namespace))
        if "manifests" in doc:  # an index: the manifest for this machine's platform
            manifests = doc["manifests"]
            ours = [
                m
                for m in manifests
                if m.get("platform", {}).get("os") == "linux"
                and m.get("platform", {}).get("architecture") == _arch()
            ]
            digest = (ours or manifests)[0]["digest"]
            doc = json.loads(
                _ctr(ctr_address, "content", "get", digest, ctr=ctr, namespace=namespace)
            )
        found[ref] = str(doc["config"]["digest"])
    return found


def import_into(
    ctr_address: Path,
    refs: Iterable[str] | None = None,
    *,
    say: Callable[[str], None] = lambda _msg: None,
    ctr: str = "ctr",
    namespace: str = NAMESPACE,
    directory: Path | None = None,
) -> None:
    """`ctr images import` each built image (all of images.json, or `refs`) into the containerd
    at `ctr_address`, skipping one already there with the same id; then check the ids."""
    built = index(directory)
    wanted = list(refs) if refs is not None else list(built)
    missing = [ref for ref in wanted if ref not in built]
    if missing:
        raise ImageError(f"not built: {missing}; run testbed/build-images.sh (or images.build())")
    have = present(ctr_address, wanted, ctr=ctr, namespace=namespace)
    for ref in wanted:
        image = built[ref]
        if have.get(ref) == image.id:
            say(f"{ref}: already imported ({image.id[:19]})")
            continue
        say(f"{ref}: importing {image.archive}")
        _ctr(ctr_address, "images", "import", str(image.archive), ctr=ctr, namespace=namespace)
    now = present(ctr_address, wanted, ctr=ctr, namespace=namespace)
    wrong = {ref: now.get(ref) for ref in wanted if now.get(ref) != built[ref].id}
    if wrong:
        raise ImageError(f"after import, containerd holds other ids than images.json: {wrong}")
