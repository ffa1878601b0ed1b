# The guest half of one node scenario (tests/guest/node.rs, `run_node`): `lvms vg-manager` for
# node $NODE with activation on; the wait until it has built the class (lvmd.yaml names it and
# lvm2 shows it); what lvm2, device-mapper and its metrics show then, recorded in $GUEST_OUT;
# the scenario's own shell; the `teardown` mark; the host's deletion waited out.
#
# Variables (node.rs exports them):
#   NODE      the Node vg-manager runs as (--node-name)
#   NS        the scenario's namespace (--namespace)
#   VG        the class's VG (its device class name)
#   POOL      the class's thin pool, waited for instead of the VG; empty: a thick class
#   DIAG_PORT vg-manager's probe port on 127.0.0.1 (one per scenario of the guest)
#   METRICS_PORT, METRICS_TOKEN  its /metrics port (HTTPS, self-signed) and a bearer token
#             that may read it
#   CRASH_AT  LVMS_CRASH_AT of a first vg-manager life that must end in SIGKILL (its exit
#             status lands in first-life-status); a second life without it then converges.
#             Empty: no such life.
#   KILLS_CREATING, KILL_SEED_CREATING, KILLS_DELETING, KILL_SEED_DELETING
#             the seeded random-kill soak: how many SIGKILLs from the class's first pass on
#             until it is Ready, and after the teardown mark, each phase from its own seed.
#             Empty: no kills.
#   TEARDOWN  1: wait for the host's deletion to remove pool, VG and lvmd.yaml; 0: none
#   JOB, GUEST_OUT  the group's (testkit/src/guest/group.rs): the job's name, its output dir
# Functions (node.rs defines them from the scenario's own script files; `:` when it has none):
#   prepare      run before vg-manager starts (e.g. a device-mapper child to wipe)
#   after_ready  run once the class is Ready and recorded, before the teardown mark
# For those two this file sets VGM (the scenario's vg-manager directory), DIAG (its probe
# address) and vgm (the running vg-manager's pid), and defines start (VGM_ARGS, HOST_PREFIX:
# more flags and a command wrapper for that life), fail, scrape, watch and unwatch.
set -u
modprobe dm-thin-pool
VGM=/run/vgm-$JOB DIAG=127.0.0.1:$DIAG_PORT METRICS=127.0.0.1:$METRICS_PORT
export METRICS_TOKEN
# scrape FILE: vg-manager's /metrics into FILE, as a Prometheus with a reader's token would
# (lvms-dev's rustls client: busybox's wget speaks a TLS that rustls refuses, see lvms-dev).
scrape() { /work/lvms-dev scrape --port "$METRICS_PORT" >"$1" 2>>"$GUEST_OUT/scrape.log"; }
mkdir -p "$VGM"
prepare
# VGM_ARGS: more flags for this life, split on blanks (e.g. a --host-command-timeout);
# HOST_PREFIX: its --host-command-prefix (a wrapper every host command runs through).
# shellcheck disable=SC2086
start() {
  KUBECONFIG=/work/kubeconfig RUST_LOG=info /work/lvms vg-manager --node-name "$NODE" \
    --namespace "$NS" --host-command-prefix "${HOST_PREFIX:-}" --lvmd-config "$VGM/lvmd.yaml" \
    --journal-dir "$VGM/journal" --lock-file "$VGM/lock" \
    --diagnostics-addr "$DIAG" --metrics-addr "$METRICS" --debounce-ms 20 --csi-node-socket "$VGM/csi.sock" \
    --registration-dir off ${VGM_ARGS:-} \
    >>"$GUEST_OUT/vg-manager.log" 2>&1 &
  vgm=$!
}
fail() { echo "guest: $1"; tail -30 "$GUEST_OUT/vg-manager.log"; kill $vgm; exit "$2"; }
# Every 120 s until `unwatch`, on the console (a stall under emulation is diagnosed from it
# alone): the gates, lvm2 and kubelet processes, vg-manager's last lines, then what `$1` prints.
# (The scenario's own shell calls watch and unwatch: SC2317. busybox's ps, no pgrep: SC2009.)
# shellcheck disable=SC2317,SC2009
watch() {
  ( while sleep 120; do { echo "WATCH $JOB $(date +%T)"
      dmsetup info -c --noheadings --separator ' ' -o name,open,suspended | grep '^lvms-'
      ps -o pid,stat,args | grep -v ' \[' | grep -E 'lvm|/usr/sbin|kubelet| D ' | cut -c1-160
      tail -n 6 "$GUEST_OUT/vg-manager.log" | cut -c1-400
      eval "${1:-}"; } >/dev/console 2>&1; done ) &
  watcher=$!
}
# shellcheck disable=SC2317
unwatch() { kill "$watcher" 2>/dev/null; }
# The soak's kill loop (`kill_loop SEED COUNT PHASE`): each life lives a seeded random
# 0.2–2.7 s, then SIGKILL, then a new life. A life needs ~1–2 s under emulation to sync its
# caches and a step takes ~0.5–1 s, so kills land in start-up, between steps and inside them.
# The delays come from a 31-bit LCG in shell arithmetic (a seed replays them) and land in
# `$GUEST_OUT/kills`.
kill_loop() {
  x=$(( $1 % 2147483648 )); n=0
  while [ $n -lt "$2" ]; do
    x=$(( (x * 1103515245 + 12345) % 2147483648 )); ms=$(( 200 + x % 2500 ))
    sleep "$(( ms / 1000 )).$(printf %03d $(( ms % 1000 )))"
    kill -9 $vgm; wait $vgm 2>/dev/null
    echo "$3 kill $n after $ms ms" >>"$GUEST_OUT/kills"
    n=$((n+1)); start
  done
}
if [ -n "$CRASH_AT" ]; then
  LVMS_CRASH_AT=$CRASH_AT start
  wait $vgm
  echo $? >"$GUEST_OUT/first-life-status"
