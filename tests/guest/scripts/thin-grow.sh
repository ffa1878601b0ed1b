# The `after_ready` of thin (tests/guest/thin.rs), run by node.sh once the class is Ready: the
# pool's size as lvm2 reports it (bytes), waited for until it changes after the day-2 edit adds
# a second disk, then recorded with the gauges vg-manager exports.
#
# Variables:   VG, POOL (node.sh's), GUEST_OUT
# Functions:   fail, scrape (node.sh's)
# POOL comes from node.sh, `pool` is this file's (SC2153 takes one for a misspelling of the other):
# shellcheck disable=SC2153
num() { lvs --noheadings --units b --nosuffix -o "$1" "$2" | tr -d ' '; }
vgsize() { vgs --noheadings --units b --nosuffix -o vg_size "$VG" | tr -d ' '; }
one_disk=$(vgsize)
# Grown: the VG has the second disk and the pool is back at >= 78 % of it.
i=0
until [ "$(vgsize)" -gt "$one_disk" ] && [ $(( $(num lv_size "$VG/$POOL") * 100 )) -ge $(( $(vgsize) * 78 )) ]; do
  i=$((i+1)); [ $i -gt 600 ] && fail "the pool never grew with the second disk" 13; sleep 0.5
done
lvs -a --reportformat json --units b --nosuffix \
  -o lv_name,lv_attr,lv_size,lv_metadata_size,chunk_size "$VG" >"$GUEST_OUT/lvs-grown.json"
vgs --reportformat json --units b --nosuffix -o vg_name,vg_size "$VG" >"$GUEST_OUT/vgs-grown.json"
# The pass that extended the pool sets the gauges when it ends (several lvm2 commands later).
pool=$(num lv_size "$VG/$POOL")
gauge() { grep "^topolvm_thinpool_size_bytes{.*$VG" "$1" | awk '{printf "%.0f", $NF}'; }
i=0
until scrape "$GUEST_OUT/metrics-grown.txt" \
  && [ "$(gauge "$GUEST_OUT/metrics-grown.txt")" = "$pool" ]; do
  i=$((i+1)); [ $i -gt 120 ] && fail "the pool gauge is not $pool 60 s after the extension" 15; sleep 0.5
done
