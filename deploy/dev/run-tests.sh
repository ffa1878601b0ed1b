#!/usr/bin/env bash
# Every test suite, to the end (a failing binary does not stop the others), then one total.
# Called by `make test`; prerequisites come from test-deps.sh and build-test-bins.sh first.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
log=$(mktemp)
failures=$(mktemp)
start=$(date +%s)
rc=0 unreported=0
# since: seconds since the tests began (each phase says when it ended, so a CI log cut to its
# tail still shows which chain was the longest).
since() { echo "$(( $(date +%s) - start ))s"; }
cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee "$log" || rc=1
cargo test -p lvms-journal --features failpoints --test failpoints 2>&1 | tee -a "$log" || rc=1
echo "== host suites done at $(since)"
# The real-kernel tier (tests/guest, one guest per kernel; `test = false` keeps it out of the
# run above). The two kernels' groups run at once: TCG runs a guest on one host core, so on 2
# cores the second guest costs little wall time. Which scenarios run on which kernel, and the
# group snapshots' kill plan on each, is the scenario table's (tests/guest/main.rs): each group
# asks for its kernel's scenarios with `--kernel`. LVMS_GROUP_ROUNDS[_2] and LVMS_GROUP_KILLS[_2]
# override the group snapshots' rounds (5 here; 20 by hand) and kills per kernel.
#
# The real node tier (tests/node: kubelet and containerd in a 6.12 guest, lvms installed with
# helm and running as Pods) runs after the 6.12 group, every scenario on one node, the swap ones
# (LVMS itself, then the swap to lvms and back) last, on the disks lvms left clean. Two nodes at
# once slowed each other down about 2.5× (two vCPUs each on two cores): more than running one
# after the other, and a boot more (docs/testing.md). LVMS_NODE_SCENARIOS picks the node's
# scenarios (default: all of them but `demo`, `make demo`'s, in the tier's order);
# LVMS_SWAP_SCENARIOS, when set, moves those to a second node after the 6.1 group.
cargo test --test guest --test node --no-run 2>&1 | tee -a "$log" || rc=1
echo "== guest and node tiers built at $(since)"
gdir=$(mktemp -d)
# panicked_failures TAG: the tests $gdir/TAG.1 failed, if its guest kernel panicked (seen in
# CI under TCG: a slab oops in a kworker on 6.12, an int3 oops in a node's reboot); nothing
# otherwise. Those run once more in a new guest, loudly; ordinary failures never run again.
panicked_failures() {
  grep -aq 'Kernel panic - not syncing' "$gdir/$1.1" || return 0
  sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$gdir/$1.1" | tr '\n' ' '
}
# group TAG ENV... -- ARGS...: one guest group; its output streamed with the tag in front and
# kept whole in $gdir/TAG.1 (TAG.2: the rerun after a panic).
group() {
  local tag=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local t0
  t0=$(date +%s)
  env "${envs[@]}" cargo test --test guest -- "$@" 2>&1 | tee "$gdir/$tag.1" | sed -u "s/^/[$tag] /"
  echo "== [$tag] done in $(( $(date +%s) - t0 ))s, at $(since)"
  local failed
  failed=$(panicked_failures "$tag")
  [ -n "$failed" ] || return 0
  echo "== [$tag] the guest's kernel panicked (its console above): running its failed scenarios once more in a new guest: $failed"
  # shellcheck disable=SC2086 # one scenario name per word
  env "${envs[@]}" cargo test --test guest -- --exact $failed 2>&1 | tee "$gdir/$tag.2" | sed -u "s/^/[$tag, again] /"
}
kills1=() kills2=()
[ -n "${LVMS_GROUP_KILLS:-}" ] && kills1=(LVMS_GROUP_KILLS="$LVMS_GROUP_KILLS")
[ -n "${LVMS_GROUP_KILLS_2:-}" ] && kills2=(LVMS_GROUP_KILLS="$LVMS_GROUP_KILLS_2")
SWAP=${LVMS_SWAP_SCENARIOS-}
# node TAG ARGS...: one real node, its scenarios chosen by ARGS, its output tagged and kept in
# $gdir/TAG.1 as a group's.
node() {
  local tag=$1
  shift
  local t0
  t0=$(date +%s)
  cargo test --test node -- "$@" 2>&1 | tee "$gdir/$tag.1" | sed -u "s/^/[$tag] /"
  echo "== [$tag] done in $(( $(date +%s) - t0 ))s, at $(since)"
  # As a group's, on a new node (lvms's own scenarios between an install and a teardown).
  local failed
  failed=$(panicked_failures "$tag")
  [ -n "$failed" ] || return 0
  echo "== [$tag] the node's kernel panicked (its console above): running its failed scenarios once more on a new node: $failed"
  # shellcheck disable=SC2086 # one scenario name per word
  if [ "$tag" = node ]; then set -- install $failed teardown; else set -- $failed; fi
  cargo test --test node -- --exact "$@" 2>&1 | tee "$gdir/$tag.2" | sed -u "s/^/[$tag, again] /"
}
main_node=(--skip demo)
for sc in $SWAP; do main_node+=(--skip "$sc"); done
# shellcheck disable=SC2206 # one scenario name per word
[ -n "${LVMS_NODE_SCENARIOS:-}" ] && main_node=(--exact $LVMS_NODE_SCENARIOS)
{
  group k6.1 LVMS_GROUP_ROUNDS="${LVMS_GROUP_ROUNDS:-5}" "${kills1[@]}" -- --kernel 6.1
  # shellcheck disable=SC2086 # one scenario name per word
  [ -z "$SWAP" ] || node swap --exact $SWAP
} &
one=$!
{
  group k6.12 LVMS_GROUP_ROUNDS="${LVMS_GROUP_ROUNDS_2:-5}" "${kills2[@]}" \
    LVMS_GUEST_KERNEL="${LVMS_GUEST_KERNEL_2:-6.12}" -- --kernel 6.12
  node node "${main_node[@]}"
} &
two=$!
wait $one $two
# What each group counts: a panicked run's passes and its rerun's results, else its one run.
for tag in k6.1 k6.12 node swap; do
  # The swap node runs only when LVMS_SWAP_SCENARIOS names scenarios; any other missing run is
  # a failure.
  [ "$tag" = swap ] && [ -z "$SWAP" ] && continue
  final=$gdir/$tag.1
  if [ -f "$gdir/$tag.2" ]; then
    grep -aoE 'test result: [A-Za-z]+\. [0-9]+ passed' "$final" >>"$log"
    final=$gdir/$tag.2
  fi
  grep -aE 'test result:' "$final" >>"$log"
  sed -n "s/^test \(.*\) \.\.\. FAILED\$/[$tag] \1/p" "$final" >>"$failures"
  if ! grep -aq 'test result: ok' "$final"; then
    rc=1
    # A run that ended before reporting any test (its harness failed to start) is a failure
    # of its own, named with its last line: never "0 failed".
    if ! grep -aqE '^test .* \.\.\. FAILED$' "$final"; then
      unreported=$((unreported + 1))
      echo "[$tag] the run itself, before any test: $(grep -avE '^ +([0-9]+: |at )' "$final" | grep -av '^$' | tail -1 | cut -c1-200)" >>"$failures"
    fi
  fi
done
rm -rf "$gdir"
# cargo ends on whichever binary ran last; the total is the sum over every binary.
passed=$(grep -aoE 'test result: [A-Za-z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -aoE '[0-9]+ failed;' "$log" | awk -v u="$unreported" '{s+=$1} END {print s+u}')
# The host binaries' failures (the groups' were collected above): one list at the very end,
# where a CI log cut to its tail still shows every name.
sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | cat - "$failures" | sort -u >"$failures.all"
rm -f "$log" "$failures"
echo "== tests done in $(( $(date +%s) - start ))s"
if [ -s "$failures.all" ]; then
  echo "failed:"
  sed 's/^/  /' "$failures.all"
fi
rm -f "$failures.all"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] || rc=1
exit "$rc"
