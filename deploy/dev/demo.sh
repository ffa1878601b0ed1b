#!/usr/bin/env bash
# Local demo of the whole system: a real control plane on loopback, the lvms CRDs,
# `lvms operator`, and one `lvms vg-manager` per simulated node. An LVMCluster goes to Ready on
# real lvm2 volume groups, then is deleted (ordered teardown). Needs root, lvm2, kubectl.
#
# node-b runs on this host with a loop-device disk. node-a runs where device-mapper works, so
# its class is a thin class with a live pool: on this host when it has device-mapper, otherwise
# (containers, CI) in the real-kernel test guest (QEMU, Debian cloud kernel; built once into
# ~/.cache/lvms-test-bins), reaching the API server through one loopback forward. There a PVC
# goes all the way: csi-provisioner and lvms's CSI controller make its thin LV, the node service
# (called by `lvms-dev kubelet`, kubelet's part) formats and mounts it, a file is written, the
# real snapshot-controller and csi-snapshotter take a VolumeSnapshot, a PVC restored from it is
# mounted and the file read back.
# Then a PVC on node-b's class (lvm2 metadata only on this host) shows Bound, its LogicalVolume,
# the LV in lvs, the node's capacity annotation before and after, and the volume's story in the
# node journal.
# LVMS_DEMO_GUEST=1 / 0 forces the guest on / off. Cleans up on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kubectl >/dev/null || { echo "demo: kubectl is needed (apt-get install -y kubernetes-client, or any kubectl)" >&2; exit 1; }
command -v vgcreate >/dev/null || [ -x /usr/sbin/vgcreate ] || { echo "demo: lvm2 is needed (apt-get install -y lvm2)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "demo: run as root (it creates loop devices)" >&2; exit 1; }
export LVMS_DEV_DIR=${LVMS_DEV_DIR:-/tmp/lvms-demo-$$}
export LVM_SUPPRESS_FD_WARNINGS=1
NS=openshift-lvm-storage
if [ -z "${LVMS_DEMO_GUEST:-}" ]; then
  if [ -e /dev/mapper/control ] && dmsetup version >/dev/null 2>&1; then LVMS_DEMO_GUEST=0; else LVMS_DEMO_GUEST=1; fi
fi
if [ "$LVMS_DEMO_GUEST" = 1 ]; then
  command -v qemu-system-x86_64 >/dev/null || { echo "demo: this host has no device-mapper and node-a runs in a QEMU guest: apt-get install -y --no-install-recommends qemu-system-x86 (deploy/dev/test-deps.sh does it)" >&2; exit 1; }
fi
# No device-mapper in containers/CI: lvm2 metadata only (drop this on a real host for thin pools).
LVMCONF='global{activation=0} devices{use_devicesfile=0 obtain_device_list_from_udev=0} activation{udev_sync=0 udev_rules=0}'
LINKS=/dev/lvms-demo-$$
cargo build -q --bin lvms
LVMS=target/debug/lvms
pids=() loops=()
cleanup() {
  # pkill -P: the guest runner's QEMU goes with it.
  for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for vg in demo-a demo-b; do vgremove --config "$LVMCONF" -f "$vg" >/dev/null 2>&1 || true; done
  for l in "${loops[@]}"; do pvremove --config "$LVMCONF" -ff -y "$l" >/dev/null 2>&1 || true; losetup -d "$l" || true; done
  rm -rf "$LINKS"
  deploy/dev/control-plane.sh down
}
trap cleanup EXIT
eval "$(deploy/dev/control-plane.sh up)"
kubectl create namespace "$NS"

echo "--- an invalid LVMCluster is rejected by the API server (CEL in the CRD):"
kubectl -n "$NS" apply -f - <<'YAML' || true
apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMCluster
metadata: {name: invalid}
spec:
  storage:
    deviceClasses:
    - {name: a, default: true, deviceSelector: {paths: [/dev/loop10]}}
    - {name: b, default: true, deviceSelector: {paths: [/dev/loop11]}}
YAML

mkdir -p "$LINKS" "$LVMS_DEV_DIR/disks"
node_objects() {
  kubectl create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: $1, labels: {kubernetes.io/hostname: $1}}
YAML
  kubectl patch node "$1" --type=merge -p '{"spec":{"taints":[]}}' >/dev/null
  # No kubelet here: register topolvm.io on the node's CSINode, with TopoLVM's topology key
  # and its label on the Node, as kubelet would from NodeGetInfo.
  kubectl apply --server-side -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: $1}
