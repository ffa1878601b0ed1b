# The two commands the README promises:
#   make demo   - lvms on a real node (kubelet + containerd in a QEMU guest), installed with helm
#                 from its own images: a claim becomes a mounted volume in a Pod; then uninstalled
#   make demo-processes - the operator and vg-managers as processes on this host (and a
#                 device-mapper guest): Ready, a mounted volume, a snapshot; what traces traces
#   make traces - that demo with a local Jaeger receiving its traces
#   make test   - every test (builds the Go test peers once into ~/.cache/lvms-test-bins)
SHELL := /bin/bash
.PHONY: test lint demo demo-processes traces test-bins test-lvms-go test-deps test-guest crds

test-deps:
	@deploy/dev/test-deps.sh

test-bins:
	@deploy/dev/build-test-bins.sh >/dev/null

# LVMS itself (openshift/lvm-operator v4.20.0 from its module), for the node tier's swap scenarios.
test-lvms-go:
	@deploy/dev/build-lvms-go.sh >/dev/null

# The real-kernel tier's guests (kernel + initramfs from Debian packages, cached): Debian's
# current cloud kernel (6.1) and the 6.12 one; and the real node (kubelet, containerd, 6.12).
test-guest:
	@deploy/dev/build-guest.sh >/dev/null
	@LVMS_GUEST_KERNEL=6.12 deploy/dev/build-guest.sh >/dev/null
	@deploy/dev/build-node.sh >/dev/null

# Every suite to the end, then "N passed, M failed" (deploy/dev/run-tests.sh).
test: test-deps test-bins test-lvms-go test-guest
	@deploy/dev/run-tests.sh

# `--test guest`, `--test node`: the guest and node tiers are `test = false` (run-tests.sh runs
# the guest tier once per kernel, then the node tier), which `--all-targets` leaves out.
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --test guest --test node -- -D warnings

crds:
	cargo run -q -- crds --out-dir deploy/crds
	cp deploy/crds/*.topolvm.io.yaml deploy/helm/lvms/crds/

# The node tier's install, demo and teardown scenarios (tests/node): nothing of lvms is started
# but by kubelet.
demo: test-deps test-bins
	@deploy/dev/build-node.sh >/dev/null
	cargo test --test node -- --exact install demo teardown

demo-processes: test-deps test-bins
	deploy/dev/demo.sh

traces: test-deps test-bins
	deploy/dev/traces.sh
