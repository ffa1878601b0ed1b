# The `after_ready` of thin-autoextend (tests/guest/thin.rs), run by node.sh once the class is
# Ready: a writer fills a thin volume of the pool 2 MiB a second, past the pool's first size;
# each write must complete (a full pool queues writes and then fails them), so the pool must
# have been extended before it filled. Records the pool's size before and after.
#
# Variables:   VG, POOL (node.sh's), GUEST_OUT
# Functions:   fail (node.sh's)
num() { lvs --noheadings --units b --nosuffix -o "$1" "$2" | tr -d ' '; }
first=$(num lv_size "$VG/$POOL")
# A thin volume made here, not through lvms: the writer needs a device, not a claim.
lvcreate -q -y -T "$VG/$POOL" -V 400m -n writer >"$GUEST_OUT/writer-lvcreate.txt" 2>&1 \
  || fail "lvcreate of the writer's volume: $(cat "$GUEST_OUT/writer-lvcreate.txt")" 21
want=$(( first * 18 / 10 / 1048576 ))
written=0
while [ "$written" -lt "$want" ]; do
  timeout 30 dd if=/dev/urandom of="/dev/$VG/writer" bs=1M count=2 seek="$written" \
      oflag=direct conv=notrunc status=none \
    || fail "a write failed or hung at $written MiB: pool $(lvs --noheadings -o lv_size,data_percent,metadata_percent "$VG/$POOL")" 22
  written=$((written + 2))
  echo "$written $(num lv_size "$VG/$POOL") $(num data_percent "$VG/$POOL")" >>"$GUEST_OUT/autoextend-trace.txt"
  sleep 1
done
last=$(num lv_size "$VG/$POOL")
[ "$last" -gt "$first" ] || fail "the pool never grew: $first bytes" 23
echo "$first $last $written" >"$GUEST_OUT/autoextend.txt"
lvremove -q -y "$VG/writer" || fail "lvremove of the writer's volume" 24