spec: {drivers: [{name: topolvm.io, nodeID: $1, topologyKeys: [topology.topolvm.io/node]}]}
YAML
  kubectl label node "$1" "topology.topolvm.io/node=$1" >/dev/null
}
host_node() { # node: a loop-device disk and a vg-manager on this host (lvm2 metadata only)
  local node=$1
  truncate -s 512M "$LVMS_DEV_DIR/disks/$node.img"
  l=$(losetup -f --show "$LVMS_DEV_DIR/disks/$node.img"); loops+=("$l")
  ln -s "$l" "$LINKS/$node-disk1"
  echo "--- $node: disk $LINKS/$node-disk1 -> $l; vg-manager on this host in $LVMS_DEV_DIR/$node"
  node_objects "$node"
  mkdir -p "$LVMS_DEV_DIR/$node"
  NODE_NAME=$node NAMESPACE=$NS $LVMS vg-manager --host-command-prefix "" --lvm-config "$LVMCONF" \
    --lvmd-config "$LVMS_DEV_DIR/$node/lvmd.yaml" --journal-dir "$LVMS_DEV_DIR/$node/journal" \
    --lock-file "$LVMS_DEV_DIR/$node/lock" --diagnostics-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 \
    --csi-node-socket "$LVMS_DEV_DIR/$node/csi.sock" --registration-dir off >"$LVMS_DEV_DIR/$node/vg-manager.log" 2>&1 &
  pids+=($!)
}
host_node node-b
if [ "$LVMS_DEMO_GUEST" = 1 ]; then
  A_DISK=/dev/disk/by-id/virtio-node-a-disk1
  echo "--- node-a: vg-manager in a QEMU guest (no device-mapper on this host); disk $A_DISK; console lines start with [guest]"
  node_objects node-a
  cargo build -q -p lvms-testkit --bin lvms-guest --bin lvms-dev
  guest_log=$LVMS_DEV_DIR/node-a-guest.log
  # Traced (make traces): the guest's vg-manager exports through one more loopback forward.
  otel=()
  if [[ ${OTEL_EXPORTER_OTLP_ENDPOINT:-} =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)/?$ ]]; then
    printf 'export OTEL_EXPORTER_OTLP_ENDPOINT=http://10.0.2.100:4318 OTEL_TRACES_SAMPLER=%s\n' \
      "${OTEL_TRACES_SAMPLER:-parentbased_always_on}" >"$LVMS_DEV_DIR/otel.env"
    otel=(--forward "4318=${BASH_REMATCH[2]}" --file "otel.env=$LVMS_DEV_DIR/otel.env")
  fi
  # The guest reads vg-manager's /metrics as a scraper does: a token allowed `get /metrics`.
  kubectl get clusterrole lvms-metrics-reader >/dev/null 2>&1 \
    || kubectl create clusterrole lvms-metrics-reader --verb=get --non-resource-url=/metrics >/dev/null
  kubectl -n default get serviceaccount lvms-demo-scraper >/dev/null 2>&1 \
    || kubectl -n default create serviceaccount lvms-demo-scraper >/dev/null
  kubectl get clusterrolebinding lvms-demo-scraper >/dev/null 2>&1 \
    || kubectl create clusterrolebinding lvms-demo-scraper --clusterrole=lvms-metrics-reader \
      --serviceaccount=default:lvms-demo-scraper >/dev/null
  printf 'METRICS_TOKEN=%s\n' "$(kubectl -n default create token lvms-demo-scraper --duration=4h)" \
    >"$LVMS_DEV_DIR/metrics.env"
  target/debug/lvms-guest --kubeconfig "$KUBECONFIG" --binary lvms="$LVMS" --binary lvms-dev=target/debug/lvms-dev --disk node-a-disk1=512 \
    --file "metrics.env=$LVMS_DEV_DIR/metrics.env" "${otel[@]}" --out "$LVMS_DEV_DIR/node-a" --timeout 900 deploy/dev/demo-guest-node.sh > >(tee "$guest_log") 2>&1 &
  guest_pid=$!
  pids+=("$guest_pid")
