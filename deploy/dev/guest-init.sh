#!/usr/bin/busybox sh
# /init of the real-kernel test guest (built by build-guest.sh). It finds its input on the
# virtio disk with serial `lvms-in` (a tar holding run.sh and whatever the test sends), runs
# run.sh under dash as root with GUEST_OUT=/out, writes /out as a tar onto the disk with serial
# `lvms-out`, prints `LVMS-GUEST-EXIT <status>` on the console and powers off. Other virtio
# disks are the scenario's scratch disks, linked as /dev/disk/by-id/virtio-<serial>. With a
# virtio NIC the guest is 10.0.2.15 on QEMU's user network.
export PATH=/usr/sbin:/usr/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /run/lock /run/lvm /dev/disk/by-id /work /out /root
# A task blocked for 5 minutes is a hung guest (seen once in CI under emulation: a blkid in D
# state for 20 minutes, every scenario behind it waiting): panic, so QEMU exits and
# run-tests.sh reruns the failed scenarios once in a new guest, loudly, as after any kernel
# panic. No hold of a group snapshot lasts that long.
echo 300 >/proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
echo 1 >/proc/sys/kernel/hung_task_panic 2>/dev/null
modprobe virtio_pci 2>/dev/null
modprobe virtio_blk 2>/dev/null
ip link set lo up
# QEMU user networking (restrict=on): the guest reaches only the forwards the test set up.
if modprobe virtio_net 2>/dev/null && [ -e /sys/class/net/eth0 ]; then
  ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
fi

# Disks appear asynchronously after the driver binds.
disk() {
  for _ in $(seq 1 100); do
    for b in /sys/block/vd*; do
      [ "$(cat "$b/serial" 2>/dev/null)" = "$1" ] && { echo "/dev/${b##*/}"; return 0; }
    done
    sleep 0.05
  done
  return 1
}
in=$(disk lvms-in) || { echo "guest-init: no disk with serial lvms-in"; echo "LVMS-GUEST-EXIT 125"; poweroff -f; }
for b in /sys/block/vd*; do
  s=$(cat "$b/serial" 2>/dev/null) && [ -n "$s" ] && ln -sf "/dev/${b##*/}" "/dev/disk/by-id/virtio-$s"
done
tar -xf "$in" -C /work || { echo "guest-init: the input disk holds no tar"; echo "LVMS-GUEST-EXIT 125"; poweroff -f; }

echo "guest-init: kernel $(uname -r), running run.sh"
cd /work && GUEST_OUT=/out /usr/bin/dash /work/run.sh </dev/null
rc=$?
if out=$(disk lvms-out); then
  tar -cf "$out" -C /out . || rc=124
fi
sync
echo "LVMS-GUEST-EXIT $rc"
poweroff -f
