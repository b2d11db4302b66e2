#!/usr/bin/env bash
# Install what the test-bed and the core library need from Debian, then build the
# test-bed's Go binaries (cached; a warm run is a no-op). Idempotent.
#
#   testbed/ci-setup.sh                 # apt packages + every component
#   testbed/ci-setup.sh etcd k8s        # apt packages + only these components
#   COWORKGYM_SKIP_BUILD=1 testbed/ci-setup.sh   # apt packages only
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# prometheus: promtool (rule checks/tests). openssl: PKI debugging. The node: containerd, runc,
# the CNI plugins, iproute2, iptables and ipset (bridge, fence, kube-router's NetworkPolicies); buildah, mmdebstrap and umoci build
# its images without a Docker engine (testbed/build-images.sh). The rest are the core
# library's (sandboxing, passt's pasta for a Harbor task's compose services to reach the
# registries from their own network namespace, and office-document fixtures). podman with
# netavark and aardvark-dns runs Harbor's own runner on the real Harbor corpus
# (benchmarks/harbor_runner.py, tests/integration/test_harbor_runner.py).
PKGS=(prometheus openssl ca-certificates bubblewrap passt python3-openpyxl python3-docx python3-jsonschema python3-pytest
      containerd runc containernetworking-plugins iproute2 iptables ipset buildah mmdebstrap umoci
      podman netavark aardvark-dns)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[ci-setup] apt-get install ${missing[*]}" >&2
  # There is no init system here: stop postinst scripts from starting daemons
  # (prometheus would otherwise listen on :9090 on every interface). 101 = "action forbidden".
  # If a policy-rc.d already exists it is left alone.
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; own_policy=1
  fi
  trap 'if [ $own_policy = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi' EXIT
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "[ci-setup] apt packages present" >&2
fi
command -v promtool >/dev/null

if [ "${COWORKGYM_SKIP_BUILD:-0}" != 1 ]; then
  "$here/build.sh" "$@"
fi
