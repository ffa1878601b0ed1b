#!/usr/bin/env bash
# Local demo of the whole system: a real control plane on loopback, the lvms CRDs,
# `lvms operator`, and one `lvms vg-manager` per simulated node, each with its own loop-device
# disk and host directory. An LVMCluster goes to Ready on real lvm2 volume groups, then is
# deleted (ordered teardown). Needs root (loop devices), lvm2, kubectl. Cleans up on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kubectl >/dev/null || { echo "demo: kubectl is needed (apt-get install -y kubernetes-client, or any kubectl)" >&2; exit 1; }
command -v vgcreate >/dev/null || [ -x /usr/sbin/vgcreate ] || { echo "demo: lvm2 is needed (apt-get install -y lvm2)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "demo: run as root (it creates loop devices)" >&2; exit 1; }
export LVMS_DEV_DIR=${LVMS_DEV_DIR:-/tmp/lvms-demo-$$}
export LVM_SUPPRESS_FD_WARNINGS=1
NS=openshift-lvm-storage
# No device-mapper in containers/CI: lvm2 metadata only (drop this on a real host for thin pools).
LVMCONF='global{activation=0} devices{use_devicesfile=0 obtain_device_list_from_udev=0} activation{udev_sync=0 udev_rules=0}'
LINKS=/dev/lvms-demo-$$
cargo build -q --bin lvms
LVMS=target/debug/lvms
pids=() loops=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
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
for n in a b; do
  node=node-$n
  truncate -s 256M "$LVMS_DEV_DIR/disks/$node.img"
  l=$(losetup -f --show "$LVMS_DEV_DIR/disks/$node.img"); loops+=("$l")
  ln -s "$l" "$LINKS/$node-disk1"
  echo "--- $node: disk $LINKS/$node-disk1 -> $l; vg-manager in $LVMS_DEV_DIR/$node"
  kubectl create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: $node, labels: {kubernetes.io/hostname: $node}}
YAML
  kubectl patch node "$node" --type=merge -p '{"spec":{"taints":[]}}' >/dev/null
  # No kubelet here: register topolvm.io on the node's CSINode as kubelet would.
  kubectl apply --server-side -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: $node}
spec: {drivers: [{name: topolvm.io, nodeID: $node}]}
YAML
  mkdir -p "$LVMS_DEV_DIR/$node"
  NODE_NAME=$node NAMESPACE=$NS $LVMS vg-manager --host-command-prefix "" --lvm-config "$LVMCONF" \
    --lvmd-config "$LVMS_DEV_DIR/$node/lvmd.yaml" --journal-dir "$LVMS_DEV_DIR/$node/journal" \
    --lock-file "$LVMS_DEV_DIR/$node/lock" --diagnostics-addr 127.0.0.1:0 \
    >"$LVMS_DEV_DIR/$node/vg-manager.log" 2>&1 &
  pids+=($!)
done

echo "--- lvms operator (journal in $LVMS_DEV_DIR/journal, log in $LVMS_DEV_DIR/operator.log)"
NAMESPACE=$NS $LVMS operator --journal-dir "$LVMS_DEV_DIR/journal" --diagnostics-addr 127.0.0.1:0 \
  --vg-manager-image localhost/lvms:dev >"$LVMS_DEV_DIR/operator.log" 2>&1 &
pids+=($!)
kubectl -n "$NS" apply -f - <<YAML
apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMCluster
metadata: {name: my-lvmcluster}
spec:
  storage:
    deviceClasses:
    - name: demo-a
      default: true
      deviceSelector: {paths: [$LINKS/node-a-disk1]}
      nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-a]}]}]}
    - name: demo-b
      deviceSelector: {paths: [$LINKS/node-b-disk1]}
      nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-b]}]}]}
YAML
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=jsonpath='{.status.state}'=Ready --timeout=120s
kubectl -n "$NS" get lvmcluster
kubectl -n "$NS" get lvmvolumegroups,lvmvolumegroupnodestatuses,daemonsets
kubectl get storageclasses,csidrivers
echo "--- node statuses written by the vg-managers:"
for n in node-a node-b; do kubectl -n "$NS" get lvmvolumegroupnodestatus "$n" -o jsonpath='{.metadata.name}: {.spec.nodeStatus[*].name} {.spec.nodeStatus[*].status} {.spec.nodeStatus[*].devices}{"\n"}'; done
echo "--- lvm2 sees:"; vgs --config "$LVMCONF" demo-a demo-b
echo "--- node-a's lvmd.yaml:"; cat "$LVMS_DEV_DIR/node-a/lvmd.yaml"
kubectl -n "$NS" get events.events.k8s.io

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
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=delete --timeout=120s
vgs --config "$LVMCONF" demo-a demo-b 2>&1 | tail -2 || true

echo "--- the operator's journal (lvms journal inspect, last 12 records) and node-a's stats:"
$LVMS journal inspect "$LVMS_DEV_DIR/journal/operator" --limit 12
$LVMS journal stats "$LVMS_DEV_DIR/node-a/journal/vg-manager"