fi
start
if [ -n "$KILLS_CREATING" ]; then
  # The class's first pass, then lives cut short until it is built.
  i=0; until grep -q "vg/$VG" "$GUEST_OUT/vg-manager.log"; do i=$((i+1)); [ $i -gt 3600 ] && fail "no pass on $VG" 21; sleep 0.5; done
  kill_loop "$KILL_SEED_CREATING" "$KILLS_CREATING" creating
fi
# The host side comes when the scenarios before it are done (they take turns), so this wait
# can be long (sanity comes after group-snapshot: ~35 min; the group's own deadline bounds
# it); it reads a file, never lvm2 (every lvm2 command costs ~0.5 s of the one vCPU the
# group's jobs share). lvmd.yaml names the class once vg-manager has built it.
i=0
until grep -q "volume-group: $VG" "$VGM/lvmd.yaml" 2>/dev/null; do
  i=$((i+1)); [ $i -gt 7200 ] && fail "no lvmd.yaml entry for $VG after 3600 s" 12; sleep 0.5
done
# What Ready means in lvm2: the pool of a thin class, the VG of a thick one.
if [ -n "$POOL" ]; then ready_cmd=lvs ready=$VG/$POOL; else ready_cmd=vgs ready=$VG; fi
"$ready_cmd" "$ready" >/dev/null 2>&1 || fail "lvmd.yaml names $VG but lvm2 has no $ready_cmd $ready" 10
lvs -a --reportformat json --units b --nosuffix \
  -o lv_name,lv_attr,lv_size,lv_metadata_size,chunk_size "$VG" >"$GUEST_OUT/lvs.json"
vgs --reportformat json --units b --nosuffix -o vg_name,vg_size "$VG" >"$GUEST_OUT/vgs.json"
dmsetup ls >"$GUEST_OUT/dmsetup-ready.txt" 2>&1
cp "$VGM/lvmd.yaml" "$GUEST_OUT/lvmd.yaml"
# The class's gauges are set when the pass that made it Ready ends.
i=0
until scrape "$GUEST_OUT/metrics-ready.txt" \
  && grep -q "topolvm_volumegroup_size_bytes{.*$VG" "$GUEST_OUT/metrics-ready.txt"; do
  i=$((i+1)); [ $i -gt 240 ] && fail "no gauges for $VG 120 s after Ready" 14; sleep 0.5
done
after_ready
echo "LVMS-JOB-MARK $JOB teardown" >/dev/console
if [ -n "$KILLS_DELETING" ]; then
  kill_loop "$KILL_SEED_DELETING" "$KILLS_DELETING" deleting
fi
if [ "$TEARDOWN" = 1 ]; then
  # The guest's half of the teardown: the host deletes the LVMCluster; vg-manager removes pool
  # and VG, then the class's lvmd.yaml entry (here the file, with its last class), so the wait
  # reads the file.
  i=0
  while [ -e "$VGM/lvmd.yaml" ]; do
    i=$((i+1)); [ $i -gt 1200 ] && { echo kept >"$GUEST_OUT/lvmd-kept"; fail "lvmd.yaml still there 600 s later" 11; }; sleep 0.5
  done
  vgs "$VG" >/dev/null 2>&1 && fail "lvmd.yaml is gone but VG $VG is still there" 11
  dmsetup ls >"$GUEST_OUT/dmsetup-after.txt" 2>&1
fi
kill $vgm; wait $vgm
cp -a "$VGM/journal" "$GUEST_OUT/journal"
exit 0
