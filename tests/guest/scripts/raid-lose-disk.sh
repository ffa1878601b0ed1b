# After Ready, with a raid1 LV on the class (raid-lv.sh before it; tests/guest/raid.rs,
# raid-lost's `after_ready`, run by node.sh): one member disk is removed from the guest at run
# time (its PCI device removed, the kernel path of a hot-unplug); the RAID LV goes partial and
# vg-manager's next pass fails the RAID health check and waits.
#
# Variables:
#   LOST_DISK  the member disk's /dev/disk/by-id path (raid.rs exports it)
#   VG (node.sh's), GUEST_OUT
# Functions:   fail, scrape (node.sh's)
dev=$(readlink -f "$LOST_DISK"); b=${dev#/dev/}
pci=$(readlink -f "/sys/block/$b/device/..")
[ -e "$pci/remove" ] || fail "no PCI device behind $dev ($pci)" 19
echo 1 >"$pci/remove"
i=0
while [ -e "/sys/block/$b" ]; do
  i=$((i+1)); [ $i -gt 120 ] && fail "$dev still there after its PCI device was removed" 19; sleep 0.5
done
lvs -a --reportformat json -o lv_name,lv_attr,lv_health_status "$VG" >"$GUEST_OUT/lvs-lost.json" 2>/dev/null
pvs --reportformat json -o pv_name,vg_name,pv_missing >"$GUEST_OUT/pvs-lost.json" 2>/dev/null
# The host wakes vg-manager until its status shows the failure; the guest waits for the pass.
i=0
until grep -q RAIDHealthCheckFailed "$GUEST_OUT/vg-manager.log"; do
  i=$((i+1)); [ $i -gt 600 ] && fail "vg-manager never failed the RAID health check" 20; sleep 0.5
done
# The RAID gauges a Prometheus reads then (LVMSRAIDDegraded fires on health 1).
i=0
until scrape "$GUEST_OUT/metrics-lost.txt" \
  && grep -q "^lvms_raid_health_status{.*$VG.* [12]" "$GUEST_OUT/metrics-lost.txt"; do
  i=$((i+1)); [ $i -gt 240 ] && fail "lvms_raid_health_status of $VG never left 0" 21; sleep 0.5
done
