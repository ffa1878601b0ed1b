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
# The real-kernel tier again on the second kernel of the matrix (the first run used Debian's
# current cloud kernel, 6.1): snapshot behaviour differs between them. csi-sanity (the CSI
# API contract, ~9.5 min under emulation) runs on the first kernel only: what a kernel changes
# (format, mount, growth, snapshots of mounted volumes) is in csi-mount, csi-mount-crash and
# csi-thin, which run on both.
LVMS_GUEST_KERNEL=${LVMS_GUEST_KERNEL_2:-6.12} cargo test --test guest -- --skip sanity 2>&1 | tee -a "$log" || rc=1
# cargo ends on whichever binary ran last; the total is the sum over every binary.
passed=$(grep -oE 'test result: [A-Za-z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -oE '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
rm -f "$log"
echo "== tests done in $(( $(date +%s) - start ))s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] || rc=1
exit "$rc"
