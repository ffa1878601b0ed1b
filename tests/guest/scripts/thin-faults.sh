# The `prepare` of csi-thin (tests/guest/csi.rs): the two states a SIGKILLed lvm2 leaves in
# a thin pool, made on purpose (with real lvm2 and device-mapper) at this class's first two
# snapshots, for vg-manager to repair:
# - a stray: before the first `lvcreate -s` of $VG, the pool gets a thin device under the id
#   lvm2 will give next (as a killed lvremove leaves one), so lvm2's create_snap fails ("already
#   contain thin device"; a plain thin lvcreate would silently adopt the device instead);
# - a hollow LV: the second `lvcreate -s` of $VG runs, then its LV is deactivated and its thin
#   device deleted from the pool, and it exits 137 (killed): lvm2's metadata names a device
#   the pool does not have (as a killed lvcreate leaves it).
# Other VGs' lvcreates (the group's other scenarios) pass straight through.
#
# Variables:   VG, POOL, VGM (node.sh's)
cat >"$VGM/lvcreate" <<WRAP
#!/bin/sh
vg='$VG' pool='$POOL' state='$VGM'
WRAP
cat >>"$VGM/lvcreate" <<'WRAP'
mine=no snap=no
for a in "$@"; do
  case "$a" in "$vg"/*|"$vg") mine=yes ;; -s) snap=yes ;; esac
done
[ $mine = yes ] || exec /usr/sbin/lvm lvcreate "$@"
tpool=$(echo "$vg" | sed 's/-/--/g')-$(echo "$pool" | sed 's/-/--/g')-tpool
if [ $snap = yes ] && mkdir "$state/stray-made" 2>/dev/null; then
  next=$(/usr/sbin/lvm lvs --noheadings -o thin_id "$vg" | tr -d ' ' | sort -n | tail -1)
  next=$((${next:-0} + 1))
  dmsetup message "$tpool" 0 "create_thin $next" && echo "$next" >"$state/stray-made/id"
elif [ $snap = yes ] && mkdir "$state/hollow-made" 2>/dev/null; then
  /usr/sbin/lvm lvcreate "$@" || exit $?
  for a in "$@"; do [ "${prev:-}" = -n ] && lv=$a; prev=$a; done
  id=$(/usr/sbin/lvm lvs --noheadings -o thin_id "$vg/$lv" | tr -d ' ')
  /usr/sbin/lvm lvchange -an "$vg/$lv" && dmsetup message "$tpool" 0 "delete $id" \
    && echo "$lv $id" >"$state/hollow-made/lv"
  exit 137
fi
exec /usr/sbin/lvm lvcreate "$@"
WRAP
chmod +x "$VGM/lvcreate"
# Installed in place of lvm2's symlink (atomically: other scenarios' lvm2 may be running);
# every other VG's call is passed to lvm unchanged. One scenario of the group uses it.
if [ ! -e /usr/sbin/lvcreate.lvm ]; then
  cp -P /usr/sbin/lvcreate /usr/sbin/lvcreate.lvm
  ln -s "$VGM/lvcreate" /usr/sbin/lvcreate.faults && mv -f /usr/sbin/lvcreate.faults /usr/sbin/lvcreate
fi
