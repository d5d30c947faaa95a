#!/usr/bin/env bash
# Build an OpenTelemetry Collector (otlp receiver, otlphttp exporter) with the Collector builder,
# for tests/component/test_otlp_collector.py.  Optional: nothing else needs it, and the test says
# how to build it when the binary is missing.
#
# Why the builder: the Collector's own otelcorecol command is not published as a Go module; the
# builder is, and it generates and compiles a distribution from published component modules.
# The result lands in the tools cache beside the control-plane binaries, keyed by version and Go
# version, so the cold cost (several minutes, more on a busy machine) is paid once.
#
# Usage: e2e/build-otelcol.sh   (prints the binary's path on success)
set -euo pipefail

OTELCOL_VERSION=${OTELCOL_VERSION:-v0.160.0}
RECIPE=1
TOOLS_ROOT=${DS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dynamic-scoring-tools}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$TOOLS_ROOT/gomod}
export GOCACHE=${GOCACHE_OVERRIDE:-$TOOLS_ROOT/gocache}
GOPROXY_IN=$(go env GOPROXY 2>/dev/null || echo https://proxy.golang.org)
export GOPROXY=${GOPROXY_IN%,direct}

key=$(printf '%s %s %s/%s %s' "$OTELCOL_VERSION" "$(go env GOVERSION)" "$(go env GOOS)" "$(go env GOARCH)" "$RECIPE" \
  | sha256sum | cut -c1-12)
dir="$TOOLS_ROOT/otelcol-$OTELCOL_VERSION-$key"
if [[ -x "$dir/bin/otelcol-ds" ]]; then
  echo "$dir/bin/otelcol-ds"; exit 0
fi
tmp="$dir.tmp.$$"
rm -rf "$dir".tmp.*
mkdir -p "$tmp/src"
cat > "$tmp/src/builder.yaml" <<YAML
dist:
  name: otelcol-ds
  description: Collector for dynamic-scoring tests (otlp receiver, otlphttp exporter)
  output_path: $tmp/src/out
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter $OTELCOL_VERSION
YAML
start=$(date +%s)
( cd "$tmp/src" && go run "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION" --config builder.yaml ) \
  >"$tmp/build.log" 2>&1 || { tail -n 20 "$tmp/build.log" >&2; echo "build failed; log: $tmp/build.log" >&2; exit 1; }
mkdir -p "$tmp/bin"
mv "$tmp/src/out/otelcol-ds" "$tmp/bin/otelcol-ds"
echo "built in $(( $(date +%s) - start )) s" >> "$tmp/build.log"
rm -rf "$tmp/src/out"
mv "$tmp" "$dir"
echo "$dir/bin/otelcol-ds"
