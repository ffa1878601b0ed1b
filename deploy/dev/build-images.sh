#!/usr/bin/env bash
# Builds lvms's container images without a registry or a container engine, as OCI archives
# containerd imports (`ctr -n k8s.io images import FILE`): the same content the Containerfile
# describes, from the same Debian packages, plus one image per upstream CSI sidecar the operator
# Deployment runs (from the Go-built binaries), a pause image and a small workload image.
#
#   deploy/dev/build-images.sh LVMS_BINARY OUT_DIR     # prints OUT_DIR
#
# OUT_DIR gets one FILE.tar per image and images.txt (name, file and manifest digest per line). Names: the chart's
# defaults with the tag `dev` (localhost/lvms:dev, localhost/csi-provisioner:dev, ...) and
# localhost/pause:dev, localhost/busybox:dev; with LVMS_GO_BIN (deploy/dev/build-lvms-go.sh) also
# LVMS's own operator as localhost/lvms-go:<LVMS_GO_TAG, v4.20.0>, for the swap tests. The Debian
# root of the lvms image is cached in $LVMS_TEST_BINS_CACHE (~/.cache/lvms-test-bins) by its package versions; the sidecars come from
# build-test-bins.sh. tests/images.rs holds this script and the Containerfile to the same
# packages and entrypoint.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}
die() { echo "build-images: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 LVMS_BINARY OUT_DIR"
LVMS_BIN=$1 OUT=$2
[ -x "$LVMS_BIN" ] || die "$LVMS_BIN is not an executable (cargo build --bin lvms)"
[ "$(id -u)" = 0 ] || die "mmdebstrap builds the image's Debian root as root: run as root"

# The image's Debian packages and entrypoint: the Containerfile's (tests/images.rs compares).
PACKAGES=(util-linux e2fsprogs xfsprogs lvm2 dmsetup thin-provisioning-tools ca-certificates)
ENTRYPOINT='["/usr/bin/lvms"]'
USER_ID=65532

for tool in mmdebstrap sha256sum tar; do
  command -v "$tool" >/dev/null || die "$tool is missing: apt-get install -y mmdebstrap coreutils tar"
done
bins=$("$HERE/build-test-bins.sh") || die "build-test-bins.sh failed"
K8S_DIR=$(dirname "$bins")
CACHE_ROOT=$(dirname "$K8S_DIR")
csi=$(find "$CACHE_ROOT" -maxdepth 1 -type d -name 'csi-provisioner-*' | sort | tail -1)
[ -x "$csi/bin/csi-provisioner" ] || die "no CSI sidecars under $CACHE_ROOT"

mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
versions=$(apt-cache policy "${PACKAGES[@]}" 2>/dev/null | awk '/^[^ ]/{p=$1} /Candidate:/{print p, $2}')
echo "$versions" | grep -q "(none)" && die "packages without a candidate: run apt-get update"
stamp=$( { echo "$versions"; echo "${PACKAGES[*]}"; } | sha256sum | cut -c1-16)
ROOTFS=$CACHE/image-root-$stamp.tar
if [ ! -f "$ROOTFS" ]; then
  echo "build-images: the lvms image's Debian root (${PACKAGES[*]}) into $ROOTFS" >&2
  # No docs, man pages or locales in an image.
  mmdebstrap --mode=root --format=tar --variant=essential --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$ROOTFS.tmp" "$mirror" >"$CACHE/image-root.log" 2>&1 \
    || die "mmdebstrap failed; last lines of $CACHE/image-root.log:
$(tail -20 "$CACHE/image-root.log")"
  mv "$ROOTFS.tmp" "$ROOTFS"
fi

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$OUT/images.txt"

# oci NAME ENTRYPOINT_JSON USER LAYER_TAR...: an OCI image layout with one uncompressed layer per
# tar (containerd unpacks it as it is: no gzip under software emulation), archived as NAME's file.
oci() {
  local name=$1 entry=$2 user=$3
  shift 3
  local file dir diffs="" layers="" first=1
  file=$(basename "${name%%:*}").tar
  dir=$work/${file%.tar}
  mkdir -p "$dir/blobs/sha256"
  for layer in "$@"; do
    local d size
    d=$(sha256sum "$layer" | cut -d' ' -f1)
    size=$(stat -c %s "$layer")
    cp "$layer" "$dir/blobs/sha256/$d"
    [ $first = 1 ] || { diffs+=","; layers+=","; }
    first=0
    diffs+="\"sha256:$d\""
    layers+="{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$d\",\"size\":$size}"
  done
  local config cd cs manifest md ms
  config="{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"User\":\"$user\",\"Entrypoint\":$entry,\"Env\":[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[$diffs]}}"
  printf '%s' "$config" >"$work/config"
  cd=$(sha256sum "$work/config" | cut -d' ' -f1); cs=$(stat -c %s "$work/config")
  cp "$work/config" "$dir/blobs/sha256/$cd"
  manifest="{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$cd\",\"size\":$cs},\"layers\":[$layers]}"
  printf '%s' "$manifest" >"$work/manifest"
  md=$(sha256sum "$work/manifest" | cut -d' ' -f1); ms=$(stat -c %s "$work/manifest")
  cp "$work/manifest" "$dir/blobs/sha256/$md"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "$ms" "$name" "${name##*:}" >"$dir/index.json"
  tar -C "$dir" -cf "$OUT/$file" oci-layout index.json blobs
  # The manifest's digest: a node imports a set again when any image of it changed.
  echo "$name $file sha256:$md" >>"$OUT/images.txt"
}

# A layer holding the given files, each as DEST=SOURCE (mode kept), plus /etc/passwd for `USER`.
files_layer() {
  local out=$1 root=$work/root-$RANDOM
  shift
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0::/root:/bin/sh\nnonroot:x:65532:65532::/home/nonroot:/bin/sh\n' >"$root/etc/passwd"
  for f in "$@"; do
    mkdir -p "$root$(dirname "${f%%=*}")"
    cp -L "${f#*=}" "$root${f%%=*}"
  done
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf "$out" .
}

# lvms: the Debian root, then the binary (stripped of its debug sections).
objcopy --strip-debug "$LVMS_BIN" "$work/lvms.bin" 2>/dev/null || cp "$LVMS_BIN" "$work/lvms.bin"
chmod 0755 "$work/lvms.bin"
files_layer "$work/lvms-layer.tar" "/usr/bin/lvms=$work/lvms.bin"
oci localhost/lvms:dev "$ENTRYPOINT" "$USER_ID:$USER_ID" "$ROOTFS" "$work/lvms-layer.tar"

# LVMS itself, on the same Debian root, its binary at /lvms and user 65532 as its own image has
# them, plus util-linux's mount and umount: TopoLVM's node server runs `mount` in its container,
# and Debian ships them in a package of their own (`mount`), which the lvms image does not need.
if [ -n "${LVMS_GO_BIN:-}" ]; then
  [ -x "$LVMS_GO_BIN" ] || die "LVMS_GO_BIN=$LVMS_GO_BIN is not an executable: deploy/dev/build-lvms-go.sh builds it"
  for t in mount umount; do
    command -v "$t" >/dev/null || die "$t is missing on this host: apt-get install -y mount"
  done
  files_layer "$work/lvms-go.tar" "/lvms=$LVMS_GO_BIN" "/usr/bin/mount=$(command -v mount)" \
    "/usr/bin/umount=$(command -v umount)"
  oci "localhost/lvms-go:${LVMS_GO_TAG:-v4.20.0}" '["/lvms"]' "65532:65532" "$ROOTFS" "$work/lvms-go.tar"
fi

# The sidecars, as upstream ships them: the binary at /<name>, run as 65532.
for b in csi-provisioner csi-resizer csi-snapshotter; do
  files_layer "$work/$b.tar" "/$b=$csi/bin/$b"
  oci "localhost/$b:dev" "[\"/$b\"]" "65532:65532" "$work/$b.tar"
done

# pause and the workload: Debian's static busybox.
bb=$(command -v busybox || true)
[ -n "$bb" ] && file -L "$bb" 2>/dev/null | grep -q 'statically linked' || {
  bb=$(find "$CACHE" -maxdepth 2 -name busybox -path '*guest-*' | head -1)
}
[ -x "$bb" ] || die "no static busybox: apt-get install -y busybox-static (or make test-guest)"
files_layer "$work/busybox.tar" "/bin/busybox=$bb"
# The pause image holds a sandbox's namespaces: sleep until told to stop.
oci localhost/pause:dev '["/bin/busybox","sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait; done"]' "65535:65535" "$work/busybox.tar"
# The workload image: `sh` and the applets a test needs, as links to busybox.
root=$work/workload
mkdir -p "$root/bin" "$root/etc" "$root/tmp"
cp "$bb" "$root/bin/busybox"
for a in sh cat echo ls sleep dd md5sum sha256sum sync stat df mount id test mkdir rm cp head tail wc grep date true false touch ln printf seq cmp od tr cut env du find fsync sed awk; do
  ln -s busybox "$root/bin/$a"
done
printf 'root:x:0:0::/root:/bin/sh\n' >"$root/etc/passwd"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf "$work/workload.tar" .
oci localhost/busybox:dev '["/bin/sh"]' "0:0" "$work/workload.tar"
echo "$OUT"
