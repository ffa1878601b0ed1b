# The `after_ready` of csi-mount-crash (tests/guest/mount.rs), run by node.sh once the class
# is Ready: vg-manager SIGKILLed after mkfs and before the format's outcome, then after the
# mount and before its outcome (LVMS_CRASH_AT); kubelet's publish of the host's claim is
# retried across each restart. Then killed after an unmount, with no retry: the gate left idle
# goes at the next start. Records each life's exit status, the filesystem UUID and the
# mount count around each kill; marks `checked` and waits until the host has deleted the volume.
#
# Variables:   NS, VG, VGM, vgm (node.sh's), JOB, GUEST_OUT
# Functions:   start, fail (node.sh's)
# vgm is the pid node.sh's start sets:
# shellcheck disable=SC2154
K() { KUBECONFIG=/work/kubeconfig /work/lvms-dev kubelet "$@" --socket "$VGM/csi.sock" --timeout-secs 900; }
M=/mnt/kubelet-crash
vol() { lvs --noheadings -o lv_name -S lv_tags=lvms-volume "$VG" | tr -d ' '; }
uuid() { blockdev --flushbufs "/dev/$VG/$(vol)"; blkid -p -o export "/dev/$VG/$(vol)" | grep '^UUID=' || echo none; }
mounts() { grep -c " $M/one " /proc/self/mountinfo || true; }
killed_at() { # crash point, tag
  kill "$vgm"; wait "$vgm" 2>/dev/null
  LVMS_CRASH_AT="$1" start
  K publish --claim "$NS/one" --target $M/one >>"$GUEST_OUT/kubelet.log" 2>&1 &
  pub=$!
  wait "$vgm"; echo $? >"$GUEST_OUT/status-$2"
  uuid >"$GUEST_OUT/uuid-killed-$2"; mounts >"$GUEST_OUT/mounts-killed-$2"
  unset LVMS_CRASH_AT; start
  wait "$pub" || fail "kubelet's publish never succeeded after the $2 kill: $(tail -3 "$GUEST_OUT/kubelet.log")" 32
  uuid >"$GUEST_OUT/uuid-$2"; mounts >"$GUEST_OUT/mounts-$2"
}
killed_at 'applied:csi-node#format' format
echo "written before the kill" >$M/one/data; sync
K unpublish --claim "$NS/one" --target $M/one >>"$GUEST_OUT/kubelet.log" 2>&1 || fail unpublish 33
killed_at 'applied:csi-node#mount' mount
cat $M/one/data >"$GUEST_OUT/data-after"
# Killed after the unmount and before its gate's removal, and the unpublish not retried (as
# when an uninstall took the driver): the next start removes the idle gate before any call.
gates() { dmsetup ls | grep -c '^lvms-' || true; }
kill "$vgm"; wait "$vgm" 2>/dev/null
LVMS_CRASH_AT='applied:csi-node#unmount' start
K unpublish --claim "$NS/one" --target $M/one >>"$GUEST_OUT/kubelet.log" 2>&1 &
unpub=$!
wait "$vgm"; echo $? >"$GUEST_OUT/status-unmount"
kill "$unpub" 2>/dev/null; wait "$unpub" 2>/dev/null
mounts >"$GUEST_OUT/mounts-killed-unmount"; gates >"$GUEST_OUT/gates-killed-unmount"
unset LVMS_CRASH_AT; start
i=0
until [ "$(gates)" = 0 ]; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the idle gate stayed after the restart" 34; sleep 1
done
K unpublish --claim "$NS/one" --target $M/one >>"$GUEST_OUT/kubelet.log" 2>&1 || fail unpublish 33
echo "LVMS-JOB-MARK $JOB checked" >/dev/console
i=0
until [ -z "$(vol)" ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the CSI volume was never removed" 17; sleep 1
done
