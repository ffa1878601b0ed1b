# The `after_ready` of csi-mount (tests/guest/mount.rs), run by node.sh once the class is
# Ready: kubelet's part (`lvms-dev kubelet` against vg-manager's node socket). Publishes the
# host's three claims (xfs, ext4, block) and writes them; marks `written`; once the host's
# snapshots, clone, growth and restores are made (a Bound restore means the snapshots were
# taken), publishes the restores and the clone and checks what they hold; expands both
# filesystems online; records stats and `df`; unpublishes everything (one target twice); marks
# `checked` and waits until the host has deleted the volumes.
#
# Variables:   NS, VG, VGM (node.sh's), JOB, GUEST_OUT
# Functions:   fail (node.sh's)
K() { KUBECONFIG=/work/kubeconfig /work/lvms-dev kubelet "$@" --socket "$VGM/csi.sock" --timeout-secs 900; }
call() { what=$1; shift; K "$@" >>"$GUEST_OUT/kubelet.log" 2>&1 || fail "kubelet $what failed: $(tail -3 "$GUEST_OUT/kubelet.log")" 30; }
M=/mnt/kubelet
call publish publish --claim "$NS/data" --target $M/data
call publish publish --claim "$NS/data4" --target $M/data4
call publish publish --claim "$NS/blk" --target $M/blk
for v in data data4; do
  echo "written to $v before the snapshot" >$M/$v/before
done
sync
# The block volume: a pattern written through the bound device node, read back.
dd if=/dev/urandom of=/tmp/pattern bs=64k count=16 2>/dev/null
dd if=/tmp/pattern of=$M/blk bs=64k conv=fsync 2>/dev/null || fail "writing the block volume" 31
dd if=$M/blk of=/tmp/back bs=64k count=16 2>/dev/null
cmp /tmp/pattern /tmp/back && echo ok >"$GUEST_OUT/block-ok"
# The filesystem on each volume's device (mountinfo: `... - fstype source options`).
source_of() { awk -v t="$1" '$5 == t { for (i = 1; i <= NF; i++) if ($i == "-") print $(i + 2) }' /proc/self/mountinfo; }
for v in data data4; do
  blkid -p -o export "$(source_of $M/$v)" | grep '^TYPE=' >"$GUEST_OUT/fstype-$v"
done
grep " $M/" /proc/self/mountinfo >"$GUEST_OUT/mounts-published.txt"
stat -c %a $M/data >"$GUEST_OUT/mode-data"
echo "LVMS-JOB-MARK $JOB written" >/dev/console
# The host snapshots both, clones data, grows data and data4, then makes the restores: a
# restore that is Bound means the snapshots were taken.
call publish publish --claim "$NS/restore" --target $M/restore
for v in data data4; do echo "written to $v after the snapshot" >$M/$v/after; done
sync
call publish publish --claim "$NS/restore4" --target $M/restore4
call publish publish --claim "$NS/clone" --target $M/clone
for r in restore:data restore4:data4 clone:data; do
  to=${r%%:*}; from=${r##*:}
  cmp "$M/$from/before" "$M/$to/before" && echo before >>"$GUEST_OUT/check-$to"
  [ -e "$M/$to/after" ] && echo after >>"$GUEST_OUT/check-$to"
  echo 'done' >>"$GUEST_OUT/check-$to"
done
for v in data data4; do
  df -B1 --output=size $M/$v | tail -1 | tr -d ' ' >"$GUEST_OUT/size-before-$v"
  call expand expand --claim "$NS/$v" --target $M/$v
  df -B1 --output=size $M/$v | tail -1 | tr -d ' ' >"$GUEST_OUT/size-after-$v"
done
K stats --claim "$NS/data" --target $M/data >"$GUEST_OUT/stats-data.json" 2>>"$GUEST_OUT/kubelet.log"
df -B1 --output=size,used,avail,itotal,iused,iavail $M/data | tail -1 >"$GUEST_OUT/df-data.txt"
K stats --claim "$NS/blk" --target $M/blk >"$GUEST_OUT/stats-blk.json" 2>>"$GUEST_OUT/kubelet.log"
for v in data data4 blk restore restore4 clone; do
  call unpublish unpublish --claim "$NS/$v" --target $M/$v
done
# Unpublished twice: a target that is gone is success.
call unpublish unpublish --claim "$NS/data" --target $M/data
grep " $M/" /proc/self/mountinfo >"$GUEST_OUT/mounts-after.txt"
ls -A $M >"$GUEST_OUT/targets-after.txt"
echo "LVMS-JOB-MARK $JOB checked" >/dev/console
tagged() { lvs --noheadings -o lv_name -S lv_tags=lvms-volume "$VG" 2>/dev/null | wc -l; }
i=0
until [ "$(tagged)" -eq 0 ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the CSI volumes were never removed" 17; sleep 1
done
