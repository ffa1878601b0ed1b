#!/usr/bin/env bash
# Builds the real-kernel test guest from Debian packages only, into a cache outside the repo,
# once per kernel and inputs: a `-cloud-amd64` kernel unpacked (never installed on the host)
# and an initramfs holding lvm2, dmsetup, thin-provisioning-tools, e2fsprogs, xfsprogs,
# util-linux tools, a shell and the modules the tests load on demand (dm, raid, xfs, loop).
#
#   deploy/dev/build-guest.sh            # prints the guest directory (vmlinuz, initramfs.cpio, busybox)
#
# Env: LVMS_GUEST_KERNEL (a kernel package such as linux-image-6.1.0-56-cloud-amd64, or a
# prefix such as 6.12 for the newest matching cloud kernel; default: what
# linux-image-cloud-amd64 depends on), LVMS_TEST_BINS_CACHE (~/.cache/lvms-test-bins).
# The guest's init is in guest-init.sh next to this script. Exits non-zero with the fix when
# apt-get or a package is missing.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}
die() { echo "build-guest: $*" >&2; exit 1; }
command -v apt-get >/dev/null || die "apt-get is missing: the guest is built from Debian packages (run on Debian 12)"
command -v apt-cache >/dev/null || die "apt-cache is missing: install apt"

want=${LVMS_GUEST_KERNEL:-}
if [ -z "$want" ]; then
  want=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
  [ -n "$want" ] || die "no linux-image-cloud-amd64 in the package lists: run apt-get update"
elif [[ $want != linux-image-* ]]; then
  # A version prefix (6.12): the newest cloud kernel whose package name starts with it.
  want=$(apt-cache search --names-only "^linux-image-${want//./\\.}.*-cloud-amd64\$" 2>/dev/null \
    | awk '{print $1}' | grep -v unsigned | sort -V | tail -1)
  [ -n "$want" ] || die "no cloud kernel matches LVMS_GUEST_KERNEL=${LVMS_GUEST_KERNEL}: apt-cache search linux-image-${LVMS_GUEST_KERNEL}"
fi

# Guest userland: what the scenarios run (lvm2 and its tools, mkfs, thin tools) and their
# libraries; busybox-static gives init's applets and, on the host, cpio and depmod.
PKGS=(lvm2 dmsetup libdevmapper1.02.1 libdevmapper-event1.02.1 libaio1 libedit2 libbsd0 libmd0
  libtinfo6 libudev1 libselinux1 libpcre2-8-0 libblkid1 libuuid1 libsystemd0 liblzma5 libzstd1
  liblz4-1 libcap2 libgcrypt20 libgpg-error0 libsepol2 libreadline8
  thin-provisioning-tools libstdc++6 libgcc-s1 libexpat1
  xfsprogs libinih1 liburcu8 e2fsprogs libext2fs2 libss2 libcom-err2 busybox-static)
# Host tools copied in (with the libraries ldd names); the same Debian release, so they run.
HOST_TOOLS=(dash losetup lsblk blkid wipefs mount umount fsfreeze tar timeout df cmp)

