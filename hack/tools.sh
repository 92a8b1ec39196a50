#!/usr/bin/env bash
# Builds, at pinned versions, every tool enipam's tests, demo and lint need,
# from source through the Go module proxy (nothing is downloaded from
# anywhere else):
#
#   bin/k8s/<version>/{kube-apiserver,kube-scheduler,kube-controller-manager,kubectl,etcd}
#   bin/helm, bin/controller-gen, bin/staticcheck, bin/promtool
#
# A tool already present at the right version is skipped, so a rerun takes
# well under two seconds. Long steps print a progress line every 30 s.
#
# Kubernetes and etcd refuse `go install pkg@version` because their go.mod
# files carry replace directives. The recipe: a throwaway wrapper module that
# requires the release and points each staging module at its published
# version, derived from the release's own go.mod.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${BIN_DIR:-$root/bin}

K8S_VERSION=${K8S_VERSION:-1.37.1}
ETCD_VERSION=${ETCD_VERSION:-3.7.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.23.0}
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}
# Prometheus's module versions are v0.<3-digit minor>.<patch> for its
# v3.<minor>.<patch> releases: v0.316.0 is Prometheus 3.16.0.
PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}

k8s_dir=$bin/k8s/$K8S_VERSION
work=$bin/.work
mkdir -p "$k8s_dir" "$work"

export CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false"

# step NAME CMD... runs CMD, printing its start, a line every 30 s while it
# runs, and its duration.
step() {
  local name=$1; shift
  local start=$SECONDS
  echo "==> $name"
  ( while sleep 30; do echo "    ... $name: $((SECONDS - start))s"; done ) &
  local ticker=$!
  # The module downloads are thousands of lines of noise; errors stay.
  set +e
  ( set -e; "$@" ) 2>&1 | grep -v '^go: downloading'
  local rc=${PIPESTATUS[0]}
  set -e
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "<== $name FAILED after $((SECONDS - start))s" >&2
    return "$rc"
  fi
  echo "<== $name done in $((SECONDS - start))s"
}

# has_version BINARY PATTERN ARGS... succeeds if BINARY exists and running it
# with ARGS prints PATTERN.
has_version() {
  local binary=$1 pattern=$2; shift 2
  [ -x "$binary" ] && "$binary" "$@" 2>/dev/null | grep -qF -- "$pattern"
}

# build_kubernetes CMD... builds the named commands of k8s.io/kubernetes.
build_kubernetes() {
  local mod=$work/kubernetes-$K8S_VERSION
  mkdir -p "$mod"
  if [ ! -f "$mod/go.mod" ]; then
    local upstream
    upstream=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    {
      echo "module enipam.local/k8s-tools"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes v$K8S_VERSION"
      echo
      # k8s.io/X => ./staging/src/k8s.io/X  becomes  k8s.io/X => k8s.io/X v0.<minor>.<patch>
      sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#replace \1 => \1 v0.'"${K8S_VERSION#*.}"'#p' "$upstream"
    } > "$mod/go.mod.tmp"
    mv "$mod/go.mod.tmp" "$mod/go.mod"
  fi
  local v=v$K8S_VERSION minor=${K8S_VERSION#*.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  local pkgs=()
  for cmd in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  (cd "$mod" && go build -trimpath -tags notest,grpcnotrace -ldflags "$ldflags" -o "$k8s_dir/" "${pkgs[@]}")
}

build_etcd() {
  local mod=$work/etcd-$ETCD_VERSION
  mkdir -p "$mod"
  cat > "$mod/go.mod" <<MOD
module enipam.local/etcd-tools

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v$ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v$ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v$ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v$ETCD_VERSION
)
MOD
  (cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$k8s_dir/etcd" go.etcd.io/etcd/server/v3)
}

# go_tool NAME PACKAGE VERSION installs PACKAGE@VERSION as bin/NAME-VERSION
# and points bin/NAME at it.
go_tool() {
  local name=$1 pkg=$2 version=$3 tags=${4:-}
  local target=$bin/$name-$version
  if [ ! -x "$target" ]; then
    local gobin=$work/gobin-$name-$version
    step "$name $version" env GOBIN="$gobin" GOFLAGS=-buildvcs=false go install -trimpath ${tags:+-tags "$tags"} "$pkg@$version"
    mv "$gobin/$name" "$target"
    rm -rf "$gobin"
  fi
  ln -sfn "$name-$version" "$bin/$name"
}

if has_version "$k8s_dir/kube-apiserver" "v$K8S_VERSION" --version &&
   has_version "$k8s_dir/kube-scheduler" "v$K8S_VERSION" --version &&
   has_version "$k8s_dir/kubectl" "v$K8S_VERSION" version --client; then
  :
else
  step "kube-apiserver, kube-scheduler, kubectl v$K8S_VERSION (first build takes ~8 min on 2 cores)" \
    build_kubernetes kube-apiserver kube-scheduler kubectl
fi
# The StatefulSet and garbage-collector controllers of the static-IP tests.
if ! has_version "$k8s_dir/kube-controller-manager" "v$K8S_VERSION" --version; then
  step "kube-controller-manager v$K8S_VERSION (~3 min more on 2 cores)" build_kubernetes kube-controller-manager
fi
if ! has_version "$k8s_dir/etcd" "etcd Version: $ETCD_VERSION" --version; then
  step "etcd v$ETCD_VERSION (~2 min on 2 cores)" build_etcd
fi
go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
go_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_TOOLS_VERSION"
go_tool staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION"
# The alert rules' unit tests (test/chart runs `promtool test rules`).
# remove_all_sd leaves out Prometheus' service discovery plugins (every
# cloud's SDK), which rule tests never use: most of promtool's build.
go_tool promtool github.com/prometheus/prometheus/cmd/promtool "$PROMTOOL_VERSION" remove_all_sd
