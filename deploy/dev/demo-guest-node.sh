# node-a of `make demo` when the host has no device-mapper: run by the real-kernel test guest
# (dash, as root; /work holds lvms and the kubeconfig; $GUEST_OUT comes back to the host).
# vg-manager builds demo-a's VG and thin pool on the guest's disk with activation on; the script
# shows them, cuts a thin volume from the pool as TopoLVM would for a PVC (xfs, mounted,
# written), removes it, and waits for the teardown the host starts.
set -u
say() { echo "node-a: $*"; }
wait_for() { # seconds, description, test...
  n=$(($1 * 2)); what=$2; shift 2; i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i+1)); [ $i -gt $n ] && { say "no $what after $((n / 2)) s; vg-manager's log:"; tail -20 "$GUEST_OUT/vg-manager.log"; exit 1; }
    sleep 0.5
  done
}
modprobe dm-thin-pool
mkdir -p /run/vgm
# make traces: the OTLP endpoint, through the guest's forward to the host's Jaeger.
[ -f /work/otel.env ] && . /work/otel.env
KUBECONFIG=/work/kubeconfig /work/lvms vg-manager --node-name node-a --namespace openshift-lvm-storage \
  --host-command-prefix "" --lvmd-config /run/vgm/lvmd.yaml --journal-dir /run/vgm/journal \
  --lock-file /run/vgm/lock --diagnostics-addr 127.0.0.1:9100 --registration-dir off \
  >"$GUEST_OUT/vg-manager.log" 2>&1 &
vgm=$!
say "lvms vg-manager running on kernel $(uname -r), device-mapper $(dmsetup version | awk '/Driver/{print $3}')"
wait_for 600 "lvmd.yaml entry for demo-a" grep -q "volume-group: demo-a" /run/vgm/lvmd.yaml
say "vg-manager built demo-a; lvm2 and device-mapper show:"
lvs -a -o lv_name,lv_attr,lv_size,data_percent,metadata_percent,chunk_size demo-a
dmsetup ls | grep demo
say "its lvmd.yaml:"; cat /run/vgm/lvmd.yaml
say "a thin volume from the pool (what TopoLVM does for a PVC), formatted xfs, mounted, written:"
step() { "$@" || { say "failed: $*"; kill $vgm; exit 1; }; }
# xfs needs 300 MB; a thin volume only takes pool space for what is written.
step lvcreate -q -y -T demo-a/thin-pool-1 -V 320m -n demo-volume
step mkfs.xfs -q /dev/demo-a/demo-volume
mkdir -p /mnt/demo
step mount /dev/demo-a/demo-volume /mnt/demo
echo "written in the guest" >/mnt/demo/hello && sync
df -h /mnt/demo | tail -1
lvs -o lv_name,pool_lv,lv_size,data_percent demo-a
step umount /mnt/demo
# vg-manager refuses to tear down a class while user volumes exist (as LVMS does).
step lvremove -q -y demo-a/demo-volume
say "gauges: $(wget -qO- http://127.0.0.1:9100/metrics | grep '^topolvm_thinpool_size_bytes')"
echo "LVMS-DEMO shown"
wait_for 600 "teardown of demo-a (the host deletes the LVMCluster)" sh -c '! vgs demo-a'
say "vg-manager removed pool and VG; device-mapper devices left: $(dmsetup ls | grep -c demo-a)"
kill $vgm; wait $vgm
cp -a /run/vgm/journal "$GUEST_OUT/journal"
