# Issue 18 experiment: can two thin LVs be snapshotted at one instant on this kernel? Each LV
# carries its filesystem through a "gate" (a dm-linear device over the LV); the gates are
# suspended (one freeze per filesystem, flushed, I/O held), lvm2 snapshots the LVs underneath
# (ignoring suspended devices when it scans), the gates resume. A writer appends numbered
# records alternately to both, syncing after each: a pair is CONSISTENT when the last records
# differ by one. Also grows one volume through its gate. Run in the test guest:
#   cargo build -p lvms-testkit --bin lvms-guest
#   [LVMS_GUEST_KERNEL=6.12] target/debug/lvms-guest --disk g0=1024 deploy/dev/experiments/group-snapshot-gate.sh
set -u
modprobe dm-thin-pool
D=/dev/disk/by-id/virtio-g0
pvcreate -q $D && vgcreate -q gx $D && lvcreate -q -y -T gx/pool -L 700m
for v in a b; do
  lvcreate -q -y -T gx/pool -V 320m -n $v
  # The gate: a dm-linear device over the LV; the filesystem lives on it.
  dmsetup create gate-$v --table "0 $(blockdev --getsz /dev/gx/$v) linear /dev/gx/$v 0" && dmsetup mknodes gate-$v
  mkfs.xfs -q /dev/mapper/gate-$v; mkdir -p /mnt/$v; mount -o nouuid /dev/mapper/gate-$v /mnt/$v
done
writer() { n=0; while :; do f=/mnt/a; [ $((n % 2)) = 1 ] && f=/mnt/b; echo $n >>$f/log; sync; n=$((n+1)); done; }
round() {
  writer & w=$!
  sleep 2
  dmsetup suspend gate-a gate-b || echo "HOLD FAILED"
  lvcreate --config "devices{ignore_suspended_devices=1}" -q -y -s -n sa$1 gx/a || echo "SNAP A FAILED"
  lvcreate --config "devices{ignore_suspended_devices=1}" -q -y -s -n sb$1 gx/b || echo "SNAP B FAILED"
  dmsetup info -c -o name,suspended gate-a gate-b gx-a gx-b
  dmsetup resume gate-a gate-b || echo "RELEASE FAILED"
  sleep 1; kill $w; wait $w 2>/dev/null
  lvchange -q -ay -K gx/sa$1 gx/sb$1
  mkdir -p /s/a /s/b; mount -o ro,nouuid /dev/gx/sa$1 /s/a; mount -o ro,nouuid /dev/gx/sb$1 /s/b
  ma=$(tail -1 /s/a/log); mb=$(tail -1 /s/b/log); la=$(tail -1 /mnt/a/log); lb=$(tail -1 /mnt/b/log)
  d=$((ma - mb)); [ $d -lt 0 ] && d=$((-d))
  echo "ROUND $1: snapshot a=$ma b=$mb (live a=$la b=$lb) $( [ $d = 1 ] && echo CONSISTENT || echo INCONSISTENT)"
  umount /s/a /s/b
}
for r in 1 2 3 4 5; do round $r; done
# Growth through the gate: the LV grows, then the gate's table, then the filesystem.
lvextend -q -L +64m gx/a && dmsetup suspend gate-a && dmsetup reload gate-a --table "0 $(blockdev --getsz /dev/gx/a) linear /dev/gx/a 0" && dmsetup resume gate-a && xfs_growfs /mnt/a >/dev/null && echo "GROW OK $(df -B1 --output=size /mnt/a | tail -1)"
uname -r
