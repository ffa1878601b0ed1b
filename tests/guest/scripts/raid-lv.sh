# What TopoLVM does with the class's lvmd.yaml `lvcreate-options`, for the raid scenarios
# (tests/guest/raid.rs; part of their `after_ready`, run by node.sh once the class is Ready): an
# LV made with exactly those options on the VG vg-manager built, recorded, then removed again
# (raid-lose-disk.sh may follow, with KEEP_LV=1). $OPTS holds the options once read.
#
# Variables (raid.rs exports them):
#   RAID_MODULE  a RAID personality to load first (raid456), or unset
#   KEEP_LV      1: the LV stays (a member disk is lost under it next); unset: removed
#   VG, VGM (node.sh's), GUEST_OUT
# Functions:   fail (node.sh's)
if [ -n "${RAID_MODULE:-}" ]; then modprobe "$RAID_MODULE"; fi
modprobe dm-raid
OPTS=$(awk '/lvcreate-options:/{f=1;next} f&&/^ *- /{sub(/^ *- /,""); gsub(/["\047]/,""); printf "%s ",$0; next} {f=0}' "$VGM/lvmd.yaml")
[ -n "$OPTS" ] || fail "no lvcreate-options in lvmd.yaml" 16
echo "$OPTS" >"$GUEST_OUT/lvcreate-options.txt"
# The options are separate words: split on purpose.
# shellcheck disable=SC2086
lvcreate -y $OPTS -L 16m -n raidlv "$VG" >"$GUEST_OUT/lvcreate.txt" 2>&1 \
  || fail "lvcreate with the class's options ($OPTS) failed: $(cat "$GUEST_OUT/lvcreate.txt")" 16
lvs -a --reportformat json -o lv_name,lv_layout,lv_attr,lv_health_status,devices "$VG" >"$GUEST_OUT/lvs-raid.json"
# Then removed again, so the teardown can run (it refuses while user volumes exist); kept when a
# member disk is lost under it next.
if [ "${KEEP_LV:-}" != 1 ]; then lvremove -y "$VG/raidlv" >/dev/null; fi
