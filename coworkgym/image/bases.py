"""Base images without a registry: each ``FROM`` of a task is mapped to a local base image.

No container registry is reachable from a machine like this one, so ``python:3.12-slim``
cannot be pulled. Like the test-bed (testbed/build-images.sh), the local bases are built
with mmdebstrap from the host's apt mirror, plus the host's own CPython for the Python
images, and cached in the image storage by a key of everything that goes into them.

The default mapping (``DEFAULT_RULES``; the first matching pattern wins, overrides first):

    python:3.N, python:3.N-*, python:3.N.*   ->  local python base 3.N (Debian bookworm
                                                 minbase + CPython 3.N in /usr/local, as the
                                                 official images lay it out)
    python, python:3, python:latest, python:slim, python:3-*  ->  the same, 3.N = ours
    debian:*, ubuntu:*, buildpack-deps:*     ->  local Debian bookworm minbase

    ghcr.io/astral-sh/uv:X.Y.Z               ->  local image with /uv and /uvx, the static
                                                 (musl) binaries of uv X.Y.Z from PyPI's wheel,
                                                 as the official image holds them (for
                                                 ``COPY --from=ghcr.io/astral-sh/uv:X.Y.Z``)

``ubuntu:*`` on Debian is an approximation (same package manager, other versions); a task
whose build or run depends on Ubuntu's exact packages needs its own mapping. The Python
bases differ from ``python:*-slim`` in one documented way: they ship pytest (copied from the
running interpreter's environment when its minor version matches), because Harbor's
verifiers install pytest from the network at verify time, which this machine has not.

Overrides: ``--base-image PATTERN=LOCAL`` on ``cowork-gym check`` (repeatable) or
``COWORKGYM_BASE_IMAGES="PATTERN=LOCAL,..."``; PATTERN is a glob over the normalised
reference (``docker.io/library/`` and any ``@sha256:`` digest removed, ``:latest`` added),
LOCAL an image already in the check storage or an archive to import from disk
(``oci-archive:PATH``, ``docker-archive:PATH``, ``oci:DIR``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .buildah import Buildah, BuildahError, log_tail

OVERRIDES_ENV = "COWORKGYM_BASE_IMAGES"
SUITE = os.environ.get("COWORKGYM_BASE_SUITE", "bookworm")
APT_SOURCES = Path(
    os.environ.get("COWORKGYM_BASE_APT_SOURCES", "/etc/apt/sources.list.d/debian.sources")
)
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
LOCAL_PREFIX = "localhost/cowork-gym/check-base"
ARCHIVE_TRANSPORTS = ("oci-archive:", "docker-archive:", "oci:")
# Bump when a recipe changes in a way its key does not see.
RECIPE = 2
PYTHON_RECIPE = 2  # the Python bases' own part (test data left out of the stdlib)
# What the official slim images install, plus passwd (Dockerfiles add users).
DEBIAN_PACKAGES = ("ca-certificates", "netbase", "tzdata", "passwd")
PYTHON_LIBRARIES = (
    *("libssl3", "libffi8", "zlib1g", "libsqlite3-0", "libbz2-1.0", "liblzma5", "libreadline8"),
    *("libncursesw6", "libtinfo6", "libuuid1", "libgdbm6", "libexpat1", "libnsl2", "libtirpc3"),
    "libcrypt1",
)
# pytest and what it imports; pure Python, copied from our own environment.
BUNDLED_DISTRIBUTIONS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


class BaseUnavailable(RuntimeError):
    """A FROM image this machine has no local base for (the message says how to map one)."""


@dataclass(frozen=True)
class Rule:
    pattern: str  # glob over the normalised reference
    local: str  # a recipe ("python:3.12", "debian"), an image ref, or an archive

    @classmethod
    def parse(cls, text: str) -> Rule:
        pattern, sep, local = text.partition("=")
        if not sep or not pattern.strip() or not local.strip():
            raise ValueError(
                f"base image mapping {text!r} is not PATTERN=LOCAL "
                "(e.g. python:3.11-slim=localhost/my/python:3.11)"
            )
        return cls(normalise(pattern.strip()), local.strip())


def _default_rules() -> list[Rule]:
    ours = f"python:{sys.version_info.major}.{sys.version_info.minor}"
    rules = [
        Rule(p, ours)
        for p in ("python:latest", "python:3", "python:slim*", "python:3-*", "python:bookworm")
    ]
    rules += [Rule(p, "python:{minor}") for p in ("python:3.*",)]
    rules += [Rule(p, "debian") for p in ("debian:*", "ubuntu:*", "buildpack-deps:*")]
    return rules


DEFAULT_RULES = _default_rules()


def normalise(ref: str) -> str:
    ref = ref.split("@", 1)[0]
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/", "library/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last or "*" in last else f"{ref}:latest"


PYTHON_MINOR = re.compile(r"^python:(3\.\d+)(?:$|[-.])")
UV_IMAGE = re.compile(r"^ghcr\.io/astral-sh/uv:(\d+\.\d+\.\d+)$")


@dataclass
class BaseMap:
    """FROM reference -> a local base image (built on first use, cached by key)."""

    overrides: Sequence[Rule] = ()

    @classmethod
    def from_settings(cls, mappings: Iterable[str] = ()) -> BaseMap:
        texts = [m for m in os.environ.get(OVERRIDES_ENV, "").split(",") if m.strip()]
        return cls([Rule.parse(t) for t in [*mappings, *texts]])

    def recipe_for(self, ref: str) -> str:
        """What a FROM reference maps to: a recipe name or a local image/archive."""
        wanted = normalise(ref)
        for rule in [*self.overrides, *DEFAULT_RULES]:
            if fnmatch.fnmatchcase(wanted, rule.pattern):
                if rule.local == "python:{minor}":
                    found = PYTHON_MINOR.match(wanted)
                    return f"python:{found.group(1)}" if found else rule.local
                return rule.local
        raise BaseUnavailable(missing_image(ref))

    def resolve_copied(self, buildah: Buildah, ref: str) -> str:
        """The local image a ``COPY --from=IMAGE`` reads: only a mapping (``--base-image``)
        or an image already stored here. A default rule does not apply: a stand-in base
        lacks the files such a COPY wants (``/uv`` from ``ghcr.io/astral-sh/uv``, say)."""
        wanted = normalise(ref)
        rule = next((r for r in self.overrides if fnmatch.fnmatchcase(wanted, r.pattern)), None)
        if rule is not None or UV_IMAGE.match(wanted):
            return self.resolve(buildah, ref, buildah.root / "logs")
        for stored in (ref, wanted, f"localhost/{wanted}"):
            if buildah.image_id(stored) is not None:
                return stored
        raise BaseUnavailable(missing_image(ref, "COPY --from"))

    def resolve(self, buildah: Buildah, ref: str, log_dir: Path) -> str:
        """The local image ref for ``ref``, building or importing it when needed."""
        uv = UV_IMAGE.match(normalise(ref))
        if uv and not any(fnmatch.fnmatchcase(normalise(ref), r.pattern) for r in self.overrides):
            return _ensure_uv(buildah, uv.group(1))
        local = self.recipe_for(ref)
        if local.startswith(ARCHIVE_TRANSPORTS):
            return _import_archive(buildah, local)
        if local.startswith("python:") and re.fullmatch(r"python:3\.\d+", local):
            return _ensure_recipe(buildah, PythonBase(local.split(":", 1)[1]), log_dir)
        if local == "debian":
            return _ensure_recipe(buildah, DebianBase(), log_dir)
        if buildah.image_id(local) is None:
            raise BaseUnavailable(
                f"base image {ref} is mapped to {local}, which is not in the check storage "
                f"({buildah.root / 'storage'}); import it there or map to oci-archive:PATH"
            )
        return local


def missing_image(ref: str, how: str = "FROM") -> str:
    return (
        f"needs image {ref} ({how}): not stored here, and no container registry answers; "
        f"map it with --base-image {ref}=LOCAL (an image in the check storage, or "
        "oci-archive:PATH)"
    )


def _import_archive(buildah: Buildah, source: str) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    ref = f"{LOCAL_PREFIX}/imported:{digest}"
    if buildah.image_id(ref) is None:
        with buildah.locked():
            try:
                buildah.run("pull", "--quiet", source)
                image = buildah.run("images", "--quiet", "--noheading", source).split()
                buildah.run("tag", image[0] if image else source, ref)
            except BuildahError as exc:
                raise BaseUnavailable(f"cannot import {source}: {log_tail(exc.log, 5)}") from exc
    return ref


# ---- recipes ------------------------------------------------------------------------


def _ensure_uv(buildah: Buildah, version: str) -> str:
    """``ghcr.io/astral-sh/uv:VERSION`` as the official image lays it out (``/uv``,
    ``/uvx``, nothing else), from uv's musllinux wheel on PyPI: the same static binaries."""
    ref = f"{LOCAL_PREFIX}/uv:{version}"
    if buildah.image_id(ref) is not None:
        return ref
    machine = os.uname().machine
    with buildah.locked(), tempfile.TemporaryDirectory(dir=buildah.root, prefix=".uv-") as tmp:
        if buildah.image_id(ref) is not None:
            return ref  # built by another process while we waited
        download = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
        download += ["--only-binary=:all:", "--platform", f"musllinux_1_1_{machine}"]
        fetched = subprocess.run(
            [*download, f"uv=={version}", "-d", tmp], capture_output=True, text=True, check=False
        )
        wheels = sorted(Path(tmp).glob("uv-*.whl"))
        if fetched.returncode != 0 or not wheels:
            raise BaseUnavailable(
                f"needs image ghcr.io/astral-sh/uv:{version}: uv {version} could not be "
                f"fetched from PyPI to stand in for it ({real_error(fetched.stderr, 3)})"
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in ("uv", "uvx"):
                target = Path(tmp) / name
                target.write_bytes(wheel.read(f"uv-{version}.data/scripts/{name}"))
                target.chmod(0o755)
        container = buildah.run("from", "scratch").strip()
        try:
            for name in ("uv", "uvx"):
                buildah.run("add", "--chmod", "0755", container, str(Path(tmp) / name), f"/{name}")
            buildah.run("config", "--label", f"io.cowork-gym.check.uv={version}", container)
            buildah.run("commit", "--rm", container, ref)
        except BuildahError as exc:
            buildah.run("rm", container)
            raise BaseUnavailable(f"could not build the uv {version} image: {exc.log}") from exc
    return ref


class DebianBase:
    name = "debian"
    ref = f"{LOCAL_PREFIX}/debian:{SUITE}"

    def packages(self) -> list[str]:
        return list(DEBIAN_PACKAGES)

    def key(self) -> str:
        digest = hashlib.sha256(f"recipe={RECIPE} {self.ref} {SUITE}\n".encode())
        digest.update(" ".join(self.packages()).encode())
        if APT_SOURCES.is_file():
            digest.update(APT_SOURCES.read_bytes())
        for crt in sorted(EXTRA_CA_DIR.glob("*.crt")) if EXTRA_CA_DIR.is_dir() else []:
            digest.update(crt.read_bytes())
        return digest.hexdigest()

    def customize(self, rootfs: Path) -> None:
        """Trust the host's extra CAs (a TLS-intercepting proxy), as the test-bed does."""
        crts = sorted(EXTRA_CA_DIR.glob("*.crt")) if EXTRA_CA_DIR.is_dir() else []
        if crts:
            target = rootfs / "usr/local/share/ca-certificates"
            target.mkdir(parents=True, exist_ok=True)
            for crt in crts:
                shutil.copy2(crt, target / crt.name)
            _chroot(rootfs, "update-ca-certificates")
            (rootfs / "etc/pip.conf").write_text(
                "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"
            )

    def config(self) -> list[str]:
        return ["--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]


class PythonBase(DebianBase):
    def __init__(self, minor: str) -> None:
        self.minor = minor
        self.name = f"python-{minor}"
        self.ref = f"{LOCAL_PREFIX}/python:{minor}-{SUITE}"
        self.prefix = find_cpython(minor)

    def packages(self) -> list[str]:
        return [*DEBIAN_PACKAGES, *PYTHON_LIBRARIES]

    def key(self) -> str:
        digest = hashlib.sha256(super().key().encode())
        digest.update(f"python-recipe={PYTHON_RECIPE}\n".encode())
        digest.update(f"{self.prefix} {_version_of(self.prefix)}".encode())
        for name, version in self.bundled():
            digest.update(f"{name}={version}".encode())
        return digest.hexdigest()

    def bundled(self) -> list[tuple[str, str]]:
        if f"{sys.version_info.major}.{sys.version_info.minor}" != self.minor:
            return []
        found = []
        for name in BUNDLED_DISTRIBUTIONS:
            try:
                found.append((name, metadata.version(name)))
            except metadata.PackageNotFoundError:
                return []  # all or nothing: a partial pytest would not import
        return found

    def customize(self, rootfs: Path) -> None:
        super().customize(rootfs)
        _install_cpython(self.prefix, self.minor, rootfs / "usr/local")
        site = rootfs / f"usr/local/lib/python{self.minor}/site-packages"
        for name, _ in self.bundled():
            _copy_distribution(name, site)
        if self.bundled():
            script = rootfs / "usr/local/bin/pytest"
            script.write_text(
                f"#!/usr/local/bin/python{self.minor}\nimport sys\nimport pytest\n"
                "sys.exit(pytest.console_main())\n"
            )
            script.chmod(0o755)
        _chroot(rootfs, "ldconfig")
        _chroot(rootfs, "/usr/local/bin/python3", "-c", "import ssl, sqlite3, ctypes, zlib")
        # Bytecode ahead of time: the sandbox's root is read-only, and compiling the stdlib
        # and pytest afresh would cost every verifier run about a second.
        lib = f"/usr/local/lib/python{self.minor}"
        # -x: any test data left (a pyenv build with its own layout) is not ours to compile
        skip = r"[/\\](tests?|idle_test)[/\\]"
        _chroot(rootfs, "/usr/local/bin/python3", "-m", "compileall", "-q", "-x", skip, lib)

    def config(self) -> list[str]:
        return [*super().config(), "--env", "LANG=C.UTF-8", "--cmd", '["python3"]']


def find_cpython(minor: str) -> Path:
    """A CPython 3.N installation to copy: ours, else pyenv's, else COWORKGYM_BASE_PYTHON_<N>."""
    explicit = os.environ.get(f"COWORKGYM_BASE_PYTHON_{minor.replace('.', '_')}")
    candidates = [Path(explicit)] if explicit else []
    if f"{sys.version_info.major}.{sys.version_info.minor}" == minor:
        candidates.append(Path(sys.base_prefix))
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(pyenv.glob(f"{minor}.*"), reverse=True) if pyenv.is_dir() else []
    for prefix in candidates:
        if (prefix / "bin" / f"python{minor}").is_file() and (
            prefix / "lib" / f"libpython{minor}.so.1.0"
        ).is_file():
            return prefix
    raise BaseUnavailable(
        f"no shared-library CPython {minor} on this machine to build the local python:{minor} "
        f"base (pyenv install {minor}, or set COWORKGYM_BASE_PYTHON_{minor.replace('.', '_')})"
    )


def _version_of(prefix: Path) -> str:
    """What identifies a CPython build: its path, and its interpreter's size and mtime."""
    binary = next((prefix / "bin").glob("python3.*[0-9]"))
    stat = binary.stat()
    return f"{prefix.resolve()} {stat.st_size} {stat.st_mtime_ns}"


SKIPPED_STDLIB = ("test", "idlelib", "tkinter", "turtledemo", "__pycache__")
# Test suites inside standard-library packages (lib2to3/tests/data holds files that are
# broken on purpose: compileall exits 1 on them); the official slim images drop them too.
SKIPPED_NESTED = ("tests", "test", "idle_test")


def _install_cpython(prefix: Path, minor: str, usr_local: Path) -> None:
    """CPython as the official image lays it out under /usr/local."""
    for part in ("bin", "lib", "include"):
        (usr_local / part).mkdir(parents=True, exist_ok=True)
    shutil.copy2(prefix / "bin" / f"python{minor}", usr_local / "bin")
    for name, target in (("python3", f"python{minor}"), ("python", "python3")):
        (usr_local / "bin" / name).symlink_to(target)
    shutil.copy2(prefix / "lib" / f"libpython{minor}.so.1.0", usr_local / "lib")
    (usr_local / "lib" / f"libpython{minor}.so").symlink_to(f"libpython{minor}.so.1.0")
    if (prefix / "lib" / "libpython3.so").is_file():
        shutil.copy2(prefix / "lib" / "libpython3.so", usr_local / "lib")
    shutil.copytree(prefix / "include" / f"python{minor}", usr_local / "include" / f"python{minor}")

    def skipped(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == prefix / "lib" / f"python{minor}"
        drop = [n for n in names if n == "__pycache__" or (top and n in SKIPPED_STDLIB)]
        in_stdlib = "site-packages" not in Path(folder).parts
        drop += [n for n in names if in_stdlib and not top and n in SKIPPED_NESTED]
        drop += [n for n in names if n.startswith(("_test", "_tkinter", "xxlimited"))]
        drop += [n for n in names if n.endswith(".pth") or n.endswith(".a")]
        if Path(folder).name == "site-packages":  # only pip, as the official images
            drop += [n for n in names if not n.startswith("pip") and n != "README.txt"]
        return drop

    shutil.copytree(
        prefix / "lib" / f"python{minor}",
        usr_local / "lib" / f"python{minor}",
        ignore=skipped,
        symlinks=True,
    )
    for script in (f"pip{minor}", f"pydoc{minor}"):
        source = prefix / "bin" / script
        if source.is_file():
            lines = source.read_text().splitlines(keepends=True)
            lines[0] = f"#!/usr/local/bin/python{minor}\n"
            (usr_local / "bin" / script).write_text("".join(lines))
            (usr_local / "bin" / script).chmod(0o755)
    for link, target in (("pip3", f"pip{minor}"), ("pip", "pip3"), ("pydoc3", f"pydoc{minor}")):
        if (usr_local / "bin" / target).exists() or target == "pip3":
            (usr_local / "bin" / link).symlink_to(target)


def _copy_distribution(name: str, site: Path) -> None:
    dist = metadata.distribution(name)
    for file in dist.files or []:
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue  # console scripts outside site-packages; we write our own
        source = Path(str(dist.locate_file(file)))
        if source.is_file():
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _chroot(rootfs: Path, *argv: str) -> None:
    subprocess.run(["chroot", str(rootfs), *argv], check=True, capture_output=True)


# Lines of a failed step's output that say what went wrong (not a SyntaxWarning's context).
ERROR_LINE = re.compile(
    r"(Error|error:|\*\*\*|E: |Traceback|No such file|not found|denied|failed)", re.IGNORECASE
)
NOISE_LINE = re.compile(r"(SyntaxWarning|DeprecationWarning|^\s*\S.*\^+\s*$)")


def real_error(text: str, lines: int = 8) -> str:
    """The lines of a failed command's output that name the error: its own error lines
    (compileall's ``***`` and ``SyntaxError``, apt's ``E:``, a traceback's last line), not
    the warnings around them; the tail when none is recognisable."""
    kept = [
        line.strip()
        for line in text.splitlines()
        if ERROR_LINE.search(line) and not NOISE_LINE.search(line)
    ]
    return "\n".join(kept[-lines:]) if kept else log_tail(text, lines)


def _ensure_recipe(buildah: Buildah, recipe: DebianBase, log_dir: Path) -> str:
    """The recipe's image, built once per key. A build that failed is remembered with its
    log (``bases/<name>.failed``: the key, then the reason) and not retried for the same key:
    every task on that base would pay a minute again for the same failure."""
    key = recipe.key()
    stamp = buildah.root / "bases" / f"{recipe.name}.key"
    failed = buildah.root / "bases" / f"{recipe.name}.failed"
    if stamp.is_file() and stamp.read_text().strip() == key and buildah.image_id(recipe.ref):
        return recipe.ref
    _raise_if_failed_before(failed, key)
    with buildah.locked():
        if stamp.is_file() and stamp.read_text().strip() == key and buildah.image_id(recipe.ref):
            return recipe.ref  # built by another process while we waited
        _raise_if_failed_before(failed, key)
        for stale in buildah.root.glob(".base-*"):  # left by an interrupted build
            shutil.rmtree(stale, ignore_errors=True)
        log = log_dir / f"base-{recipe.name}.log"
        try:
            _build_recipe(buildah, recipe, key, log)
        except (subprocess.CalledProcessError, OSError, BuildahError) as exc:
            detail = getattr(exc, "log", "") or getattr(exc, "stderr", b"") or str(exc)
            text = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
            if isinstance(exc, subprocess.CalledProcessError):
                text += "\n" + _decoded(exc.stdout)
                with log.open("a") as sink:  # the log keeps what the failed step printed
                    sink.write(f"\n$ {' '.join(map(str, exc.cmd))}\n{text}\n")
            reason = f"could not build the local base {recipe.ref} (log {log}): {real_error(text)}"
            failed.parent.mkdir(parents=True, exist_ok=True)
            failed.write_text(f"{key}\n{reason}\n")
            raise BaseUnavailable(reason) from exc
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(key + "\n")
        failed.unlink(missing_ok=True)
    return recipe.ref


def _raise_if_failed_before(failed: Path, key: str) -> None:
    if failed.is_file():
        remembered_key, _, reason = failed.read_text().partition("\n")
        if remembered_key.strip() == key:
            raise BaseUnavailable(
                f"{reason.strip()} (failed before with the same recipe; delete {failed} to retry)"
            )


def _decoded(data: object) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data if isinstance(data, str) else ""


def _build_recipe(buildah: Buildah, recipe: DebianBase, key: str, log: Path) -> None:
    if shutil.which("mmdebstrap") is None:
        raise BaseUnavailable("mmdebstrap is not installed (apt-get install mmdebstrap)")
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=buildah.root, prefix=".base-") as stage:
        rootfs = Path(stage) / "rootfs"
        with log.open("w") as sink:
            subprocess.run(
                [
                    "mmdebstrap",
                    "--mode=root",
                    "--variant=minbase",
                    "--format=directory",
                    f"--include={','.join(recipe.packages())}",
                    '--aptopt=Acquire::Languages "none"',
                    '--aptopt=APT::Install-Recommends "false"',
                    *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("man", "info", "doc")),
                    "--dpkgopt=path-exclude=/usr/share/locale/*",
                    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
                    "--skip=output/dev",
                    SUITE,
                    str(rootfs),
                    str(APT_SOURCES),
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                check=True,
            )
        recipe.customize(rootfs)
        for junk in ("var/lib/apt/lists", "var/cache/apt", "var/log/apt"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
            (rootfs / junk).mkdir(parents=True, exist_ok=True)
        (rootfs / "dev").mkdir(exist_ok=True)
        archive = Path(stage) / "rootfs.tar"
        subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(archive), "."], check=True
        )
        container = buildah.run("from", "scratch").strip()
        try:
            buildah.run("add", container, str(archive), "/")
            buildah.run(
                "config", *recipe.config(), "--label", f"io.cowork-gym.check.key={key}", container
            )
            buildah.run("commit", "--rm", container, recipe.ref)
        except BuildahError:
            buildah.run("rm", container)
            raise
        buildah.run("rmi", "--prune")
