# The `after_ready` of group-snapshot (tests/guest/group_snapshot.rs), run by node.sh once the
# class is Ready. Publishes the host's two claims (data, wal); a writer appends numbered
# records to them alternately, each durable before the next; marks `writing`. Then, per batch
# of BATCH group snapshots up to ROUNDS: reads each group's member snapshots where lvm2 made
# them and the batch's last group restored into claims (a line per pair in rounds.txt), and
# marks `checked-N`. Then, per kill in CRASHES: vg-manager restarted with LVMS_CRASH_AT set,
# `armed-K` marked, its SIGKILL waited for, the gates it held recorded, a new life, every gate
# thawed, both filesystems writable, the retried group read, `crashed-K` marked. With HANG, a
# member's lvcreate that never returns, killed at the deadline (`armed-hang`, `hung-hang`; see
# below). Stops the
# writer, unpublishes, marks `checked` and waits until the host has deleted the volumes.
#
# Variables:
#   ROUNDS, BATCH  how many group snapshots the host takes, in batches of how many
#                  (group_snapshot.rs exports them)
#   CRASHES        the kills, `name=crash-point` separated by blanks (group_snapshot.rs's)
#   HANG           --host-command-timeout (seconds) of the hung-lvcreate step; empty: none
#   NS, VG, VGM, vgm (node.sh's), JOB, GUEST_OUT
# Functions:     start, fail, watch, unwatch (node.sh's)
# vgm is the pid node.sh's start sets:
# shellcheck disable=SC2154
K() { KUBECONFIG=/work/kubeconfig /work/lvms-dev kubelet "$@" --socket "$VGM/csi.sock" --timeout-secs 900; }
call() { what=$1; shift; K "$@" >>"$GUEST_OUT/kubelet.log" 2>&1 || fail "kubelet $what failed: $(tail -3 "$GUEST_OUT/kubelet.log")" 30; }
gates() { dmsetup info -c --noheadings --separator ' ' -o name,open,suspended | grep '^lvms-' || true; }
# The volume id behind a target (its gate's name).
vid() { awk -v t="$1" '$5 == t { for (i = 1; i <= NF; i++) if ($i == "-") print $(i + 2) }' /proc/self/mountinfo | sed 's|^/dev/mapper/lvms-||'; }
M=/mnt/kubelet-group
call publish publish --claim "$NS/data" --target $M/data
call publish publish --claim "$NS/wal" --target $M/wal
DATA=$(vid $M/data) WAL=$(vid $M/wal)
echo "group-snapshot: data $DATA wal $WAL" >/dev/console
watch
gates >"$GUEST_OUT/gates-published.txt"
grep " $M/" /proc/self/mountinfo >"$GUEST_OUT/mounts-published.txt"
# The writer: record n goes to data (even n) or wal (odd n), appended and fsynced before n+1.
( n=0
  while [ ! -e /tmp/group-stop ]; do
    f=$M/data/log; [ $((n % 2)) = 1 ] && f=$M/wal/log
    # A failed write or a failed sync is the writer's end.
    # shellcheck disable=SC2015
    echo $n >>$f && sync $f || { echo "write $n failed" >"$GUEST_OUT/writer-failed"; break; }
    n=$((n+1))
  done
  echo $n >"$GUEST_OUT/records" ) &
writer=$!
# One line per pair: tag, the last record of each (-1: none), each file's record count.
pair() { # tag data-dir wal-dir
  pa=$(tail -n 1 "$2/log"); pb=$(tail -n 1 "$3/log")
  echo "$1 ${pa:--1} ${pb:--1} $(wc -l <"$2/log") $(wc -l <"$3/log")" >>"$GUEST_OUT/rounds.txt"
}
# Every group's two member snapshots (LV tag lvms-group.<id>), read where lvm2 made them.
checked=" " ngroups=0
mkdir -p /mnt/g-data /mnt/g-wal
# The snapshot of volume $2 in group $1.
member() {
  lvs --noheadings --separator '|' -o lv_name,origin,lv_tags "$VG" | tr -d ' ' \
    | awk -F'|' -v o="$2" -v t="lvms-group.$1" '$2 == o && index("," $3 ",", "," t ",") { print $1 }'
}
check_groups() { # until this many groups are checked
  i=0
  while [ $ngroups -lt "$1" ]; do
    for g in $(lvs --noheadings -o lv_tags "$VG" | tr ',' '\n' | sed -n 's/^ *lvms-group\.//p' | sort -u); do
      case "$checked" in *" $g "*) continue ;; esac
      d=$(member "$g" "$DATA") w=$(member "$g" "$WAL")
      # Both members or the next group.
      # shellcheck disable=SC2015
      [ -n "$d" ] && [ -n "$w" ] || continue
      # A member whose log needs recovery cannot be mounted read-only (seen on 6.12 for a
      # kill's group): its restored claims (read-write, log replayed) are checked instead.
      if mount -o ro,nouuid "/dev/$VG/$d" /mnt/g-data && mount -o ro,noload "/dev/$VG/$w" /mnt/g-wal; then
        pair "group:$g" /mnt/g-data /mnt/g-wal
      else
        echo "$g" >>"$GUEST_OUT/direct-skipped.txt"
      fi
      umount /mnt/g-data /mnt/g-wal 2>/dev/null
      checked="$checked$g " ngroups=$((ngroups + 1))
    done
    i=$((i+1))
    [ $i -gt 300 ] && fail "only $ngroups of $1 group snapshots read (data $DATA, wal $WAL): $(lvs --noheadings --separator '|' -o lv_name,origin,lv_tags "$VG" 2>&1)" 44
    sleep 1
  done
}
# A group's members restored into claims r<tag>-data and r<tag>-wal, published, read.
check() {
  call publish publish --claim "$NS/r$1-data" --target "$M/r$1-data"
  call publish publish --claim "$NS/r$1-wal" --target "$M/r$1-wal"
  pair "restore:$1" "$M/r$1-data" "$M/r$1-wal"
  call unpublish unpublish --claim "$NS/r$1-data" --target "$M/r$1-data"
  call unpublish unpublish --claim "$NS/r$1-wal" --target "$M/r$1-wal"
}
echo "LVMS-JOB-MARK $JOB writing" >/dev/console
upto=$BATCH
while [ "$upto" -le "$ROUNDS" ]; do
  check_groups "$upto"
  check "$upto"
  echo "LVMS-JOB-MARK $JOB checked-$upto" >/dev/console
  upto=$((upto + BATCH))
