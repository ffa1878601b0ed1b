#!/usr/bin/env bash
# Local demo: a real control plane on loopback, the lvms CRDs, and the sample LVMClusters
# (validated and defaulted by the API server). Cleans up on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kubectl >/dev/null || { echo "demo: kubectl is needed (apt-get install -y kubernetes-client, or any kubectl)" >&2; exit 1; }
export LVMS_DEV_DIR=${LVMS_DEV_DIR:-/tmp/lvms-demo-$$}
trap 'deploy/dev/control-plane.sh down' EXIT
eval "$(deploy/dev/control-plane.sh up)"
kubectl create namespace openshift-lvm-storage
for s in deploy/samples/*.yaml; do
  name=$(basename "$s" .yaml)
  sed "s/name: my-lvmcluster/name: $name/" "$s" | kubectl -n openshift-lvm-storage apply -f -
done
kubectl -n openshift-lvm-storage get lvmclusters
echo "--- an invalid edit is rejected by the API server (CEL in the CRD):"
kubectl -n openshift-lvm-storage patch lvmcluster lvmcluster-thin --type=json \
  -p '[{"op":"replace","path":"/spec/storage/deviceClasses/0/fstype","value":"ext4"}]' || true
echo "--- defaults filled in by the API server:"
kubectl -n openshift-lvm-storage get lvmcluster lvmcluster-thin -o jsonpath='{.spec.storage.deviceClasses[0]}'; echo
