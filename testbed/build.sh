#!/usr/bin/env bash
# Build the test-bed's binaries from published Go modules (no Docker, no downloads
# besides the Go module proxy). Each component is cached outside the repository,
# keyed by its version, and rebuilt only when missing.
#
#   testbed/build.sh            # what the test-bed runs today (DEFAULT below)
#   testbed/build.sh etcd helm  # only some components
#
# Cache: ${COWORKGYM_TESTBED_CACHE:-$HOME/.cache/cowork-gym/testbed}/<component>-<version>/
set -euo pipefail

# Versions live in coworkgym_testbed/versions.env (the Python side finds binaries by them);
# an environment variable of the same name wins.
while IFS='=' read -r key value; do
  if [[ $key =~ ^[A-Z0-9_]+$ ]] && [ -z "${!key:-}" ]; then export "$key=$value"; fi
done < "$(dirname "$0")/coworkgym_testbed/versions.env"
CACHE=${COWORKGYM_TESTBED_CACHE:-$HOME/.cache/cowork-gym/testbed}

export GOTOOLCHAIN=local GOFLAGS=-mod=mod
export CGO_ENABLED=${CGO_ENABLED:-0}

log() { printf '[testbed-build] %s\n' "$*" >&2; }

# Run "$2..." only if $1/bin is missing; time it; move the result into place atomically.
build_once() {
  local name=$1; shift
  local dest=$CACHE/$name
  if [ -f "$dest/.complete" ]; then log "$name: cached at $dest"; return 0; fi
  local stage; stage=$(mktemp -d "$CACHE/.stage-$name.XXXX")
  local start=$SECONDS
  log "$name: building..."
  ( "$@" "$stage/bin" ) > "$CACHE/$name.build.log" 2>&1 || {
    log "$name: FAILED after $((SECONDS - start))s; see $CACHE/$name.build.log"; tail -30 "$CACHE/$name.build.log" >&2; rm -rf "$stage"; return 1; }
  rm -rf "$dest"; mv "$stage" "$dest"; touch "$dest/.complete"
  log "$name: built in $((SECONDS - start))s -> $dest/bin"
}

wrapper() { local w; w=$(mktemp -d); cd "$w"; go mod init "local/$1" >/dev/null 2>&1; }

