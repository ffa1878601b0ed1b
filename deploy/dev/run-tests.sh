#!/usr/bin/env bash
# Every test suite, to the end (a failing binary does not stop the others), then one total.
# Called by `make test`; prerequisites come from test-deps.sh and build-test-bins.sh first.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=$(mktemp)
start=$(date +%s)
rc=0
cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee "$log" || rc=1
cargo test -p lvms-journal --features failpoints --test failpoints 2>&1 | tee -a "$log" || rc=1
# The real-kernel tier (tests/guest, one guest per kernel; `test = false` keeps it out of the
# run above). Each scenario runs on one kernel, except what the kernel changes under lvms's own
# code: csi-mount (format, mount, growth through a gate, snapshots of mounted volumes) and
# group-snapshot (the hold: suspended gates under frozen filesystems) run on both. 6.1 (Debian's
# current cloud kernel) takes the journal-replay and API-contract scenarios (the SIGKILL ones,
# the soak, csi-thin, csi-sanity), 6.12 the device-mapper targets (thin-pool validation, RAID,
# forceWipe of a dm child). group-snapshot takes 5 groups under the writer on each; its three
# kills run on 6.1, the release kill (the one a kernel may answer differently) on 6.12. The
# acceptance figures (20 groups on each kernel) come from the commands in the README.
guest() { cargo test --test guest -- "$@" 2>&1 | tee -a "$log" || rc=1; }
second="--exact csi-mount group-snapshot thin-validate wipe raid1 raid5 raid-lost"
LVMS_GROUP_ROUNDS=${LVMS_GROUP_ROUNDS:-5} guest --skip thin-validate --skip wipe --skip raid
LVMS_GROUP_ROUNDS=${LVMS_GROUP_ROUNDS_2:-5} LVMS_GROUP_KILLS=${LVMS_GROUP_KILLS_2:-release} \
  LVMS_GUEST_KERNEL=${LVMS_GUEST_KERNEL_2:-6.12} guest $second
# cargo ends on whichever binary ran last; the total is the sum over every binary.
passed=$(grep -oE 'test result: [A-Za-z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -oE '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
rm -f "$log"
echo "== tests done in $(( $(date +%s) - start ))s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] || rc=1
exit "$rc"
