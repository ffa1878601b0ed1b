# node-a of `make demo` when the host has no device-mapper: run by the real-kernel test guest
# (dash, as root; /work holds lvms and the kubeconfig; $GUEST_OUT comes back to the host).
# vg-manager builds demo-a's VG and thin pool on the guest's disk with activation on and serves
# the CSI node service; `lvms-dev kubelet` makes kubelet's calls: the PVC the host creates is
# published (formatted xfs, mounted), written, snapshotted by the host, restored into a new PVC,
# published and read back; then the guest waits for the teardown the host starts.
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
# A token that may read /metrics (demo.sh's).
. /work/metrics.env
KUBECONFIG=/work/kubeconfig /work/lvms vg-manager --node-name node-a --namespace openshift-lvm-storage \
  --host-command-prefix "" --lvmd-config /run/vgm/lvmd.yaml --journal-dir /run/vgm/journal \
  --lock-file /run/vgm/lock --diagnostics-addr 127.0.0.1:9100 --metrics-addr 127.0.0.1:9443 \
  --registration-dir off \
  --csi-node-socket /run/vgm/csi.sock >"$GUEST_OUT/vg-manager.log" 2>&1 &
vgm=$!
say "lvms vg-manager running on kernel $(uname -r), device-mapper $(dmsetup version | awk '/Driver/{print $3}')"
wait_for 600 "lvmd.yaml entry for demo-a" grep -q "volume-group: demo-a" /run/vgm/lvmd.yaml
say "vg-manager built demo-a; lvm2 and device-mapper show:"
lvs -a -o lv_name,lv_attr,lv_size,data_percent,metadata_percent,chunk_size demo-a
dmsetup ls | grep demo
say "its lvmd.yaml:"; cat /run/vgm/lvmd.yaml
step() { "$@" || { say "failed: $*"; kill $vgm; exit 1; }; }
kubelet() { KUBECONFIG=/work/kubeconfig /work/lvms-dev kubelet "$@" --socket /run/vgm/csi.sock --timeout-secs 600; }
say "kubelet's part (lvms-dev kubelet): publish PVC default/photos once it is Bound"
step kubelet publish --claim default/photos --target /mnt/photos
say "mounted: $(awk '$5 == "/mnt/photos"' /proc/self/mountinfo | sed 's/.* - //')"
df -h /mnt/photos | tail -1
echo "hello from a PVC on lvms" >/mnt/photos/hello && sync
say "wrote /mnt/photos/hello; the host snapshots the PVC now"
echo "LVMS-DEMO written"
step kubelet publish --claim default/photos-restore --target /mnt/restore
echo "written after the snapshot" >/mnt/photos/later && sync
say "the restored PVC (a thin snapshot of the snapshot) holds: $(ls /mnt/restore | tr '\n' ' ')"
say "/mnt/restore/hello reads: $(cat /mnt/restore/hello)"
say "lvm2 shows the volume, its snapshot and the restore:"
lvs -o lv_name,lv_attr,lv_size,pool_lv,origin,data_percent demo-a
say "NodeGetVolumeStats of photos: $(kubelet stats --claim default/photos --target /mnt/photos)"
step kubelet unpublish --claim default/photos-restore --target /mnt/restore
step kubelet unpublish --claim default/photos --target /mnt/photos
say "unpublished both; the host deletes the PVCs and the snapshot"
say "gauges: $(METRICS_TOKEN=$METRICS_TOKEN /work/lvms-dev scrape --port 9443 | grep '^topolvm_thinpool_size_bytes')"
echo "LVMS-DEMO shown"
wait_for 600 "teardown of demo-a (the host deletes the LVMCluster)" sh -c '! vgs demo-a'
say "vg-manager removed pool and VG; device-mapper devices left: $(dmsetup ls | grep -c demo-a)"
kill $vgm; wait $vgm
cp -a /run/vgm/journal "$GUEST_OUT/journal"