# Go ignores a dependency's own `replace` lines; copy the single-line, non-local ones of
# module $1@$2 into the wrapper (e.g. seaweedfs swaps go-bip39 for a fork).
copy_replaces() {
  local gomod line
  gomod=$(go mod download -json "$1@$2" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  while read -r line; do
    go mod edit -replace "$(echo "$line" | sed -E 's/^replace +([^ ]+)( [^ ]+)? => ([^ ]+) ([^ ]+)$/\1=\3@\4/')"
  done < <(grep -E '^replace +[^ ]+( [^ ]+)? => [^ .][^ ]* [^ ]+$' "$gomod" || true)
}

k8s_ldflags() {
  local minor; minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  local f="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f="$f -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    f="$f -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  echo "$f"
}

# k8s.io/kubernetes requires its staging modules at v0.0.0; replace each with its
# published v0.MINOR.PATCH, reading the list from the module's own go.mod.
k8s_wrapper() {
  wrapper k8s-testbed-bins
  local kmod staging m kv
  kmod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  staging=v0.${K8S_VERSION#1.}
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$kmod"); do
    go mod edit -replace "$m=$m@$staging"
  done
  for kv in $(sed -n 's/^godebug \(.*\)$/\1/p' "$kmod"); do go mod edit -godebug "$kv"; done
  go get "k8s.io/kubernetes@v$K8S_VERSION"
}

# One `go build` for every Kubernetes binary: with the same flags (no cgo) the packages they
# share compile once. The kubelet once had a build of its own with cgo, which compiled most of
# k8s.io/kubernetes a second time (6.5 of a cold run's 47 min of Go); without cgo it uses Go's
# own resolver and /etc/passwd reader, which is all the test-bed's node asks of it.
build_k8s() {
  k8s_wrapper
  go build -trimpath -tags selinux,notest -ldflags "$(k8s_ldflags)" -o "$1/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
  "$1/kube-apiserver" --version
  "$1/kubelet" --version
}

build_etcd() {
  wrapper etcd-bin
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3
  "$1/etcd" --version
}

build_helm() {
  wrapper helm-bin
  go get "helm.sh/helm/v3@v$HELM_VERSION"
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
    -o "$1/helm" helm.sh/helm/v3/cmd/helm
  "$1/helm" version
}

build_kubeconform() {
  wrapper kubeconform-bin
  go get "github.com/yannh/kubeconform@v$KUBECONFORM_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$1/kubeconform" github.com/yannh/kubeconform/cmd/kubeconform
  "$1/kubeconform" -v
}

build_seaweedfs() {
  wrapper seaweedfs-bin
  copy_replaces github.com/seaweedfs/seaweedfs "$SEAWEEDFS_VERSION"
  go get "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$1/weed" github.com/seaweedfs/seaweedfs/weed
  "$1/weed" version
}

# kube-router, firewall only (NetworkPolicy enforcement for the test-bed node). Its own go.mod
# picks its k8s.io/* (client-go) version; v2.1.0 is the newest the module proxy serves.
# Its v2.1.0 dependencies have known flaws (x/net HTTP/2, protobuf); here it listens on
# nothing but loopback metrics and talks only to the test-bed's API server.
build_kube_router() {
  wrapper kube-router-bin
  copy_replaces github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION"
  go get "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION"
  go build -trimpath -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -o "$1/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  "$1/kube-router" --version
}

# The KubeRay operator (RayCluster/RayJob/RayService controllers) and its CRDs, which the
# module zip carries under config/crd/bases. Its own go.mod picks its client-go (v0.34), so its
# packages compile apart from Kubernetes'; the Go build cache is the shared default one.
build_kuberay() {
  wrapper kuberay-bin
  copy_replaces github.com/ray-project/kuberay/ray-operator "$KUBERAY_VERSION"
  go get "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$1/kuberay-operator" github.com/ray-project/kuberay/ray-operator
  local src; src=$(go list -m -f '{{.Dir}}' github.com/ray-project/kuberay/ray-operator)
  mkdir -p "$1/../crds"
  cp "$src"/config/crd/bases/ray.io_*.yaml "$1/../crds/"
  chmod 0644 "$1"/../crds/*.yaml
  "$1/kuberay-operator" --help 2>&1 | grep -q use-kubernetes-proxy
  ls "$1/../crds"
}

# CoreDNS, the node's cluster DNS, with only the plugins a node's pods need: the module's own
# main pulls in every plugin (cloud DNS providers and their SDKs among them), so a main of
# ours picks them and the order they handle a query in (CoreDNS's own order).
build_coredns() {
  wrapper coredns-bin
  cat > main.go <<'GO'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	dnsserver.Directives = []string{
		"bind", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache",
		"template", "kubernetes",
	}
}

func main() { coremain.Run() }
GO
  copy_replaces github.com/coredns/coredns "$COREDNS_VERSION"
  go get "github.com/coredns/coredns@$COREDNS_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$1/coredns" .
  "$1/coredns" -version
}

ALL=(etcd k8s kube-router coredns helm kubeconform seaweedfs kuberay)
# KubeRay serves only the opt-in KubeRay e2e (COWORKGYM_TESTBED_KUBERAY=1; tests/run.sh then asks
# for it): not built by default, 3 min of a cold run saved.
DEFAULT=(etcd k8s kube-router coredns helm kubeconform seaweedfs)
mkdir -p "$CACHE"
# One build at a time: a second build.sh (the test runner's, while .ci/run's runs) waits here
# and then finds everything cached.
exec 9>"$CACHE/.build.lock"
flock 9
rm -rf "$CACHE"/.stage-* # left by an interrupted build
want=("$@"); [ ${#want[@]} -eq 0 ] && want=("${DEFAULT[@]}")
rc=0
for c in "${want[@]}"; do
  case $c in
    etcd)        build_once "etcd-$ETCD_VERSION" build_etcd || rc=1 ;;
    k8s|kubelet) build_once "kubernetes-$K8S_VERSION-all" build_k8s || rc=1 ;;
    coredns)     build_once "coredns-$COREDNS_VERSION" build_coredns || rc=1 ;;
    helm)        build_once "helm-$HELM_VERSION" build_helm || rc=1 ;;
    kubeconform) build_once "kubeconform-$KUBECONFORM_VERSION" build_kubeconform || rc=1 ;;
    seaweedfs)   build_once "seaweedfs-$SEAWEEDFS_VERSION" build_seaweedfs || rc=1 ;;
    kube-router) build_once "kube-router-$KUBE_ROUTER_VERSION" build_kube_router || rc=1 ;;
    kuberay)     build_once "kuberay-$KUBERAY_VERSION" build_kuberay || rc=1 ;;
    *) log "unknown component: $c (known: ${ALL[*]})"; exit 2 ;;
  esac
done
exit $rc
