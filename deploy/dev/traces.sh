#!/usr/bin/env bash
# The demo, traced: starts a local Jaeger v2 (in-memory, loopback only), runs deploy/dev/demo.sh
# with OTEL_EXPORTER_OTLP_ENDPOINT pointing at it, then shows the traces it received and leaves
# Jaeger running for queries.
#
#   make traces                       # as root (the demo uses loop devices)
#
# Jaeger is built from its Go module by build-test-bins.sh; the module zip carries no UI assets,
# so use the query API (printed below) or load the saved JSON into any Jaeger UI.
# Env: LVMS_JAEGER_OTLP_PORT (4318), LVMS_JAEGER_QUERY_PORT (16686).
set -euo pipefail
cd "$(dirname "$0")/../.."

OTLP=${LVMS_JAEGER_OTLP_PORT:-4318}
QUERY=${LVMS_JAEGER_QUERY_PORT:-16686}
CACHE=${LVMS_TEST_BINS_CACHE:-$HOME/.cache/lvms-test-bins}
JAEGER=${LVMS_JAEGER_BIN:-$CACHE/jaeger-${LVMS_JAEGER_VERSION:-v1.76.0}/bin/jaeger}
DIR=${LVMS_TRACES_DIR:-/tmp/lvms-traces-$$}
mkdir -p "$DIR"

die() { echo "traces: $*" >&2; exit 1; }
[ -x "$JAEGER" ] || die "no jaeger at $JAEGER: run deploy/dev/build-test-bins.sh"
for p in "$OTLP" "$QUERY"; do
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p is in use: set LVMS_JAEGER_OTLP_PORT / LVMS_JAEGER_QUERY_PORT"
done

cat >"$DIR/jaeger.yaml" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry: {metrics: {level: none}, logs: {level: warn}}
extensions:
  jaeger_query:
    storage: {traces: mem}
    http: {endpoint: "127.0.0.1:$QUERY"}
    grpc: {endpoint: "127.0.0.1:0"}
  jaeger_storage:
    backends: {mem: {memory: {max_traces: 100000}}}
  healthcheckv2:
    use_v2: true
    http: {endpoint: "127.0.0.1:0"}
receivers:
  otlp:
    protocols: {http: {endpoint: "127.0.0.1:$OTLP"}}
processors:
  batch: {timeout: 200ms}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
YAML
"$JAEGER" --config "$DIR/jaeger.yaml" >"$DIR/jaeger.log" 2>&1 &
JPID=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$QUERY/api/services" >/dev/null 2>&1 && break
  kill -0 "$JPID" 2>/dev/null || die "jaeger exited; log: $DIR/jaeger.log"
  sleep 0.2
done
echo "--- Jaeger (pid $JPID): OTLP/HTTP on 127.0.0.1:$OTLP, query API on 127.0.0.1:$QUERY"

OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP" OTEL_TRACES_SAMPLER=always_on deploy/dev/demo.sh
sleep 1

echo "--- traces received"
for svc in lvms-operator lvms-vg-manager; do
  curl -sf "http://127.0.0.1:$QUERY/api/traces?service=$svc&limit=1000&lookback=1h" >"$DIR/traces-$svc.json" || true
done
python3 - "$DIR/traces-lvms-operator.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1])).get("data") or []
for t in data:
    procs = {p: v["serviceName"] for p, v in t["processes"].items()}
    roots = [s for s in t["spans"] if not s.get("references")]
    name = roots[0]["operationName"] if roots else t["spans"][0]["operationName"]
    services = sorted({procs[s["processID"]] for s in t["spans"]})
    if name.startswith("LVMCluster"):
        print(f'{t["traceID"]}  {name}: {len(t["spans"])} spans from {", ".join(services)}')
PY
cat <<MSG
Saved: $DIR/traces-lvms-operator.json, $DIR/traces-lvms-vg-manager.json (Jaeger JSON; load them into a Jaeger UI).
Query: curl 'http://127.0.0.1:$QUERY/api/traces/<trace id>'
Journal records of a trace: target/debug/lvms journal inspect --trace <trace id> <journal dir>
Jaeger keeps running for queries; stop it with: kill $JPID
MSG
