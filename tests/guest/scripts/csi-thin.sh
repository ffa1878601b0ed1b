# The `after_ready` of csi-thin (tests/guest/csi.rs), run by node.sh once the class is Ready:
# wait for the four CSI volumes the host makes (a claim, its snapshot, a restore, a clone),
# record them (and what thin-faults.sh made, and the pool's device ids beside lvm2's), mark
# `volumes-seen`, and wait until the host has deleted them all.
#
# Variables:   VG, POOL, VGM (node.sh's), JOB, GUEST_OUT
# Functions:   fail (node.sh's)
tagged() { lvs --noheadings -o lv_name -S lv_tags=lvms-volume "$VG" 2>/dev/null | wc -l; }
i=0
until [ "$(tagged)" -ge 4 ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the four CSI volumes never appeared" 16; sleep 1
done
lvs -a --reportformat json --units b --nosuffix \
  -o lv_name,lv_attr,lv_size,pool_lv,origin,lv_tags "$VG" >"$GUEST_OUT/lvs-csi.json"
cat "$VGM/stray-made/id" >"$GUEST_OUT/stray-id" 2>/dev/null || : >"$GUEST_OUT/stray-id"
cat "$VGM/hollow-made/lv" >"$GUEST_OUT/hollow-lv" 2>/dev/null || : >"$GUEST_OUT/hollow-lv"
# The device ids the kernel's pool holds (from a metadata snapshot of the live pool), then
# those lvm2's thin volumes name: one line each, sorted.
dm() { echo "$1" | sed 's/-/--/g'; }
tpool="$(dm "$VG")-$(dm "$POOL")-tpool"
dmsetup message "$tpool" 0 reserve_metadata_snap
{ thin_dump -m "/dev/mapper/$(dm "$VG")-$(dm "$POOL")_tmeta" \
    | sed -n 's/.*<device dev_id="\([0-9]*\)".*/\1/p' | sort -n | tr '\n' ' '; echo; } >"$GUEST_OUT/thin-ids"
dmsetup message "$tpool" 0 release_metadata_snap
lvs --noheadings -o thin_id -S segtype=thin "$VG" | tr -d ' ' | sort -n | tr '\n' ' ' >>"$GUEST_OUT/thin-ids"
echo "LVMS-JOB-MARK $JOB volumes-seen" >/dev/console
i=0
until [ "$(tagged)" -eq 0 ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the CSI volumes were never removed" 17; sleep 1
done
