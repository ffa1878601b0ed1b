# The `after_ready` of csi-thin (tests/guest/csi.rs), run by node.sh once the class is Ready:
# wait for the four CSI volumes the host makes (a claim, its snapshot, a restore, a clone),
# record them, mark `volumes-seen`, and wait until the host has deleted them all.
#
# Variables:   VG (node.sh's), JOB, GUEST_OUT
# Functions:   fail (node.sh's)
tagged() { lvs --noheadings -o lv_name -S lv_tags=lvms-volume "$VG" 2>/dev/null | wc -l; }
i=0
until [ "$(tagged)" -ge 4 ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the four CSI volumes never appeared" 16; sleep 1
done
lvs -a --reportformat json --units b --nosuffix \
  -o lv_name,lv_attr,lv_size,pool_lv,origin,lv_tags "$VG" >"$GUEST_OUT/lvs-csi.json"
echo "LVMS-JOB-MARK $JOB volumes-seen" >/dev/console
i=0
until [ "$(tagged)" -eq 0 ]; do
  i=$((i+1)); [ $i -gt 900 ] && fail "the CSI volumes were never removed" 17; sleep 1
done
