#!/bin/sh
# PID 1 of the real test node (/sbin/lvms-node-init, built into the node's root by
# build-node.sh): the host's mounts and cgroups, the modules kubelet, containerd, the CNI bridge,
# kube-proxy and vg-manager need, QEMU's user network, the test's configuration from the disk with
# serial `lvms-node-config` (a tar: node.env, etc/kubernetes/*), then containerd, kube-proxy and
# kubelet. The images are in containerd's store on the root disk already: the test imports them
# on the host before the first boot (an import under emulation took minutes).
#
# node.env sets NODE_NAME. The console gets `LVMS-NODE <what>` lines, and kubelet's errors.
# Everything under /var (containerd, kubelet, lvms's journal) is on the root disk and survives a
# reboot, as on a real node.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
say() { echo "LVMS-NODE $*" >/dev/console; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -o remount,rw /
mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
mkdir -p /run/lock /run/lvm /dev/disk/by-id
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# CSI mounts propagate between kubelet's directory and the driver's container (Bidirectional).
mount --make-rshared /
echo "+cpu +cpuset +memory +pids +io" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
say "kernel $(uname -r)"

for m in virtio_net overlay bridge br_netfilter veth nf_conntrack nf_tables nft_chain_nat nft_ct \
  nft_masq nft_nat nft_compat nft_reject_inet nft_fib_inet xt_MASQUERADE xt_conntrack xt_comment \
  xt_mark xt_addrtype xt_nat xt_multiport dm_mod dm_thin_pool dm_snapshot dm_mirror loop xfs; do
  modprobe "$m" 2>/dev/null
done
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 kernel.panic=10
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2

# Disks by serial, before udevd runs: the root, the configuration, and the node's data disks.
for _ in $(seq 1 100); do
  [ -e /sys/block/vdb ] && break
  sleep 0.05
done
for b in /sys/block/vd*; do
  s=$(cat "$b/serial" 2>/dev/null) && [ -n "$s" ] && ln -sf "/dev/${b##*/}" "/dev/disk/by-id/virtio-$s"
done
# udev's database, which lsblk reads FSTYPE from (LVMS's vg-manager tells its PVs by it): block
# devices only, and no module loading (build-node.sh drops udev's driver rules): every module
# loaded under TCG patches kernel text, where the node's int3 oopses were seen.
/lib/systemd/systemd-udevd --daemon >/dev/null 2>&1 || say "systemd-udevd did not start"
udevadm trigger --action=add --subsystem-match=block >/dev/null 2>&1
udevadm settle --timeout=30 >/dev/null 2>&1
cfg=/var/lib/lvms-node/config
conf=/dev/disk/by-id/virtio-lvms-node-config
rm -rf $cfg
mkdir -p $cfg /var/log
tar -xf $conf -C $cfg ./node.env ./etc 2>/dev/null \
  || { say "no configuration disk"; sleep 5; busybox poweroff -f; }
. $cfg/node.env
hostname "$NODE_NAME"
cp $cfg/etc/kubernetes/* /etc/kubernetes/

containerd >>/var/log/containerd.log 2>&1 &
for _ in $(seq 1 600); do
  [ -S /run/containerd/containerd.sock ] && break
  sleep 0.1
done
[ -S /run/containerd/containerd.sock ] || say "containerd did not start"
say "containerd ready"

kube-proxy --config /etc/kubernetes/kube-proxy.yaml --hostname-override="$NODE_NAME" \
  >>/var/log/kube-proxy.log 2>&1 &
# kubelet restarted when it ends, as systemd's Restart=always does on a real node; each end is
# said on the console (the test gives up on a node whose kubelet keeps ending).
(
  while [ ! -e /run/lvms-node-stopping ]; do
    kubelet --config /etc/kubernetes/kubelet.yaml --kubeconfig /etc/kubernetes/kubelet.kubeconfig \
      --hostname-override="$NODE_NAME" --node-ip=10.0.2.15 >>/var/log/kubelet.log 2>&1
    rc=$?
    [ -e /run/lvms-node-stopping ] && break
    say "kubelet exited (status $rc), restarting in 5 s"
    sleep 5
  done
) &
# kubelet's errors on the console: a stall under emulation is diagnosed from it alone.
(tail -n0 -F /var/log/kubelet.log 2>/dev/null | grep --line-buffered '^E' | cut -c1-300 >/dev/console) &
say "kubelet started"

# PID 1: reap whatever ends; a TERM (the test's graceful stop) stops the node.
stop() {
  say "stopping"
  touch /run/lvms-node-stopping
  # shellcheck disable=SC2046 # one pid per word
  kill $(busybox pidof kubelet kube-proxy) 2>/dev/null
  sleep 2
  # shellcheck disable=SC2046 # one pid per word
  kill $(busybox pidof containerd) 2>/dev/null
  sync
  busybox poweroff -f
}
trap stop TERM INT
while :; do
  wait
  sleep 1
done