else
  host_node node-a
  A_DISK=$LINKS/node-a-disk1
fi
CSI_PEERS=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}/csi-provisioner-v6.4.0-resizer-v2.3.0-snapshotter-v8.6.0-sanity-v5.4.0
[ -x "$CSI_PEERS/bin/csi-provisioner" ] || { echo "demo: no $CSI_PEERS/bin/csi-provisioner: run deploy/dev/build-test-bins.sh" >&2; exit 1; }
if [ "$LVMS_DEMO_GUEST" = 1 ]; then
  # The VolumeSnapshot and VolumeGroupSnapshot APIs before the operator starts: it then makes
  # the thin class's VolumeSnapshotClass, as LVMS does when the API is there, and its
  # VolumeGroupSnapshotClass (the controllers below run with group snapshots enabled, which
  # needs the group CRDs).
  for crd in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
    kubectl apply --server-side -f "$CSI_PEERS/crds/snapshot.storage.k8s.io_$crd.yaml" >/dev/null
  done
  for crd in volumegroupsnapshotclasses volumegroupsnapshotcontents volumegroupsnapshots; do
    kubectl apply --server-side -f "$CSI_PEERS/crds/groupsnapshot.storage.k8s.io_$crd.yaml" >/dev/null
  done
  kubectl wait --for=condition=Established --timeout=60s crd/volumesnapshots.snapshot.storage.k8s.io \
    crd/volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io crd/volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io \
    crd/volumegroupsnapshots.groupsnapshot.storage.k8s.io >/dev/null
fi
echo "--- lvms operator (journal in $LVMS_DEV_DIR/journal, log in $LVMS_DEV_DIR/operator.log)"
CSI_SOCK=$LVMS_DEV_DIR/csi-topolvm.sock
NAMESPACE=$NS $LVMS operator --journal-dir "$LVMS_DEV_DIR/journal" --diagnostics-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 \
  --vg-manager-image localhost/lvms:dev --csi-socket "$CSI_SOCK" >"$LVMS_DEV_DIR/operator.log" 2>&1 &
pids+=($!)
# The upstream csi-provisioner on the operator's socket, as in LVMS's Deployment (and, with the
# snapshot API, csi-snapshotter and the cluster's snapshot-controller).
"$CSI_PEERS/bin/csi-provisioner" --csi-address="$CSI_SOCK" --kubeconfig="$KUBECONFIG" --feature-gates=Topology=true \
  --extra-create-metadata --leader-election=false --timeout=120s >"$LVMS_DEV_DIR/csi-provisioner.log" 2>&1 &
pids+=($!)
if [ "$LVMS_DEMO_GUEST" = 1 ]; then
  "$CSI_PEERS/bin/snapshot-controller" --kubeconfig="$KUBECONFIG" --leader-election=false \
    --feature-gates=CSIVolumeGroupSnapshot=true >"$LVMS_DEV_DIR/snapshot-controller.log" 2>&1 &
  pids+=($!)
  "$CSI_PEERS/bin/csi-snapshotter" --csi-address="$CSI_SOCK" --kubeconfig="$KUBECONFIG" --leader-election=false \
    --extra-create-metadata --feature-gates=CSIVolumeGroupSnapshot=true --timeout=120s >"$LVMS_DEV_DIR/csi-snapshotter.log" 2>&1 &
  pids+=($!)
