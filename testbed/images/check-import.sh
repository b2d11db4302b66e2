#!/usr/bin/env bash
# Prove that the archives testbed/build-images.sh wrote import into containerd and run:
# starts a throwaway containerd (its own root, state and socket under a temp dir; CRI off),
# imports every archive named in images.json into the k8s.io namespace, lists the images,
# runs each image's checks with `ctr run`, then stops that containerd (its PID only) and
# removes its directories. Needs root, containerd 1.6+, ctr, runc.
#
#   testbed/images/check-import.sh            # the archives under the test-bed cache
#   testbed/images/check-import.sh DIR        # another images dir
set -euo pipefail

IMAGES=${1:-${COWORKGYM_TESTBED_CACHE:-$HOME/.cache/cowork-gym/testbed}/images}
[ -f "$IMAGES/images.json" ] || { echo "no $IMAGES/images.json (run testbed/build-images.sh)" >&2; exit 1; }

log() { printf '[check-import] %s\n' "$*" >&2; }
D=$(mktemp -d /tmp/ctd-probe.XXXX)
SOCK=$D/c.sock
CTD_PID=
cleanup() {
  local rc=$?
  if [ -n "$CTD_PID" ] && kill -0 "$CTD_PID" 2>/dev/null; then
    kill -TERM "$CTD_PID"
    for _ in $(seq 50); do kill -0 "$CTD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$CTD_PID" 2>/dev/null && kill -KILL "$CTD_PID"
  fi
  # Whatever is still mounted below the probe dir (snapshots, shim state), deepest first.
  awk -v d="$D" '$2 ~ "^"d {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf "$D"
  log "containerd stopped, $D removed (rc=$rc)"
}
trap cleanup EXIT

cat >"$D/config.toml" <<EOF
version = 2
root = "$D/root"
state = "$D/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/opt"
EOF
containerd --config "$D/config.toml" --root "$D/root" --state "$D/state" --address "$SOCK" \
  >"$D/containerd.log" 2>&1 &
CTD_PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
ctr() { command ctr --address "$SOCK" -n k8s.io "$@"; }
ctr version >/dev/null || { cat "$D/containerd.log" >&2; exit 1; }
log "containerd $CTD_PID on $SOCK"

mapfile -t rows < <(python3 -c 'import json,sys
for ref, v in json.load(open(sys.argv[1])).items(): print(ref, v["archive"], v["id"])' "$IMAGES/images.json")
for row in "${rows[@]}"; do
  read -r ref archive id <<<"$row"
  t=$SECONDS
  ctr images import "$IMAGES/$archive"
  log "imported $archive in $((SECONDS - t))s"
done
ctr images ls
fail=0
for row in "${rows[@]}"; do
  read -r ref archive id <<<"$row"
  ctr images ls -q | grep -qxF "$ref" || { log "FAIL: $ref not listed after importing $archive"; fail=1; }
done

run() { # run NAME IMAGE CMD...: ctr run --rm, read-only root, tmpfs /tmp (as the Jobs run)
  local name=$1 image=$2; shift 2
  log "run $name: $*"
  if ctr run --rm --read-only --mount type=tmpfs,src=tmpfs,dst=/tmp,options=rw:nosuid:nodev:mode=1777 \
      "$image" "probe-$name" "$@"; then log "ok: $name"; else log "FAIL: $name"; fail=1; fi
}
has() { printf '%s\n' "${rows[@]}" | grep -q "^$1 "; }

if has localhost/cowork-gym/role-sandbox:dev; then
  R=localhost/cowork-gym/role-sandbox:dev
  run role-import "$R" python -c "import coworkgym, openpyxl, docx, os; print('ok uid', os.getuid())"
  run role-smoke "$R" cowork-gym-smoke
fi
if has localhost/cowork-gym/operator:dev; then
  O=localhost/cowork-gym/operator:dev
  run operator-import "$O" python -c "import coworkgym_operator, kopf, os; print('ok uid', os.getuid())"
  run operator-smoke "$O" cowork-gym-smoke
fi
if has localhost/pause:v1; then
  # The pause process must sleep until SIGTERM and then exit 0.
  ctr run --rm localhost/pause:v1 probe-pause &
  pid=$!
  for _ in $(seq 50); do ctr task ls -q 2>/dev/null | grep -qx probe-pause && break; sleep 0.1; done
  sleep 1
  if kill -0 "$pid" 2>/dev/null; then
    ctr task kill -s SIGTERM probe-pause
    if wait "$pid"; then log "ok: pause exits 0 on SIGTERM"; else log "FAIL: pause exited $?"; fail=1; fi
  else
    wait "$pid" || true; log "FAIL: pause did not keep running"; fail=1
  fi
fi
[ $fail = 0 ] && log "PASS" || log "FAILED"
exit $fail
