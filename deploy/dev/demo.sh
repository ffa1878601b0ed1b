#!/usr/bin/env bash
# Local demo: a real control plane on loopback, the lvms CRDs, `lvms operator`, and an
# LVMCluster driven to Ready, then deleted (ordered teardown). Cleans up on exit.
# vg-manager joins in issue 5; until then the demo writes the node statuses a vg-manager would.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kubectl >/dev/null || { echo "demo: kubectl is needed (apt-get install -y kubernetes-client, or any kubectl)" >&2; exit 1; }
export LVMS_DEV_DIR=${LVMS_DEV_DIR:-/tmp/lvms-demo-$$}
NS=openshift-lvm-storage
cargo build -q --bin lvms
LVMS=target/debug/lvms
op_pid=
cleanup() {
  [ -n "$op_pid" ] && kill "$op_pid" 2>/dev/null && wait "$op_pid" 2>/dev/null
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

echo "--- two simulated nodes (no kubelet here: the demo registers topolvm.io on their CSINodes)"
for n in node-a node-b; do
  kubectl create -f - <<YAML
apiVersion: v1
kind: Node
metadata: {name: $n, labels: {kubernetes.io/hostname: $n}}
YAML
  kubectl patch node "$n" --type=merge -p '{"spec":{"taints":[]}}' >/dev/null
  kubectl apply --server-side -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: $n}
spec: {drivers: [{name: topolvm.io, nodeID: $n}]}
YAML
done

echo "--- lvms operator (journal in $LVMS_DEV_DIR/journal, log in $LVMS_DEV_DIR/operator.log)"
NAMESPACE=$NS $LVMS operator --journal-dir "$LVMS_DEV_DIR/journal" --diagnostics-addr 127.0.0.1:0 \
  --vg-manager-image localhost/lvms:dev >"$LVMS_DEV_DIR/operator.log" 2>&1 &
op_pid=$!
kubectl -n "$NS" apply -f deploy/samples/lvmcluster-two-classes.yaml
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=jsonpath='{.status.state}'=Progressing --timeout=60s
kubectl -n "$NS" get lvmvolumegroups,lvmvolumegroupnodestatuses,daemonsets
kubectl get storageclasses,csidrivers

echo "--- what vg-manager would report: both classes Ready on both nodes"
for n in node-a node-b; do
  kubectl -n "$NS" apply --server-side --field-manager=demo-vg-manager -f - >/dev/null <<YAML
apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMVolumeGroupNodeStatus
metadata: {name: $n}
spec:
  nodeStatus:
  - {name: fast, status: Ready, devices: [/dev/loop10], deviceDiscoveryPolicy: Preconfigured}
  - {name: bulk, status: Ready, devices: [/dev/loop11], deviceDiscoveryPolicy: Preconfigured}
YAML
done
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=jsonpath='{.status.state}'=Ready --timeout=60s
kubectl -n "$NS" get lvmcluster
kubectl -n "$NS" get events.events.k8s.io

echo "--- delete: LVMS's teardown order, then the finalizer goes (kubelet unregisters the driver)"
kubectl -n "$NS" delete lvmcluster my-lvmcluster --wait=false
for n in node-a node-b; do
  kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: $n}
spec: {drivers: []}
YAML
done
kubectl -n "$NS" wait lvmcluster/my-lvmcluster --for=delete --timeout=90s
kubectl get storageclasses,csidrivers

echo "--- the journal (lvms journal inspect, last 15 records):"
$LVMS journal inspect "$LVMS_DEV_DIR/journal/operator" --limit 15
$LVMS journal stats "$LVMS_DEV_DIR/journal/operator"
