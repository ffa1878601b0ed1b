#!/usr/bin/env bash
# The one list of what the tests need from the machine, used by `make test` (the README's test
# command) and `.ci/run`: Debian packages installed when missing (root), the rest checked with
# the fix named. Go-built peers come from build-test-bins.sh.
#
#   lvm2        vg-manager on loop devices (vgcreate, pvs, ...)
#   e2fsprogs   mkfs.ext4 for the filesystem filter tests
#   util-linux  losetup, lsblk, blkid, wipefs
#   python3     build-test-bins.sh reads the kubernetes go.mod with it
#   make        the README's commands
#   qemu-system-x86  the real-kernel tier boots a Debian cloud kernel (build-guest.sh), with
#               --no-install-recommends (no firmware or GUI packages)
#   shellcheck  tests/guest_scripts checks the guest tier's shell
#   mmdebstrap  the real node's root and the lvms image's Debian root (build-node.sh,
#               build-images.sh); e2fsprogs' mke2fs and debugfs write and read the node's disk
#   busybox-static  the node's pause and workload images (build-images.sh): `make demo` builds
#               no guest whose busybox it could take
set -euo pipefail

die() { echo "test-deps: $*" >&2; exit 1; }
command -v cargo >/dev/null || die "cargo is missing: install Rust (rustup) >= 1.89"
command -v go >/dev/null || die "go is missing: Go >= 1.26 builds the test peers (etcd, kube-apiserver, ...)"

missing=()
for pair in python3:python3 make:make vgcreate:lvm2 mkfs.ext4:e2fsprogs losetup:util-linux blkid:util-linux wipefs:util-linux dash:dash shellcheck:shellcheck mmdebstrap:mmdebstrap debugfs:e2fsprogs busybox:busybox-static; do
  tool=${pair%%:*}; pkg=${pair##*:}
  if ! command -v "$tool" >/dev/null && [ ! -x "/usr/sbin/$tool" ] && [ ! -x "/sbin/$tool" ]; then
    [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing packages ${missing[*]}: run as root, or apt-get install -y ${missing[*]}"
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get: install them with your package manager"
  echo "test-deps: apt-get install ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
  [ "$(id -u)" = 0 ] || die "qemu-system-x86_64 is missing: run as root, or apt-get install -y --no-install-recommends qemu-system-x86"
  command -v apt-get >/dev/null || die "qemu-system-x86_64 is missing and no apt-get: install QEMU (x86_64 system emulator)"
  echo "test-deps: apt-get install --no-install-recommends qemu-system-x86" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null \
    || die "apt-get install qemu-system-x86 failed"
fi
[ "$(id -u)" = 0 ] || die "the vg-manager tests create loop devices and volume groups: run as root"
[ -e /dev/loop-control ] || die "/dev/loop-control is missing: the vg-manager tests need loop devices (root, privileged container)"
