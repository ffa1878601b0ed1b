#!/usr/bin/env bash
# For people: a local etcd + kube-apiserver + kube-controller-manager on 127.0.0.1 with the
# lvms CRDs installed.
#   deploy/dev/control-plane.sh up     # builds binaries once, starts, prints `export KUBECONFIG=...`
#   deploy/dev/control-plane.sh env    # prints `export KUBECONFIG=...` again
#   deploy/dev/control-plane.sh down   # stops everything and removes the directory
# LVMS_DEV_DIR overrides the working directory (default /tmp/lvms-dev).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${LVMS_DEV_DIR:-/tmp/lvms-dev}
cmd=${1:-}
case "$cmd" in
  up)
    LVMS_TEST_BINS=$(deploy/dev/build-test-bins.sh) && export LVMS_TEST_BINS
    cargo run -q -p lvms-testkit --bin lvms-dev -- control-plane up --dir "$DIR" ;;
  env|down)
    cargo run -q -p lvms-testkit --bin lvms-dev -- control-plane "$cmd" --dir "$DIR" ;;
  *)
    echo "usage: $0 up|env|down" >&2; exit 2 ;;
esac
