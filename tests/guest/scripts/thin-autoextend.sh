# The `after_ready` of thin-autoextend (tests/guest/thin.rs), run by node.sh once the class is
# Ready: a writer fills a thin volume of the pool 4 MiB a second, past the pool's first size;
# each write must complete (a full pool queues writes and then fails them), so the pool must
# have been extended before it filled, even though the vg-manager life that makes the first
# extension is SIGKILLed after its lvextend and before its outcome (its exit status lands in
# extend-kill-status; the next life replays). Records the pool's size before and after. Then the
# writer goes on until the VG has nothing left to give and the pool is 95 % full: the `pool-full`
# mark, on which the host checks the class's capacity, switches capacityFollowsUsage off and asks
# for a new volume, which vg-manager must refuse (its log says so).
#
# Variables:   VG, POOL, vgm (node.sh's), JOB, GUEST_OUT
# Functions:   fail, start (node.sh's; start sets vgm)
# vgm is the pid node.sh's start sets:
# shellcheck disable=SC2154
num() { lvs --noheadings --units b --nosuffix -o "$1" "$2" | tr -d ' '; }
# The pool is made as LVMS makes it (`-l 40%FREE`: metadata and spare counted in), and a later
# pass grows its data to 40 % of the VG, a sizePercent growth, not an autoextend. Wait for that
# share (40 % rounded up to an extent) before the crash point is armed, so the kill meets the
# first autoextend and nothing else.
share=$(vgs --noheadings --units b --nosuffix -o vg_size,vg_extent_size "$VG" \
  | awk '{ w = int(($1 * 40 + 99) / 100); printf "%.0f", int((w + $2 - 1) / $2) * $2 }')
i=0
until [ "$(num lv_size "$VG/$POOL")" -ge "$share" ]; do
  i=$((i + 1)); [ $i -gt 240 ] && fail "the pool never reached its 40 % share ($share bytes): $(num lv_size "$VG/$POOL")" 28
  sleep 0.5
done
first=$(num lv_size "$VG/$POOL")
# A thin volume made here, not through lvms: the writer needs a device, not a claim.
lvcreate -q -y -T "$VG/$POOL" -V 1g -n writer >"$GUEST_OUT/writer-lvcreate.txt" 2>&1 \
  || fail "lvcreate of the writer's volume: $(cat "$GUEST_OUT/writer-lvcreate.txt")" 21
# A vg-manager life that dies (SIGKILL) once its first autoextend's lvextend has run, before
# its outcome: the next life's replay must find the pool at its target and publish the Event.
kill "$vgm"; wait "$vgm" 2>/dev/null
LVMS_CRASH_AT="applied:vg/$VG#lvextend-thin-pool" start
want=$(( first * 18 / 10 / 1048576 ))
written=0
while [ "$written" -lt "$want" ]; do
  if [ ! -e "$GUEST_OUT/extend-kill-status" ] && ! kill -0 "$vgm" 2>/dev/null; then
    wait "$vgm"; echo $? >"$GUEST_OUT/extend-kill-status"; start
  fi
  timeout 30 dd if=/dev/urandom of="/dev/$VG/writer" bs=1M count=4 seek="$written" \
      oflag=direct conv=notrunc status=none \
    || fail "a write failed or hung at $written MiB: pool $(lvs --noheadings -o lv_size,data_percent,metadata_percent "$VG/$POOL")" 22
  written=$((written + 4))
  echo "$written $(num lv_size "$VG/$POOL") $(num data_percent "$VG/$POOL")" >>"$GUEST_OUT/autoextend-trace.txt"
  sleep 1
done
last=$(num lv_size "$VG/$POOL")
[ "$last" -gt "$first" ] || fail "the pool never grew: $first bytes" 23
[ -e "$GUEST_OUT/extend-kill-status" ] || fail "vg-manager never reached its autoextend's crash point" 27
echo "$first $last $written" >"$GUEST_OUT/autoextend.txt"
# On, 4 MiB at a time (under 1 % of the grown pool, so it stops short of full), until the pool is
# at 95 % data with the VG's extents all given to it.
i=0
while :; do
  d=$(num data_percent "$VG/$POOL"); d=${d%%.*}
  [ "$d" -ge 95 ] && break
  i=$((i + 1)); [ $i -gt 400 ] && fail "the pool never reached 95%: $(lvs --noheadings -o lv_size,data_percent "$VG/$POOL")" 25
  timeout 30 dd if=/dev/urandom of="/dev/$VG/writer" bs=1M count=4 seek="$written" \
      oflag=direct conv=notrunc status=none \
    || fail "a write failed or hung at $written MiB filling the pool: $(lvs --noheadings -o lv_size,data_percent "$VG/$POOL")" 22
  written=$((written + 4))
done
echo "$(num lv_size "$VG/$POOL") $(num data_percent "$VG/$POOL") $(vgs --noheadings --units b --nosuffix -o vg_free "$VG" | tr -d ' ')" >"$GUEST_OUT/pool-full.txt"
echo "LVMS-JOB-MARK $JOB pool-full" >/dev/console
# The host's new volume, refused by vg-manager while the pool is this full.
i=0
until grep -q "new and larger thin volumes are refused" "$GUEST_OUT/vg-manager.log"; do
  i=$((i + 1)); [ $i -gt 1200 ] && fail "no volume refused 600 s after the pool-full mark" 26; sleep 0.5
done
grep "new and larger thin volumes are refused" "$GUEST_OUT/vg-manager.log" | head -1 >"$GUEST_OUT/refused.txt"
lvremove -q -y "$VG/writer" || fail "lvremove of the writer's volume" 24
