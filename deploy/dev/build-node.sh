#!/usr/bin/env bash
# Builds the real node of the test tier: a Debian root filesystem (runc, the CNI plugins,
# nftables/iptables, lvm2 and the tools vg-manager runs on the host) with kubelet, kube-proxy and
# containerd from their Go modules (build-test-bins.sh), Debian's 6.12 cloud kernel and its
# modules, and a small initramfs that mounts the root disk and starts node-init.sh. Cached in
# $LVMS_TEST_BINS_CACHE (~/.cache/lvms-test-bins) by its inputs; the tests make a fresh ext4 disk
# of the root for each node (mke2fs -d) and boot it under QEMU.
#
#   deploy/dev/build-node.sh        # prints the node directory (vmlinuz, initramfs.cpio, root/)
#
# Env: LVMS_NODE_KERNEL (default 6.12: a cloud kernel version prefix or package name).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}
die() { echo "build-node: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "mmdebstrap builds the node's root as root: run as root"
for t in mmdebstrap apt-get mke2fs; do
  command -v "$t" >/dev/null || die "$t is missing: apt-get install -y mmdebstrap e2fsprogs"
done

want=${LVMS_NODE_KERNEL:-6.12}
if [[ $want != linux-image-* ]]; then
  want=$(apt-cache search --names-only "^linux-image-${want//./\\.}.*-cloud-amd64\$" 2>/dev/null \
    | awk '{print $1}' | grep -v unsigned | sort -V | tail -1)
  [ -n "$want" ] || die "no cloud kernel matches LVMS_NODE_KERNEL=${LVMS_NODE_KERNEL:-6.12}"
fi
kver=${want#linux-image-}

# The node's userland: what kubelet, containerd and the CNI plugins need, what vg-manager runs on
# the host through nsenter (lvm2, mkfs, mount, blkid), and udev: LVMS's vg-manager (the swap
# tests run it here) knows its own PVs by lsblk's FSTYPE, which lsblk reads from udev's database.
PKGS=(runc containernetworking-plugins nftables iptables conntrack iproute2 kmod procps mount
  util-linux lvm2 dmsetup thin-provisioning-tools e2fsprogs xfsprogs ca-certificates busybox-static
  udev)
bins=$("$HERE/build-test-bins.sh") || die "build-test-bins.sh failed"
CACHE_ROOT=$(dirname "$(dirname "$bins")")
node_bins=$(find "$CACHE_ROOT" -maxdepth 1 -type d -name 'node-k8s-*' | sort | tail -1)/bin
for b in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr; do
  [ -x "$node_bins/$b" ] || die "$node_bins/$b is missing: deploy/dev/build-test-bins.sh builds it"
done

versions=$(apt-cache policy "$want" "${PKGS[@]}" 2>/dev/null | awk '/^[^ ]/{p=$1} /Candidate:/{print p, $2}')
echo "$versions" | grep -q "(none)" && die "packages without a candidate: run apt-get update"
stamp=$( { echo "$versions"; cat "$0" "$HERE/node-init.sh"; sha256sum "$node_bins"/*; } | sha256sum | cut -c1-16)
DIR=$CACHE/node-$kver
if [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$stamp" ] && [ -d "$DIR/root/usr" ] && [ -f "$DIR/initramfs.cpio" ]; then
  echo "$DIR"; exit 0
fi
echo "build-node: building the node ($want) in $DIR" >&2
rm -rf "$DIR.tmp"
mkdir -p "$DIR.tmp/debs" "$DIR.tmp/kernel"
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
root=$DIR.tmp/root
mmdebstrap --mode=root --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$root" "$mirror" >"$DIR.tmp/mmdebstrap.log" 2>&1 \
  || die "mmdebstrap failed; last lines of $DIR.tmp/mmdebstrap.log:
$(tail -20 "$DIR.tmp/mmdebstrap.log")"

# The kernel: unpacked, never installed on the host; its modules in the node's root.
(cd "$DIR.tmp/debs" && apt-get download "$want" >/dev/null 2>"$DIR.tmp/download.log") \
  || die "apt-get download $want failed: $(tail -3 "$DIR.tmp/download.log")"
dpkg-deb -x "$DIR.tmp"/debs/linux-image-*.deb "$DIR.tmp/kernel"
cp "$DIR.tmp/kernel/boot/vmlinuz-$kver" "$DIR.tmp/vmlinuz"
mkdir -p "$root/lib/modules"
cp -a "$DIR.tmp/kernel/lib/modules/$kver" "$root/lib/modules/"
# The node's own depmod (kmod), run in its root.
chroot "$root" /usr/sbin/depmod -a "$kver" || die "depmod of the node's modules failed"

install -m 0755 "$node_bins"/kubelet "$node_bins"/kube-proxy "$node_bins"/containerd \
  "$node_bins"/containerd-shim-runc-v2 "$node_bins"/ctr "$root/usr/local/bin/"
install -m 0755 "$HERE/node-init.sh" "$root/sbin/lvms-node-init"
mkdir -p "$root/etc/containerd" "$root/etc/cni/net.d" "$root/etc/kubernetes" "$root/etc/lvm" \
  "$root/var/lib/kubelet" "$root/var/lib/lvms" "$root/etc/topolvm"
# containerd 2: CRI with runc (cgroupfs, as kubelet here), overlayfs, the CNI bridge, and the
# pause image the tests import (no registry).
cat >"$root/etc/containerd/config.toml" <<'EOF'
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/pause:dev"

[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "/usr/sbin/runc"
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "/etc/cni/net.d"
EOF
# Pod networking: Debian's CNI bridge, pods masqueraded behind the node.
cat >"$root/etc/cni/net.d/10-lvms-node.conflist" <<'EOF'
{"cniVersion": "1.0.0", "name": "lvms-node", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
# kubelet: cgroupfs, containerd's socket, no DNS (nothing here resolves names), eviction off
# (a test node has no room to spare), the read-only port for its metrics, CSIVolumeHealth (alpha:
# kubelet turns an abnormal NodeGetVolumeStats condition into a Pod Event and a metric) and
# volume stats every 20 s instead of each minute (the scenarios wait for them), and its serving
# certificate from the configuration disk (the test makes it: one kubelet makes itself is written
# without an fsync, and is empty after a power cut soon after).
cat >"$root/etc/kubernetes/kubelet.yaml" <<'EOF'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
readOnlyPort: 10255
resolvConf: ""
clusterDomain: cluster.local
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
featureGates: {CSIVolumeHealth: true}
volumeStatsAggPeriod: 20s
tlsCertFile: /etc/kubernetes/kubelet-serving.crt
tlsPrivateKeyFile: /etc/kubernetes/kubelet-serving.key
EOF
cat >"$root/etc/kubernetes/kube-proxy.yaml" <<'EOF'
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: /etc/kubernetes/kube-proxy.kubeconfig}
mode: nftables
clusterCIDR: 10.88.0.0/16
conntrack: {maxPerCore: 0, min: 0}
EOF
# lvm2 makes /dev/<vg>/<lv> itself, without waiting on udev (udevd runs for lsblk's database).
cat >"$root/etc/lvm/lvm.conf" <<'EOF'
activation {
    udev_sync = 0
    udev_rules = 0
    monitoring = 0
}
devices {
    obtain_device_list_from_udev = 0
    external_device_info_source = "none"
}
EOF
echo "lvms-node" >"$root/etc/hostname"
# udev keeps its database for lsblk, and loads no driver: node-init.sh loads what the node needs.
rm -f "$root/usr/lib/udev/rules.d/80-drivers.rules" "$root/lib/udev/rules.d/80-drivers.rules"

# The initramfs: busybox, the virtio and ext4 modules, and an init that mounts the root disk
# (serial lvms-node-root) and hands over to node-init.
ir=$DIR.tmp/initramfs
mkdir -p "$ir/bin" "$ir/dev" "$ir/proc" "$ir/sys" "$ir/newroot" "$ir/lib/modules/$kver"
cp "$root/usr/bin/busybox" "$ir/bin/busybox"
for a in sh mount umount switch_root modprobe sleep cat ls ln mkdir insmod seq cut; do ln -s busybox "$ir/bin/$a"; done
mods=$DIR.tmp/kernel/lib/modules/$kver
for sub in kernel/drivers/virtio kernel/drivers/block/virtio_blk.ko kernel/fs/ext4 kernel/fs/jbd2 \
  kernel/fs/mbcache.ko kernel/lib kernel/crypto; do
  for f in "$mods"/$sub*; do
    [ -e "$f" ] || continue
    rel=${f#"$mods"/}
    mkdir -p "$ir/lib/modules/$kver/$(dirname "$rel")"
    cp -a "$f" "$ir/lib/modules/$kver/$rel"
  done
done
cp "$mods"/modules.builtin "$mods"/modules.order "$ir/lib/modules/$kver/"
find "$ir/lib/modules/$kver" -name '*.ko.xz' -exec "$ir/bin/busybox" unxz {} +
sed -i 's/\.ko\.xz$/.ko/' "$ir/lib/modules/$kver/modules.order" "$ir/lib/modules/$kver/modules.builtin"
"$ir/bin/busybox" depmod -b "$ir" "$kver" || die "depmod of the initramfs failed"
cat >"$ir/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio_pci virtio_blk ext4; do modprobe $m 2>/dev/null; done
root=""
for _ in $(seq 1 200); do
  for b in /sys/block/vd*; do
    [ "$(cat "$b/serial" 2>/dev/null)" = lvms-node-root ] && root=/dev/${b##*/}
  done
  [ -n "$root" ] && break
  sleep 0.05
done
[ -n "$root" ] || { echo "node initramfs: no disk with serial lvms-node-root"; sleep 5; exit 1; }
mount -t ext4 "$root" /newroot || { echo "node initramfs: mounting $root failed"; sleep 5; exit 1; }
umount /proc /sys /dev
exec switch_root /newroot /sbin/lvms-node-init
EOF
chmod 0755 "$ir/init"
(cd "$ir" && find . | "$ir/bin/busybox" cpio -o -H newc >"$DIR.tmp/initramfs.cpio" 2>/dev/null) || die "packing the initramfs failed"
rm -rf "$DIR.tmp/debs" "$DIR.tmp/kernel" "$ir"
echo "$stamp" >"$DIR.tmp/stamp"
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
echo "$DIR"
