# The `after_ready` of thin-validate (tests/guest/thin.rs), run by node.sh once the class is
# Ready: the pool is deactivated behind vg-manager's back (as after a reboot without
# autoactivation) while vg-manager is down; the restarted vg-manager's first pass validates the
# pool (LVMS `validateLVs`), finds it inactive and activates it.
#
# Variables:   VG, POOL, vgm (node.sh's), GUEST_OUT
# Functions:   start, fail (node.sh's)
# vgm is the pid node.sh's start sets:
# shellcheck disable=SC2154
attr() { lvs --noheadings -o lv_attr "$VG/$POOL" | tr -d ' '; }
kill "$vgm"; wait "$vgm"
lvchange -an "$VG/$POOL" || fail "lvchange -an of the pool failed" 17
attr >"$GUEST_OUT/attr-inactive"
dmsetup ls >"$GUEST_OUT/dmsetup-inactive.txt" 2>&1
start
i=0
until [ "$(attr | cut -c5)" = a ]; do
  i=$((i+1)); [ $i -gt 600 ] && fail "vg-manager never activated the pool again" 18; sleep 0.5
done
attr >"$GUEST_OUT/attr-active"
