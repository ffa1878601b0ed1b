#!/usr/bin/env bash
# Builds LVMS's own operator (openshift/lvm-operator, Go) from its module into the test-binaries
# cache, once per version, with its install tree (`config/`, kept beside the binary): for the
# side-by-side benchmark (`cargo bench --bench versus`) and the swap tests on the real node
# (tests/node/swap.rs), which install LVMS from that tree. A test peer, never part of the product.
#
#   deploy/dev/build-lvms-go.sh          # prints the binary's path on success
#
# Env: LVMS_GO_VERSION (v4.20.0), LVMS_TEST_BINS_CACHE (~/.cache/lvms-test-bins). ~3 min cold on
# two cores. Exits non-zero with the fix when Go is missing or the build fails.
set -euo pipefail

VERSION=${LVMS_GO_VERSION:-v4.20.0}
CACHE=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}
DIR=$CACHE/lvms-go-$VERSION
MOD=github.com/openshift/lvm-operator/v4

die() { echo "build-lvms-go: $*" >&2; exit 1; }
if [ -x "$DIR/bin/lvms" ] && [ -d "$DIR/config/default" ]; then
  echo "$DIR/bin/lvms"; exit 0
fi
command -v go >/dev/null || die "no Go toolchain on PATH: install Go >= 1.24 and rerun"
command -v python3 >/dev/null || die "python3 is needed to read go's JSON: apt-get install -y python3"
mkdir -p "$DIR/bin"
log=$DIR/build.log
: >"$log"
echo "build-lvms-go: building $MOD@$VERSION (log: $log)" >&2
(
  # Its go.mod replaces topolvm with OpenShift's fork, so it builds as the main module from a
  # writable copy of its source, not with `go install`.
  src=$(go mod download -json "$MOD@$VERSION" | python3 -c 'import sys,json;print(json.load(sys.stdin)["Dir"])')
  rm -rf "$DIR/src"
  cp -r "$src" "$DIR/src"
  chmod -R u+w "$DIR/src"
  cd "$DIR/src"
  go build -p 2 -trimpath -ldflags "-s -w" -o "$DIR/bin/lvms.tmp" ./cmd
  rm -rf "$DIR/config"
  cp -r config "$DIR/config"
  mv "$DIR/bin/lvms.tmp" "$DIR/bin/lvms"
  rm -rf "$DIR/src"
) >>"$log" 2>&1 || die "build failed; last lines of $log:
$(tail -20 "$log")"
echo "$DIR/bin/lvms"
