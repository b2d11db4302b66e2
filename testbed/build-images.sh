#!/usr/bin/env bash
# Build the test-bed's container images without a Docker engine and without a registry:
#
#   pause         localhost/pause:v1                               testbed/images/pause.c, gcc -static
#   python-base   localhost/cowork-gym/python-base:3.12-bookworm   mmdebstrap (host apt mirror) + the host's CPython
#   role-sandbox  localhost/cowork-gym/role-sandbox:dev            buildah bud sandbox-images/role-sandbox/Dockerfile
#   operator      localhost/cowork-gym/operator:dev                buildah bud sandbox-images/operator/Dockerfile
#   ray-testbed   localhost/cowork-gym/ray-testbed:dev             buildah bud sandbox-images/ray-testbed/Dockerfile
#                 (KubeRay's Ray pods; Ray and torch come from the host's venv by hostPath)
#
# The two project images are built from the same Dockerfiles users build, with
# --build-arg PYTHON_IMAGE=<the local python-base>; pip inside their RUN steps reaches PyPI.
# Output, ready for `ctr -n k8s.io images import <archive>` (docker-archive: the archive
# names its image, so the import tags it):
#
#   ${COWORKGYM_TESTBED_CACHE:-$HOME/.cache/cowork-gym/testbed}/images/
#     pause.tar role-sandbox.tar operator.tar   docker-archive files
#     images.json                               {"<ref>": {"archive": "<file>", "id": "sha256:<config digest>"}}
#     .work/                                    buildah's private storage, stamps, build logs
#
#   testbed/build-images.sh                 # everything (cached; a warm run with no change is a no-op)
#   testbed/build-images.sh pause role      # some steps (base is built first when a project image needs it)
#
# From .ci/run, after ci-setup (needs root, buildah, mmdebstrap, gcc, the pyenv CPython):
#
#   step "test-bed images (buildah)" testbed/build-images.sh
#
# or from Python: coworkgym_testbed.images.build() (returns ref -> archive) and
# coworkgym_testbed.images.import_into(<containerd socket>).
#
# Each step is keyed by what goes into it and rebuilt only when its key changes:
#   pause: sha256 of pause.c; base: Debian suite + package list + Python version + the host's
#   extra CA certificates; role/operator: the build context's files (after
#   Dockerfile.dockerignore), the Dockerfile, and the base image's id.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${COWORKGYM_TESTBED_CACHE:-$HOME/.cache/cowork-gym/testbed}
OUT=$CACHE/images
WORK=$OUT/.work