fi
kubectl -n "$NS" apply -f - <<YAML
apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMCluster
metadata: {name: my-lvmcluster}
spec:
  storage:
    deviceClasses:
    - name: demo-a
      default: true
      deviceSelector: {paths: [$A_DISK]}
$([ "$LVMS_DEMO_GUEST" = 1 ] && echo "      thinPoolConfig: {name: thin-pool-1, sizePercent: 90, overprovisionRatio: 10}")
      nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-a]}]}]}
    - name: demo-b
      deviceSelector: {paths: [$LINKS/node-b-disk1]}
      nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-b]}]}]}
YAML
claim() { # name, class, node, size [, data source]: a claim the scheduler has put on node
  kubectl -n default apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, annotations: {volume.kubernetes.io/selected-node: $3}}
spec: {accessModes: [ReadWriteOnce], storageClassName: $2, resources: {requests: {storage: $4}}${5:+, dataSource: $5}}
YAML
}
# Software emulation: the guest's node takes a minute or two.
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=jsonpath='{.status.state}'=Ready --timeout=300s || {
  echo "demo: the LVMCluster is not Ready; its status and the node statuses:" >&2
  kubectl -n "$NS" get lvmcluster my-lvmcluster -o jsonpath='{.status}{"\n"}' >&2
  kubectl -n "$NS" get lvmvolumegroupnodestatuses -o jsonpath='{range .items[*]}{.metadata.name}: {.spec.nodeStatus}{"\n"}{end}' >&2
  exit 1
}
kubectl -n "$NS" get lvmcluster
kubectl -n "$NS" get lvmvolumegroups,lvmvolumegroupnodestatuses,daemonsets
kubectl get storageclasses,csidrivers
echo "--- node statuses written by the vg-managers:"
for n in node-a node-b; do kubectl -n "$NS" get lvmvolumegroupnodestatus "$n" -o jsonpath='{.metadata.name}: {.spec.nodeStatus[*].name} {.spec.nodeStatus[*].status} {.spec.nodeStatus[*].devices}{"\n"}'; done
if [ "$LVMS_DEMO_GUEST" = 1 ]; then
  echo "--- this host's lvm2 sees node-b's VG:"; vgs --config "$LVMCONF" demo-b
  guest_says() { # mark: wait for the guest's console to show it
    until grep -q "LVMS-DEMO $1" "$guest_log"; do
      kill -0 "$guest_pid" 2>/dev/null || { echo "demo: the guest ended early (see $guest_log)" >&2; exit 1; }
      sleep 1
    done
  }
  echo "--- a PVC on node-a's thin class lvms-demo-a (the demo writes the scheduler's selected-node); node-a publishes it"
  claim photos lvms-demo-a node-a 320Mi
  guest_says written
  kubectl -n default get pvc photos
  echo "--- a VolumeSnapshot of the mounted PVC (class lvms-demo-a, made by the operator), then a PVC restored from it"
  kubectl get volumesnapshotclass,volumegroupsnapshotclass
  kubectl -n default apply -f - <<'YAML'
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: photos-snap}
spec: {volumeSnapshotClassName: lvms-demo-a, source: {persistentVolumeClaimName: photos}}
YAML
  kubectl -n default wait volumesnapshot/photos-snap --for=jsonpath='{.status.readyToUse}'=true --timeout=300s || {
    echo "demo: the snapshot is not ready; csi-snapshotter's log tail:" >&2; tail -20 "$LVMS_DEV_DIR/csi-snapshotter.log" >&2; exit 1
  }
  kubectl -n default get volumesnapshot photos-snap
  claim photos-restore lvms-demo-a node-a 320Mi \
    '{apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: photos-snap}'
  guest_says shown
  kubectl -n default get pvc
  kubectl -n default delete pvc photos-restore
  kubectl -n default delete volumesnapshot photos-snap
  kubectl -n default delete pvc photos
  until [ -z "$(kubectl get pv -o name)" ]; do sleep 1; done
  echo "PVCs and snapshot deleted: their PVs, snapshot content and LVs are gone"