versions=$(apt-cache policy "$want" "${PKGS[@]}" 2>/dev/null | awk '/^[^ ]/{p=$1} /Candidate:/{print p, $2}')
echo "$versions" | grep -q "(none)" && die "packages without a candidate:
$(echo "$versions" | grep "(none)")
run apt-get update, or check the Debian release (12) and its sources"
stamp=$( { echo "$versions"; cat "$0" "$HERE/guest-init.sh"; for t in "${HOST_TOOLS[@]}"; do sha256sum "$(command -v "$t")"; done; } | sha256sum | cut -c1-16)
DIR=$CACHE/guest-${want#linux-image-}
if [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$stamp" ] && [ -f "$DIR/vmlinuz" ] && [ -f "$DIR/initramfs.cpio" ] && [ -x "$DIR/busybox" ]; then
  echo "$DIR"; exit 0
fi

echo "build-guest: building the guest for $want in $DIR" >&2
rm -rf "$DIR.tmp"
mkdir -p "$DIR.tmp/debs" "$DIR.tmp/kernel" "$DIR.tmp/root"
(cd "$DIR.tmp/debs" && apt-get download "$want" "${PKGS[@]}" >/dev/null 2>"$DIR.tmp/download.log") \
  || die "apt-get download failed (network or package lists?):
$(tail -5 "$DIR.tmp/download.log")"
root=$DIR.tmp/root
for deb in "$DIR.tmp"/debs/*.deb; do
  case $(basename "$deb") in
    linux-image-*) dpkg-deb -x "$deb" "$DIR.tmp/kernel" ;;
    *) dpkg-deb -x "$deb" "$root" ;;
  esac
done
kver=${want#linux-image-}
cp "$DIR.tmp/kernel/boot/vmlinuz-$kver" "$DIR.tmp/vmlinuz"
bb=$root/bin/busybox
[ -x "$bb" ] || die "busybox-static did not unpack a /bin/busybox"
# Kept beside the guest: it runs cpio and depmod here, and it is the host end of a guest
# forward (`guestfwd=...-cmd:busybox nc 127.0.0.1 PORT`), so the host needs no busybox package.
cp "$bb" "$DIR.tmp/busybox"
bb=$DIR.tmp/busybox

# Modules the tests load on demand: device-mapper (thin, snapshot, mirror, raid), md raid,
# xfs, loop, virtio disks, and what they depend on (crypto checksums, lib helpers).
mods=$DIR.tmp/kernel/lib/modules/$kver
mkdir -p "$root/lib/modules/$kver"
for sub in kernel/drivers/md kernel/drivers/block kernel/drivers/virtio kernel/fs/xfs kernel/lib \
  kernel/crypto kernel/arch/x86/crypto; do
  [ -d "$mods/$sub" ] && mkdir -p "$root/lib/modules/$kver/$(dirname "$sub")" \
    && cp -a "$mods/$sub" "$root/lib/modules/$kver/$sub"
done
# virtio-net for the loopback forwards to the test's kube-apiserver.
for ko in kernel/drivers/net/virtio_net.ko kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko; do
  mkdir -p "$root/lib/modules/$kver/$(dirname "$ko")"
  cp "$mods/$ko"* "$root/lib/modules/$kver/$(dirname "$ko")/" || die "$ko is not in $want"
done
cp "$mods"/modules.builtin "$mods"/modules.order "$root/lib/modules/$kver/"
# Newer kernels ship xz-compressed modules; busybox's modprobe loads plain ones.
find "$root/lib/modules/$kver" -name '*.ko.xz' -exec "$bb" unxz {} +
sed -i 's/\.ko\.xz$/.ko/' "$root/lib/modules/$kver/modules.order" "$root/lib/modules/$kver/modules.builtin"
"$bb" depmod -b "$root" "$kver" || die "depmod of the guest modules failed"

# A merged /usr, as on the hosts lvms runs on: lvms calls /usr/sbin/pvs, /usr/bin/lsblk, ...
for d in bin sbin lib lib64; do
  mkdir -p "$root/usr/$d"
  if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
    cp -a "$root/$d/." "$root/usr/$d/" && rm -rf "${root:?}/$d"
  fi
  ln -sfn "usr/$d" "$root/$d"
done
# Host tools at their host paths, and every library they (and the unpacked binaries) link.
for t in "${HOST_TOOLS[@]}"; do
  p=$(command -v "$t")
  mkdir -p "$root$(dirname "$p")" && cp -L "$p" "$root$p"
done
mkdir -p "$root/usr/lib/x86_64-linux-gnu"
libs() {
  find "$root/usr/sbin" "$root/usr/bin" -type f -perm -u+x 2>/dev/null \
    | xargs -r ldd 2>/dev/null | awk '$3 ~ /^\//{print $3}' | sort -u
}
for lib in $(libs); do
  [ -e "$root/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ] || cp -L "$lib" "$root/usr/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$root/usr/lib64/"
mkdir -p "$root/etc/lvm" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run" "$root/mnt"
# Busybox applets for what no package brings (ls, uname, seq, ip, poweroff, modprobe, ...);
# never in place of a real tool.
for a in $("$bb" --list); do
  [ -e "$root/usr/bin/$a" ] || [ -e "$root/usr/sbin/$a" ] || ln -s busybox "$root/usr/bin/$a"
done
ln -sf /usr/bin/busybox "$root/usr/sbin/modprobe"
# lvm2 makes /dev/<vg>/<lv> itself: no udev in the guest.
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
global {
    use_lvmetad = 0
}
EOF
install -m 0755 "$HERE/guest-init.sh" "$root/init"

(cd "$root" && find . | "$bb" cpio -o -H newc >"$DIR.tmp/initramfs.cpio" 2>/dev/null) \
  || die "packing the initramfs failed"
rm -rf "$DIR.tmp/debs" "$DIR.tmp/kernel" "$DIR.tmp/root"
echo "$stamp" >"$DIR.tmp/stamp"
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
echo "$DIR"