SUITE=${COWORKGYM_IMAGES_SUITE:-bookworm}
PY_VERSION=${COWORKGYM_IMAGES_PYTHON:-3.12.1}
PY_SRC=${COWORKGYM_IMAGES_PYTHON_PREFIX:-$HOME/.pyenv/versions/$PY_VERSION}
PY_MINOR=${PY_VERSION%.*}
APT_SOURCES=${COWORKGYM_IMAGES_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
# What the official python:*-slim images install, plus passwd (useradd/groupadd: the
# Dockerfiles create their users) and libnsl2/libtirpc3 (the nis module).
BASE_PACKAGES=(ca-certificates netbase tzdata passwd
  libssl3 libffi8 zlib1g libsqlite3-0 libbz2-1.0 liblzma5 libreadline8 libncursesw6 libtinfo6
  libuuid1 libgdbm6 libexpat1 libnsl2 libtirpc3 libcrypt1)
# CAs the host trusts beyond Debian's bundle (a TLS-intercepting egress proxy, a company CA):
# copied into the base image so pip in the Dockerfiles' RUN steps can reach PyPI from here.
# Empty on a plain machine, and then the base image is exactly Debian's trust store.
EXTRA_CA_DIR=${COWORKGYM_IMAGES_EXTRA_CA_DIR:-/usr/local/share/ca-certificates}

PAUSE_REF=localhost/pause:v1
BASE_REF=localhost/cowork-gym/python-base:$PY_MINOR-$SUITE
ROLE_REF=localhost/cowork-gym/role-sandbox:dev
OPERATOR_REF=localhost/cowork-gym/operator:dev
RAY_TESTBED_REF=localhost/cowork-gym/ray-testbed:dev
# Bump when the recipe below changes in a way the keys do not see.
RECIPE=4

log() { printf '[testbed-images] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

for tool in buildah gcc sha256sum flock; do
  command -v "$tool" >/dev/null || die "missing $tool (apt-get install buildah gcc libc6-dev util-linux)"
done
PY=$(command -v python3) || die "missing python3 on PATH"
[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap --mode=root, buildah's chroot isolation)"

mkdir -p "$OUT" "$WORK"
exec 9>"$WORK/.lock"
flock 9 || die "cannot lock $WORK/.lock"
rm -rf "$WORK"/.stage-* "$WORK"/context-* "$OUT"/.*.tmp # left by an interrupted run

# buildah with its own storage under the cache: the machine's /var/lib/containers is untouched.
DRIVER=${COWORKGYM_IMAGES_STORAGE_DRIVER:-}
if [ -z "$DRIVER" ]; then
  if [ -f "$WORK/storage-driver" ]; then DRIVER=$(cat "$WORK/storage-driver"); else
    # overlay where the kernel allows it (a probe mount), else vfs (full copies, slower).
    probe=$(mktemp -d "$WORK/.probe.XXXX"); mkdir -p "$probe"/{l,u,w,m}
    if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
      umount "$probe/m"; DRIVER=overlay; else DRIVER=vfs; fi
    rm -rf "$probe"; echo "$DRIVER" >"$WORK/storage-driver"
  fi
fi
bh() { buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver "$DRIVER" "$@"; }
image_id() { bh inspect --type image --format '{{.FromImageID}}' "$1" 2>/dev/null; }

# step NAME FUNCTION...: run with a log file under .work, timed; the log's tail on failure.
step() {
  local name=$1 start=$SECONDS; shift
  log "$name: building..."
  # A background subshell, so that `set -e` holds inside the step (it is off in an `if`).
  ( set -euo pipefail; "$@" ) >"$WORK/$name.log" 2>&1 &
  if ! wait $!; then
    log "$name: FAILED after $((SECONDS - start))s; see $WORK/$name.log"
    tail -40 "$WORK/$name.log" >&2
    return 1
  fi
  log "$name: built in $((SECONDS - start))s"
}

# Write image $1 to $OUT/$2 as a docker-archive that names it (atomically).
export_archive() {
  rm -f "$OUT/.$2.tmp"
  bh push "$1" "docker-archive:$OUT/.$2.tmp:$1"
  mv -f "$OUT/.$2.tmp" "$OUT/$2"
}

# Remove a stale working container or a dangling image left by an earlier (failed) run.
cleanup_storage() { bh rm --all >/dev/null 2>&1 || true; bh rmi --prune >/dev/null 2>&1 || true; }

# ---------------------------------------------------------------------------- pause
build_pause() {
  local stage; stage=$(mktemp -d "$WORK/.stage-pause.XXXX")
  gcc -static -Os -Wall -Wextra -Werror -o "$stage/pause" "$REPO/testbed/images/pause.c"
  strip "$stage/pause"
  "$stage/pause" --version
  local c; c=$(bh from scratch)
  bh copy --chmod 0755 "$c" "$stage/pause" /pause
  bh config --entrypoint '["/pause"]' --cmd '' --user 65535:65535 \
    --label org.opencontainers.image.title=cowork-gym-testbed-pause \
    --label io.cowork-gym.testbed.key="$1" "$c"
  bh commit --rm --format docker "$c" "$PAUSE_REF"
  export_archive "$PAUSE_REF" pause.tar
  rm -rf "$stage"
}

# ---------------------------------------------------------------------------- base
# Runs in mmdebstrap's customize hook: $1 is the new root file system.
base_customize() {
  local root=$1 src=$PY_SRC lib=$PY_SRC/lib/python$PY_MINOR
  local ul=$root/usr/local
  mkdir -p "$ul/bin" "$ul/lib" "$ul/include"
  # CPython as the official image lays it out under /usr/local.
  cp -a "$src/bin/python$PY_MINOR" "$ul/bin/"
  ln -sf "python$PY_MINOR" "$ul/bin/python3"; ln -sf python3 "$ul/bin/python"
  cp -a "$src/lib/libpython$PY_MINOR.so.1.0" "$src/lib/libpython3.so" "$ul/lib/"
  ln -sf "libpython$PY_MINOR.so.1.0" "$ul/lib/libpython$PY_MINOR.so"
  cp -a "$src/include/python$PY_MINOR" "$ul/include/"
  tar -C "$src/lib" -c \
    --exclude=__pycache__ --exclude="python$PY_MINOR/test" --exclude="python$PY_MINOR/idlelib" \
    --exclude="python$PY_MINOR/tkinter" --exclude="python$PY_MINOR/turtledemo" \
    --exclude="python$PY_MINOR/lib-dynload/_test*" --exclude="python$PY_MINOR/lib-dynload/_tkinter*" \
    --exclude="python$PY_MINOR/lib-dynload/_xxtestfuzz*" --exclude="python$PY_MINOR/lib-dynload/_ctypes_test*" \
    --exclude="python$PY_MINOR/lib-dynload/xxlimited*" \
    --exclude="python$PY_MINOR/config-*/libpython*.a" --exclude="python$PY_MINOR/config-*/python.o" \
    --exclude="python$PY_MINOR/site-packages/*.pth" \
    "python$PY_MINOR" | tar -C "$ul/lib" -x
  [ -d "$lib/site-packages/pip" ] || { echo "no pip in $lib/site-packages" >&2; return 1; }
  # pip and pydoc entry points, pointing at the image's interpreter.
  local s
  for s in "pip$PY_MINOR" "pydoc$PY_MINOR"; do
    sed "1s|^#!.*|#!/usr/local/bin/python$PY_MINOR|" "$src/bin/$s" >"$ul/bin/$s"; chmod 0755 "$ul/bin/$s"
  done
  # Without debug symbols, as the official images link with -Wl,--strip-all.
  strip --strip-unneeded "$ul/bin/python$PY_MINOR" "$ul/lib/libpython$PY_MINOR.so.1.0" \
    "$ul/lib/python$PY_MINOR"/lib-dynload/*.so
  ln -sf "pip$PY_MINOR" "$ul/bin/pip3"; ln -sf pip3 "$ul/bin/pip"
  ln -sf "pydoc$PY_MINOR" "$ul/bin/pydoc3"; ln -sf pydoc3 "$ul/bin/pydoc"
  chroot "$root" ldconfig
  # The host's extra CAs (see EXTRA_CA_DIR), and pip told to use the system bundle.
  local crts=()
  [ -d "$EXTRA_CA_DIR" ] && mapfile -t crts < <(find "$EXTRA_CA_DIR" -maxdepth 1 -name '*.crt' -type f | sort)
  if [ ${#crts[@]} -gt 0 ]; then
    cp "${crts[@]}" "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
  fi
  # Checks: every extension module's libraries resolve; the modules the brief names import.
  if chroot "$root" sh -c "ldd /usr/local/bin/python$PY_MINOR /usr/local/lib/python$PY_MINOR/lib-dynload/*.so" | grep 'not found'; then
    echo "unresolved shared libraries in the base image" >&2; return 1
  fi
  chroot "$root" /usr/local/bin/python -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline, uuid, decimal, hashlib, curses, dbm, zoneinfo; print("python ok", ssl.OPENSSL_VERSION)'
  chroot "$root" /usr/local/bin/pip --version
  chroot "$root" sh -c 'command -v useradd && command -v groupadd'
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/apt/* "$root"/var/log/dpkg.log
}

build_base() {
  local stage; stage=$(mktemp -d "$WORK/.stage-base.XXXX")
  command -v mmdebstrap >/dev/null || { echo "missing mmdebstrap (apt-get install mmdebstrap)" >&2; return 1; }
  [ -x "$PY_SRC/bin/python$PY_MINOR" ] || { echo "no CPython at $PY_SRC (pyenv install $PY_VERSION)" >&2; return 1; }
  local pkgs; pkgs=$(IFS=,; echo "${BASE_PACKAGES[*]}")
  { echo '#!/bin/bash'; echo 'set -euo pipefail'; declare -p PY_SRC PY_MINOR EXTRA_CA_DIR
    declare -f base_customize; echo 'base_customize "$1"'; } >"$stage/customize.sh"
  # merged-usr hook: merged /usr made by mmdebstrap itself, so usrmerge (and the perl it
  # pulls in, ~50 MB) is not installed; no recommends.
  mmdebstrap --mode=root --variant=minbase --format=tar --include="$pkgs" \
    --aptopt='Acquire::Languages "none"' --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --customize-hook="bash $stage/customize.sh \"\$1\"" \
    --skip=output/dev \
    "$SUITE" "$stage/rootfs.tar" "$APT_SOURCES"
  local c; c=$(bh from scratch)
  bh add "$c" "$stage/rootfs.tar" /
  local m; m=$(bh mount "$c"); mkdir -p -m 0755 "$m/dev"; bh umount "$c" # empty, as in any image
  bh config --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --env PYTHON_VERSION="$PY_VERSION" --cmd '["python3"]' \
    --label org.opencontainers.image.title=cowork-gym-python-base \
    --label org.opencontainers.image.description="Debian $SUITE (mmdebstrap minbase) + CPython $PY_VERSION in /usr/local" \
    --label io.cowork-gym.testbed.key="$1" "$c"
  bh commit --rm --format docker "$c" "$BASE_REF"
  rm -rf "$stage"
}

# ---------------------------------------------------------------------------- project images
# The build context of image $1: the working tree's files (tracked + untracked, not
# gitignored) that its Dockerfile.dockerignore lets through. Prints "key<TAB>path" lines:
# key = sha256 over the paths, exec bits and contents; then one path per line.
context_files() {
  "$PY" - "$REPO" "$REPO/sandbox-images/$1/Dockerfile.dockerignore" <<'PY'
import hashlib, os, re, subprocess, sys
repo, ignorefile = sys.argv[1], sys.argv[2]
def rx(p):
    p = p.strip().strip("/")
    out, i = "", 0
    while i < len(p):
        if p.startswith("**/", i): out, i = out + "(?:.*/)?", i + 3
        elif p.startswith("**", i): out, i = out + ".*", i + 2
        elif p[i] == "*": out, i = out + "[^/]*", i + 1
        elif p[i] == "?": out, i = out + "[^/]", i + 1
        else: out, i = out + re.escape(p[i]), i + 1
    return re.compile(out + r"\Z")
rules = []
for line in open(ignorefile, encoding="utf-8"):
    line = line.strip()
    if not line or line.startswith("#"): continue
    neg = line.startswith("!")
    rules.append((neg, rx(line[1:] if neg else line)))
def excluded(path):
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    out = False
    for neg, r in rules:  # Docker's rule: the last pattern matching the path or a parent wins
        if any(r.match(p) for p in prefixes): out = not neg
    return out
files = subprocess.run(["git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       check=True, capture_output=True).stdout.decode().split("\0")
keep = sorted(f for f in files if f and os.path.isfile(os.path.join(repo, f)) and not excluded(f))
h = hashlib.sha256()
for f in keep:
    full = os.path.join(repo, f)
    h.update(f.encode() + b"\0" + (b"x" if os.access(full, os.X_OK) else b"-") + b"\0")
    h.update(hashlib.sha256(open(full, "rb").read()).digest())
print(h.hexdigest())
print("\n".join(keep))
PY
}

build_project() { # build_project NAME REF KEY
  local name=$1 ref=$2 ctx=$WORK/context-$1
  rm -rf "$ctx"; mkdir -p "$ctx/sandbox-images/$name"
  tail -n +2 "$WORK/$name.files" | (cd "$REPO" && tar -c --no-recursion -T -) | tar -C "$ctx" -x
  cp "$REPO/sandbox-images/$name/Dockerfile" "$REPO/sandbox-images/$name/Dockerfile.dockerignore" "$ctx/sandbox-images/$name/"
  echo "context: $(tail -n +2 "$WORK/$name.files" | wc -l) files, $(du -sh "$ctx" | cut -f1)"
  bh bud --isolation chroot --pull=never --format docker \
    --ignorefile "$ctx/sandbox-images/$name/Dockerfile.dockerignore" \
    -f "$ctx/sandbox-images/$name/Dockerfile" \
    --build-arg PYTHON_IMAGE="$BASE_REF" \
    --label io.cowork-gym.testbed.key="$3" \
    -t "$ref" "$ctx"
  export_archive "$ref" "$name.tar"
  bh rmi --prune || true # the previous build, now untagged
  rm -rf "$ctx"
}

# ---------------------------------------------------------------------------- main
stamp_ok() { [ -f "$WORK/$1.key" ] && [ "$(cat "$WORK/$1.key")" = "$2" ]; }

do_pause() {
  local key t=$SECONDS
  key=$(printf 'recipe=%s\n%s\n' "$RECIPE" "$(sha256sum <"$REPO/testbed/images/pause.c")" | sha256sum | cut -c1-64)
  if stamp_ok pause "$key" && [ -f "$OUT/pause.tar" ]; then log "pause: cached ($OUT/pause.tar, $((SECONDS - t))s)"; return 0; fi
  cleanup_storage
  step pause build_pause "$key"
  echo "$key" >"$WORK/pause.key"
}

do_base() {
  local key t=$SECONDS
  key=$( { echo "recipe=$RECIPE suite=$SUITE python=$PY_VERSION"; echo "${BASE_PACKAGES[*]}"; sha256sum "$APT_SOURCES" | cut -c1-64
           [ -d "$EXTRA_CA_DIR" ] && find "$EXTRA_CA_DIR" -maxdepth 1 -name '*.crt' -type f -exec sha256sum {} + | sort; true; } | sha256sum | cut -c1-64)
  if stamp_ok base "$key" && [ -n "$(image_id "$BASE_REF")" ]; then log "python-base: cached ($BASE_REF, $((SECONDS - t))s)"; return 0; fi
  cleanup_storage
  step python-base build_base "$key"
  echo "$key" >"$WORK/base.key"
}

do_project() { # do_project NAME REF
  local name=$1 ref=$2 key base_id t=$SECONDS
  base_id=$(image_id "$BASE_REF") || die "$name: no $BASE_REF in the build storage"
  context_files "$name" >"$WORK/$name.files"
  key=$( { echo "recipe=$RECIPE base=$base_id"; head -1 "$WORK/$name.files"
           sha256sum <"$REPO/sandbox-images/$name/Dockerfile"; sha256sum <"$REPO/sandbox-images/$name/Dockerfile.dockerignore"; } | sha256sum | cut -c1-64)
  if stamp_ok "$name" "$key" && [ -f "$OUT/$name.tar" ]; then log "$name: cached ($OUT/$name.tar, $((SECONDS - t))s)"; return 0; fi
  cleanup_storage
  step "$name" build_project "$name" "$ref" "$key"
  echo "$key" >"$WORK/$name.key"
}

# images.json: every archive present, with the image id (config digest) read from it.
write_index() {
  "$PY" - "$OUT" <<'PY'
import hashlib, json, os, sys, tarfile
out = sys.argv[1]
index = {}
for name in ("pause.tar", "role-sandbox.tar", "operator.tar", "ray-testbed.tar"):
    path = os.path.join(out, name)
    if not os.path.isfile(path):
        continue
    with tarfile.open(path) as tar:
        (entry,) = json.load(tar.extractfile("manifest.json"))
        config = tar.extractfile(entry["Config"]).read()
    for ref in entry.get("RepoTags") or []:
        index[ref] = {"archive": name, "id": "sha256:" + hashlib.sha256(config).hexdigest(),
                      "size": os.path.getsize(path)}
tmp = os.path.join(out, ".images.json.tmp")
with open(tmp, "w", encoding="utf-8") as f:
    json.dump(index, f, indent=2, sort_keys=True)
    f.write("\n")
os.replace(tmp, os.path.join(out, "images.json"))
PY
}

want=("$@"); [ ${#want[@]} -eq 0 ] && want=(pause base role operator ray)
t_all=$SECONDS
log "cache: $OUT (buildah storage driver: $DRIVER)"
base_done=
need_base() { [ -n "$base_done" ] || { do_base; base_done=1; }; }
for s in "${want[@]}"; do
  case $s in
    pause) do_pause ;;
    base) need_base ;;
    role|role-sandbox) need_base; do_project role-sandbox "$ROLE_REF" ;;
    operator) need_base; do_project operator "$OPERATOR_REF" ;;
    ray|ray-testbed) need_base; do_project ray-testbed "$RAY_TESTBED_REF" ;;
    *) die "unknown step: $s (known: pause base role operator ray)" ;;
  esac
done
write_index
log "done in $((SECONDS - t_all))s: $(cd "$OUT" && ls -s --block-size=M ./*.tar 2>/dev/null | tr '\n' ' ')"