done
# One word per kill: split on purpose.
# shellcheck disable=SC2086
for c in $CRASHES; do
  k=${c%%=*}; at=${c#*=}
  kill "$vgm"; wait "$vgm" 2>/dev/null
  LVMS_CRASH_AT="$at" start
  echo "LVMS-JOB-MARK $JOB armed-$k" >/dev/console
  wait "$vgm"; echo $? >"$GUEST_OUT/status-$k"
  gates >"$GUEST_OUT/held-$k.txt"
  start
  i=0
  while gates | grep -q Suspended; do
    i=$((i+1)); [ $i -gt 240 ] && fail "a gate stayed suspended after the $k kill" 41; sleep 0.5
  done
  for v in data wal; do
    timeout 60 sh -c "echo $k >$M/$v/after-$k && sync $M/$v/after-$k" || fail "$v not writable after the $k kill" 42
  done
  echo ok >"$GUEST_OUT/writable-$k"
  check_groups $((ngroups + 1))
  check "c$k"
  echo "LVMS-JOB-MARK $JOB crashed-$k" >/dev/console
done
# A member's lvcreate that never returns (HANG: the deadline in seconds; empty: not tried).
# vg-manager's host commands run through a wrapper (its --host-command-prefix, as nsenter is on
# a node) that runs each as it is, except that the first lvcreate under a hold
# (`ignore_suspended_devices`) after /tmp/hang-once appears becomes a sleep that never ends.
# The deadline kills it, the hold is released (the gates thawed), and the retried group is
# taken whole once lvcreate answers again.
if [ -n "${HANG:-}" ]; then
  kill "$vgm"; wait "$vgm" 2>/dev/null
  mkdir -p /tmp/hang-bin
  cat >/tmp/hang-bin/hang <<'EOF'
#!/bin/sh
case "$*" in *lvcreate*ignore_suspended_devices*)
  if rm /tmp/hang-once 2>/dev/null; then date +%s >/tmp/hung; exec sleep 100000; fi ;;
esac
exec "$@"
EOF
  chmod +x /tmp/hang-bin/hang
  touch /tmp/hang-once
  HOST_PREFIX=/tmp/hang-bin/hang VGM_ARGS="--host-command-timeout ${HANG}s" start
  echo "LVMS-JOB-MARK $JOB armed-hang" >/dev/console
  i=0
  until [ -e /tmp/hung ]; do
    i=$((i+1)); [ $i -gt 1200 ] && fail "no lvcreate under a hold ran within 600 s" 46; sleep 0.5
  done
  sleep 2
  gates >"$GUEST_OUT/held-hang.txt"
  i=0
  while gates | grep -q Suspended; do
    i=$((i+1)); [ $i -gt $((HANG * 2 + 240)) ] && fail "a gate stayed suspended past the deadline" 47; sleep 0.5
  done
  echo $(($(date +%s) - $(cat /tmp/hung))) >"$GUEST_OUT/thawed-after-hang"
  for v in data wal; do
    timeout 60 sh -c "echo hang >$M/$v/after-hang && sync $M/$v/after-hang" || fail "$v not writable after the deadline" 48
  done
  echo ok >"$GUEST_OUT/writable-hang"
  check_groups $((ngroups + 1))
  check chang
  grep 'did not finish within' "$GUEST_OUT/vg-manager.log" >"$GUEST_OUT/timed-out.log" || true
  # The rest of the run with the real lvcreate and no deadline of the test's.
  kill "$vgm"; wait "$vgm" 2>/dev/null
  start
  echo "LVMS-JOB-MARK $JOB hung-hang" >/dev/console
fi
touch /tmp/group-stop; wait $writer
for v in data wal; do call unpublish unpublish --claim "$NS/$v" --target $M/$v; done
gates >"$GUEST_OUT/gates-after.txt"
grep 'group snapshot taken' "$GUEST_OUT/vg-manager.log" >"$GUEST_OUT/taken.log" || true
unwatch
echo "LVMS-JOB-MARK $JOB checked" >/dev/console
tagged() { lvs --noheadings -o lv_name -S lv_tags=lvms-volume "$VG" 2>/dev/null | wc -l; }
i=0
until [ "$(tagged)" -eq 0 ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the CSI volumes were never removed" 17; sleep 1
done
