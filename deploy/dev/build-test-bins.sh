#!/usr/bin/env bash
# Builds the upstream test peers (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# Jaeger, kustomize, helm, the CSI sidecars and csi-sanity, and the real node's kubelet, kube-proxy
# and containerd) from their Go modules into a cache outside the repo, once per version. Go is
# only a build tool here.
#
#   deploy/dev/build-test-bins.sh          # prints the bin directory on success
#
# Env: LVMS_K8S_VERSION (v1.36.3), LVMS_ETCD_VERSION (v3.6.16), LVMS_JAEGER_VERSION (v1.76.0,
# the module version of Jaeger v2.13.0), LVMS_KUSTOMIZE_VERSION (v5.8.0),
# LVMS_HELM_VERSION (v3.19.0), the CSI peers LVMS_PROVISIONER_VERSION (v6.4.0),
# LVMS_RESIZER_VERSION (v2.3.0), LVMS_SNAPSHOTTER_VERSION (v8.6.0: csi-snapshotter,
# snapshot-controller and its CRDs), LVMS_CSI_SANITY_VERSION (v5.4.0), LVMS_CONTAINERD_VERSION (v2.4.2), LVMS_TEST_BINS_CACHE (~/.cache/lvms-test-bins).
# The node's binaries (kubelet, kube-proxy from the same Kubernetes module as the API server;
# containerd, its runc shim, ctr) land in $CACHE/node-k8s-<v>-containerd-<v>/bin. Exits non-zero
# with the fix when Go is missing or a build fails.
set -euo pipefail

K8S=${LVMS_K8S_VERSION:-v1.36.3}
ETCD=${LVMS_ETCD_VERSION:-v3.6.16}
CACHE=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}
DIR=$CACHE/k8s-$K8S-etcd-$ETCD
BIN=$DIR/bin
JAEGER=${LVMS_JAEGER_VERSION:-v1.76.0}
JDIR=$CACHE/jaeger-$JAEGER
KUSTOMIZE=${LVMS_KUSTOMIZE_VERSION:-v5.8.0}
KDIR=$CACHE/kustomize-$KUSTOMIZE
HELM=${LVMS_HELM_VERSION:-v3.19.0}
HDIR=$CACHE/helm-$HELM
PROVISIONER=${LVMS_PROVISIONER_VERSION:-v6.4.0}
RESIZER=${LVMS_RESIZER_VERSION:-v2.3.0}
SNAPSHOTTER=${LVMS_SNAPSHOTTER_VERSION:-v8.6.0}
SANITY=${LVMS_CSI_SANITY_VERSION:-v5.4.0}
CSIDIR=$CACHE/csi-provisioner-$PROVISIONER-resizer-$RESIZER-snapshotter-$SNAPSHOTTER-sanity-$SANITY
CONTAINERD=${LVMS_CONTAINERD_VERSION:-v2.4.2}
NODEDIR=$CACHE/node-k8s-$K8S-containerd-$CONTAINERD

die() { echo "build-test-bins: $*" >&2; exit 1; }
command -v go >/dev/null || die "no Go toolchain on PATH: install Go >= 1.26 (apt-get install golang-go is too old; use the machine's Go) and rerun"
command -v python3 >/dev/null || die "python3 is needed to read the kubernetes go.mod: apt-get install -y python3"