else
  echo "--- lvm2 sees:"; vgs --config "$LVMCONF" demo-a demo-b
  echo "--- node-a's lvmd.yaml:"; cat "$LVMS_DEV_DIR/node-a/lvmd.yaml"
fi
kubectl -n "$NS" get events.events.k8s.io

echo "--- a PVC on lvms-demo-b (WaitForFirstConsumer; the demo writes the scheduler's selected-node)"
cap() { kubectl get node node-b -o jsonpath='{.metadata.annotations.capacity\.topolvm\.io/demo-b}'; }
echo "node-b capacity.topolvm.io/demo-b before: $(cap)"
claim data lvms-demo-b node-b 300Mi
kubectl -n default wait pvc/data --for=jsonpath='{.status.phase}'=Bound --timeout=120s || {
  echo "demo: the PVC is not Bound; csi-provisioner's log tail:" >&2; tail -20 "$LVMS_DEV_DIR/csi-provisioner.log" >&2; exit 1
}
kubectl -n default get pvc data
PV=$(kubectl -n default get pvc data -o jsonpath='{.spec.volumeName}')
kubectl get pv "$PV" -o jsonpath='{.metadata.name}: driver {.spec.csi.driver}, handle {.spec.csi.volumeHandle}, fsType {.spec.csi.fsType}, node affinity {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]}{"\n"}'
kubectl get logicalvolumes
echo "--- the LV on node-b's VG (named after the LogicalVolume's uid):"; lvs --config "$LVMCONF" -o lv_name,lv_size,lv_tags demo-b
sleep 1
echo "node-b capacity.topolvm.io/demo-b after: $(cap)"
echo "--- that volume's story in node-b's journal (lvms journal inspect --object LogicalVolume/$PV):"
$LVMS journal inspect "$LVMS_DEV_DIR/node-b/journal/vg-manager" --object "LogicalVolume/$PV"
echo "--- the claim explained (lvms explain pvc/default/data, both journals):"
$LVMS explain pvc/default/data --journal "$LVMS_DEV_DIR/journal/operator" \
  --node-journal node-b="$LVMS_DEV_DIR/node-b/journal/vg-manager"
kubectl -n default delete pvc data
kubectl wait pv/"$PV" --for=delete --timeout=120s
echo "PVC deleted: PV and LV gone ($(lvs --config "$LVMCONF" --noheadings demo-b | wc -l) LVs on demo-b); capacity back to $(cap)"

echo "--- delete: LVMS's teardown order; the vg-managers remove their volume groups"
kubectl -n "$NS" delete lvmcluster my-lvmcluster --wait=false
for n in node-a node-b; do
  kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: $n}
spec: {drivers: []}
YAML
done
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=delete --timeout=300s
if [ "$LVMS_DEMO_GUEST" = 1 ]; then
  wait "$guest_pid" || { echo "demo: the guest's node-a failed (see $guest_log)" >&2; exit 1; }
  vgs --config "$LVMCONF" demo-b 2>&1 | tail -1 || true
else
  vgs --config "$LVMCONF" demo-a demo-b 2>&1 | tail -2 || true
fi

echo "--- the operator's journal (lvms journal inspect, last 12 records) and node-a's stats:"
$LVMS journal inspect "$LVMS_DEV_DIR/journal/operator" --limit 12
$LVMS journal stats "$LVMS_DEV_DIR/node-a/journal/vg-manager"