csi_ready() {
  for b in csi-provisioner csi-resizer csi-snapshotter snapshot-controller csi-sanity; do
    [ -x "$CSIDIR/bin/$b" ] || return 1
  done
  [ -d "$CSIDIR/crds" ]
}
node_ready() {
  for b in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr; do
    [ -x "$NODEDIR/bin/$b" ] || return 1
  done
}
all_ready() {
  [ -x "$BIN/etcd" ] && [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/kube-scheduler" ] && [ -x "$JDIR/bin/jaeger" ] && [ -x "$KDIR/bin/kustomize" ] && [ -x "$HDIR/bin/helm" ] && csi_ready && node_ready
}
if all_ready; then
  echo "$BIN"; exit 0
fi
# One build per cache at a time: a second caller (a test binary, `make demo`, another checkout's
# CI) waits for the first and then finds the peers built. Two builds into the same directories
# once removed each other's jaeger.tmp.
command -v flock >/dev/null || die "flock is missing: apt-get install -y util-linux"
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  echo "build-test-bins: another build holds $CACHE/.build.lock; waiting for it" >&2
  flock 9
fi
# Whoever held the lock may have built everything meanwhile.
if all_ready; then
  echo "$BIN"; exit 0
fi

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$BIN" "$DIR/etcd" "$DIR/k8s"
log=$DIR/build.log
: >"$log"

if [ ! -x "$BIN/etcd" ]; then
  echo "build-test-bins: building etcd $ETCD (log: $log)" >&2
  (
    cd "$DIR/etcd"
    [ -f go.mod ] || go mod init local/lvms-etcd-bin
    go get -tool "go.etcd.io/etcd/server/v3@$ETCD"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$BIN/etcd.tmp" "$BIN/etcd"
  ) >>"$log" 2>&1 || die "etcd build failed; last lines of $log:
$(tail -20 "$log")"
fi

# One Kubernetes module for the control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler) and the real node (kubelet, kube-proxy): the same version everywhere.
if [ ! -x "$BIN/kube-apiserver" ] || [ ! -x "$BIN/kube-controller-manager" ] || [ ! -x "$BIN/kube-scheduler" ] \
  || [ ! -x "$NODEDIR/bin/kubelet" ] || [ ! -x "$NODEDIR/bin/kube-proxy" ]; then
  echo "build-test-bins: building kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy $K8S (log: $log)" >&2
  mkdir -p "$NODEDIR/bin"
  (
    cd "$DIR/k8s"
    STG=v0.${K8S#v1.}
    MINOR=$(cut -d. -f2 <<<"$K8S")
    [ -f go.mod ] || go mod init local/lvms-k8s-bins
    GOMOD=$(go mod download -json "k8s.io/kubernetes@$K8S" | python3 -c 'import sys,json;print(json.load(sys.stdin)["GoMod"])')
    go mod edit -require="k8s.io/kubernetes@$K8S"
    # Staging modules are replaced by ./staging in k/k; point each at its tagged v0.Y.Z instead.
    go mod edit -json "$GOMOD" | python3 -c 'import sys,json
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./staging/"): print(r["Old"]["Path"])' |
      while read -r m; do go mod edit -replace="$m=$m@$STG"; done
    cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
    go get -tool "${cmds[@]/#/k8s.io/kubernetes/cmd/}"
    V=k8s.io/component-base/version
    go build -p 2 -trimpath -o "$DIR/k8s/out/" \
      -ldflags "-s -w -X $V.gitVersion=$K8S -X $V.gitMajor=1 -X $V.gitMinor=$MINOR -X $V.gitTreeState=clean" \
      "${cmds[@]/#/k8s.io/kubernetes/cmd/}"
    mv "$DIR/k8s/out/kube-apiserver" "$DIR/k8s/out/kube-controller-manager" "$DIR/k8s/out/kube-scheduler" "$BIN/"
    mv "$DIR/k8s/out/kubelet" "$DIR/k8s/out/kube-proxy" "$NODEDIR/bin/"
  ) >>"$log" 2>&1 || die "kubernetes build failed; last lines of $log:
$(tail -20 "$log")"
fi
# containerd 2.x (Kubernetes 1.36 needs it), its runc shim and ctr; static, without the
# snapshotters that need cgo.
if ! [ -x "$NODEDIR/bin/containerd" ] || ! [ -x "$NODEDIR/bin/containerd-shim-runc-v2" ] || ! [ -x "$NODEDIR/bin/ctr" ]; then
  mkdir -p "$NODEDIR/containerd" "$NODEDIR/bin"
  nlog=$NODEDIR/build.log
  : >"$nlog"
  echo "build-test-bins: building containerd $CONTAINERD (log: $nlog)" >&2
  (
    cd "$NODEDIR/containerd"
    [ -f go.mod ] || go mod init local/lvms-containerd-bin
    c=github.com/containerd/containerd/v2/cmd
    go get -tool "$c/containerd@$CONTAINERD" "$c/containerd-shim-runc-v2@$CONTAINERD" "$c/ctr@$CONTAINERD"
    go build -p 2 -trimpath -tags "no_btrfs no_zfs no_devmapper no_aufs" -ldflags "-s -w" \
      -o "$NODEDIR/containerd/out/" "$c/containerd" "$c/containerd-shim-runc-v2" "$c/ctr"
    mv "$NODEDIR/containerd/out/"* "$NODEDIR/bin/"
  ) >>"$nlog" 2>&1 || die "containerd build failed; last lines of $nlog:
$(tail -20 "$nlog")"
fi
if [ ! -x "$JDIR/bin/jaeger" ]; then
  mkdir -p "$JDIR/bin"
  jlog=$JDIR/build.log
  : >"$jlog"
  echo "build-test-bins: building jaeger $JAEGER (log: $jlog)" >&2
  (
    cd "$JDIR"
    # The v2 tags are not served under this module path; v1.76.0 is v2.13.0. sum.golang.org
    # answers 404 for some of its OpenTelemetry collector modules, so those two prefixes are
    # taken from the proxy without the checksum database.
    export GONOSUMDB=go.opentelemetry.io/collector,github.com/open-telemetry/opentelemetry-collector-contrib
    [ -f go.mod ] || go mod init local/lvms-jaeger-bin
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER"
    # Jaeger's own go.mod pins sarama by a replace, which a dependency's go.mod cannot carry.
    go mod edit -replace=github.com/Shopify/sarama=github.com/Shopify/sarama@v1.33.0
    go build -p 2 -trimpath -ldflags "-s -w" -o "$JDIR/bin/jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
    mv "$JDIR/bin/jaeger.tmp" "$JDIR/bin/jaeger"
  ) >>"$jlog" 2>&1 || die "jaeger build failed; last lines of $jlog:
$(tail -20 "$jlog")"
fi
# Tools whose module has no replace lines: a plain `go install` into <dir>/bin.
go_install() { # name dir module@version
  local name=$1 dir=$2 pkg=$3
  [ -x "$dir/bin/$name" ] && return 0
  mkdir -p "$dir/bin"
  echo "build-test-bins: building $pkg" >&2
  GOBIN=$dir/bin go install -trimpath -ldflags "-s -w" "$pkg" >"$dir/build.log" 2>&1 ||
    die "$name build failed; last lines of $dir/build.log:
$(tail -20 "$dir/build.log")"
}
# kustomize v5.8.1+ needs go >= 1.27.
go_install kustomize "$KDIR" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE"
go_install helm "$HDIR" "helm.sh/helm/v3/cmd/helm@$HELM"

# A module whose go.mod carries replace lines (a dependency's go.mod cannot): a wrapper
# module requires it and copies them; a replace into its own tree (./client) becomes that
# submodule's tag of the same version (as for the Kubernetes staging modules above).
build_replaced() { # dir module version pkg...
  local dir=$1 mod=$2 ver=$3
  shift 3
  (
    cd "$dir"
    [ -f go.mod ] || go mod init "local/lvms-$(basename "$mod")-bin"
    local gomod
    gomod=$(go mod download -json "$mod@$ver" | python3 -c 'import sys,json;print(json.load(sys.stdin)["GoMod"])')
    go mod edit -require="$mod@$ver"
    go mod edit -json "$gomod" | python3 -c 'import sys,json
for r in json.load(sys.stdin).get("Replace") or []:
    n, o = r["New"], r["Old"]["Path"]
    old = o + ("@" + r["Old"]["Version"] if r["Old"].get("Version") else "")
    print(old + "=" + (o + "@" + sys.argv[1] if n["Path"].startswith(".") else n["Path"] + "@" + n["Version"]))' "$ver" |
      while read -r rep; do go mod edit -replace="$rep"; done
    local pkgs=() p
    for p in "$@"; do pkgs+=("$mod/$p"); done
    go get -tool "${pkgs[@]/%/@$ver}"
    go build -p 2 -trimpath -ldflags "-s -w" -o "$dir/out/" "${pkgs[@]}"
  )
}
if ! csi_ready; then
  mkdir -p "$CSIDIR/bin" "$CSIDIR/provisioner" "$CSIDIR/resizer" "$CSIDIR/snapshotter" "$CSIDIR/sanity"
  clog=$CSIDIR/build.log
  : >"$clog"
  echo "build-test-bins: building csi-provisioner $PROVISIONER, csi-resizer $RESIZER, external-snapshotter $SNAPSHOTTER, csi-sanity $SANITY (log: $clog)" >&2
  {
    build_replaced "$CSIDIR/provisioner" github.com/kubernetes-csi/external-provisioner/v6 "$PROVISIONER" cmd/csi-provisioner &&
      build_replaced "$CSIDIR/resizer" github.com/kubernetes-csi/external-resizer/v2 "$RESIZER" cmd/csi-resizer &&
      build_replaced "$CSIDIR/snapshotter" github.com/kubernetes-csi/external-snapshotter/v8 "$SNAPSHOTTER" cmd/csi-snapshotter cmd/snapshot-controller &&
      build_replaced "$CSIDIR/sanity" github.com/kubernetes-csi/csi-test/v5 "$SANITY" cmd/csi-sanity &&
      for d in provisioner resizer snapshotter sanity; do cp -f "$CSIDIR/$d/out/"* "$CSIDIR/bin/"; done &&
      # The snapshot CRDs as that release ships them (config/crd of its client module).
      src=$(cd "$CSIDIR/snapshotter" && go mod download -json "github.com/kubernetes-csi/external-snapshotter/client/v8@$SNAPSHOTTER" | python3 -c 'import sys,json;print(json.load(sys.stdin)["Dir"])') &&
      mkdir -p "$CSIDIR/crds.tmp" && cp "$src"/config/crd/*.yaml "$CSIDIR/crds.tmp/" &&
      rm -f "$CSIDIR/crds.tmp/kustomization.yaml" && mv "$CSIDIR/crds.tmp" "$CSIDIR/crds"
  } >>"$clog" 2>&1 || die "CSI peers build failed; last lines of $clog:
$(tail -20 "$clog")"
fi
echo "$BIN"
