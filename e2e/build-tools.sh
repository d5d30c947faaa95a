#!/usr/bin/env bash
# Build the pinned control-plane binaries from Go modules through the module proxy.
#
# Why a script and not a download: this machine reaches only package registries, so etcd,
# Kubernetes, OCM and clusteradm are compiled with the local `go` tool.  Each component lands in
# its own directory of a cache outside the repository, keyed by component, version, Go version
# and recipe revision, so CI and later sessions pay the cold cost (tens of minutes) only once.
#
# Usage: e2e/build-tools.sh [component...]   (components: etcd k8s ocm clusteradm ocm-api ocm13 helm argocd
#        actionlint kueue kueue-addon upstream otelcol kube-rbac-proxy; default all.  ocm13 (OCM v1.3.1),
#        kueue, kueue-addon and upstream are built from pinned git mirrors, not the proxy)
# Prints the cache directory of every component on success (stdout), and its progress on stderr: the plan
# (what is cached, what will be built, the typical cold time of each and in all), `[i/n]` as each build
# starts, a line every DS_TOOLS_HEARTBEAT seconds (default 60) while one runs (time so far, packages
# compiled), and each build's time with what is left.
# With DS_TOOLS_CACHED_ONLY=1 nothing is built: a component not in the cache fails with exit 3 and a
# message saying to run `make tools` (`make lint` locates actionlint this way).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.10}
ETCD_VERSION=${ETCD_VERSION:-v3.6.14}
OCM_VERSION=${OCM_VERSION:-v1.2.1}
OCM_API_VERSION=${OCM_API_VERSION:-v1.2.0}
CLUSTERADM_VERSION=${CLUSTERADM_VERSION:-v1.3.1}
# helm v3.19.5: built against client-go v0.34 like our Kubernetes pin; its go.mod asks for Go 1.24.
HELM_VERSION=${HELM_VERSION:-v3.19.5}
# argo-cd v3.1.8: its go.mod asks for Go 1.24.6 (v3.6 wants Go 1.27, newer than this machine's).
ARGOCD_VERSION=${ARGOCD_VERSION:-v3.1.8}
# actionlint v1.7.12 (newest release the proxy serves): `make lint` checks .github/workflows with it.
ACTIONLINT_VERSION=${ACTIONLINT_VERSION:-v1.7.12}
# OCM v1.3.1 (component ocm13, the e2e tier's default hub): the proxy refuses the ocm v1.3.x module, so
# it is built from the public repository's git history, pinned by tag AND commit.  OCM_SOURCE_GIT is a
# bare clone/mirror of OCM_SOURCE_URL holding that commit; without one, the first build clones it into
# the tools cache (needs git access to GitHub).  This machine keeps a fetched mirror under /work/.mirror.
OCM13_VERSION=${OCM13_VERSION:-v1.3.1}
OCM13_COMMIT=${OCM13_COMMIT:-805fa6103d8bc1761dbc9cb4e420def42703ec53}
OCM_SOURCE_URL=${OCM_SOURCE_URL:-https://github.com/open-cluster-management-io/ocm}
# Kueue (component kueue): the MultiKueue manager and worker.  v0.19.2: v0.19 is the first release whose
# incremental MultiKueue dispatcher nominates clusters in MultiKueueConfig.spec.clusters order (feature gate
# MultiKueueIncrementalDispatcherRespectConfigOrder, Beta, on), which ordered dispatch by score needs.  The
# module proxy serves sigs.k8s.io/kueue v0.19.2 (it refused the v0.16.x line, built from a git mirror
# before), so it is built from the module, pinned by the checksum database; its go.mod asks for Go 1.26.0.
KUEUE_VERSION=${KUEUE_VERSION:-v0.19.2}
KUEUE_SOURCE_URL=${KUEUE_SOURCE_URL:-https://github.com/kubernetes-sigs/kueue}
# kueue-addon (component kueue-addon): OCM's hub controller for Kueue, from addon-contrib at a pinned
# commit (it has no tags).  Its go.mod requires sigs.k8s.io/kueue v0.16.0, which the proxy refuses, so
# that requirement is replaced by the v0.16.0 tree of the same Kueue git history.
KUEUE_ADDON_COMMIT=${KUEUE_ADDON_COMMIT:-f5844b98e8e24a8677ca04a5a4bcff942ccde382}
KUEUE_ADDON_KUEUE_VERSION=${KUEUE_ADDON_KUEUE_VERSION:-v0.16.0}
KUEUE_ADDON_KUEUE_COMMIT=${KUEUE_ADDON_KUEUE_COMMIT:-09892864c24aaec45c6b5bca87b6e199715a691b}
# It also requires open-cluster-management.io/cluster-permission v0.13.1-0.20250526133535-587622ddceb0,
# whose zip the proxy refuses too (403): replaced by that commit of the cluster-permission mirror.
CLUSTER_PERMISSION_COMMIT=${CLUSTER_PERMISSION_COMMIT:-587622ddceb0b40a6b840089c57375863feac25b}
CLUSTER_PERMISSION_SOURCE_URL=${CLUSTER_PERMISSION_SOURCE_URL:-https://github.com/open-cluster-management-io/cluster-permission}
ADDON_CONTRIB_SOURCE_URL=${ADDON_CONTRIB_SOURCE_URL:-https://github.com/open-cluster-management-io/addon-contrib}
# upstream (component upstream): the Go implementation of the Dynamic Scoring Framework this project
# moves users over from, from addon-contrib's dynamic-scoring-framework at a pinned commit (the newest
# that touches it; no tags).  The interop tests and the large-score benchmark run its binaries.
UPSTREAM_COMMIT=${UPSTREAM_COMMIT:-f5844b98e8e24a8677ca04a5a4bcff942ccde382}
# kube-rbac-proxy (component kube-rbac-proxy): tests of the agent authenticating to a Prometheus behind
# kube-rbac-proxy with its own ServiceAccount token (TokenReview + SubjectAccessReview), as OpenShift's
# Thanos querier does.  The proxy serves v0.19.1, v0.18.2, v0.18.0 and v0.16.0 (not v0.17.1); it cannot
# list versions, so ask for an exact one.  v0.19.1's go.mod asks for Go 1.24.2.
KUBE_RBAC_PROXY_VERSION=${KUBE_RBAC_PROXY_VERSION:-v0.19.1}
# Bump when a recipe below changes in a way that alters the produced binaries.  RECIPE_<component>
# overrides it for one component, so changing one recipe rebuilds only that component.
RECIPE=1
RECIPE_ocm13=2   # 2: webhook servers bind 127.0.0.1
RECIPE_kueue=3   # 2: the metrics certificate directory can be set (KUEUE_METRICS_CERT_DIR); 3: and the
                 # incremental dispatcher's round timeout (KUEUE_INCREMENTAL_DISPATCHER_ROUND_TIMEOUT)
# OpenTelemetry Collector (component otelcol): an otlp receiver and otlphttp exporter distribution made by
# the Collector builder, for tests/component/test_otlp_collector.py.  v0.164.0's otlphttp exporter needs a
# module the proxy does not serve.
OTELCOL_VERSION=${OTELCOL_VERSION:-v0.160.0}

# Cold build seconds of each component on a 2-core machine, empty Go caches, in `make test`'s order
# (measured 2026-11-28, see docs/local-control-plane.md; k8s alone, not beside the unit tier).  The first
# build also compiles the standard library (~1 min).  Only for the progress estimate.
declare -A TYPICAL=([actionlint]=60 [etcd]=140 [k8s]=600 [ocm13]=320 [clusteradm]=75 [helm]=115 [ocm-api]=2
  [otelcol]=180 [argocd]=430 [kueue]=210 [kueue-addon]=240 [upstream]=230 [ocm]=325 [kube-rbac-proxy]=160)
HEARTBEAT=${DS_TOOLS_HEARTBEAT:-60}

TOOLS_ROOT=${DS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dynamic-scoring-tools}
# source_git <var> <mirror-name> <clone-name>: a git mirror's default place, unless <var> is set: this
# machine keeps fetched mirrors under /work/.mirror; elsewhere the first build clones into the cache.
source_git() {
  local var=$1 mirror=/work/.mirror/$2/repo
  if [[ -z "${!var:-}" ]]; then
    if [[ -d "$mirror" ]]; then printf -v "$var" '%s' "$mirror"; else printf -v "$var" '%s' "$TOOLS_ROOT/src/$3.git"; fi
  fi
}
source_git OCM_SOURCE_GIT open-cluster-management-io+ocm ocm
source_git KUEUE_SOURCE_GIT kubernetes-sigs+kueue kueue
source_git ADDON_CONTRIB_SOURCE_GIT open-cluster-management-io+addon-contrib addon-contrib
source_git CLUSTER_PERMISSION_SOURCE_GIT open-cluster-management-io+cluster-permission cluster-permission
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$TOOLS_ROOT/gomod}
export GOCACHE=${GOCACHE_OVERRIDE:-$TOOLS_ROOT/gocache}
export GOFLAGS=-buildvcs=false
# A 404 from the proxy must not fall back to git over a network we do not have.
GOPROXY_IN=$(go env GOPROXY 2>/dev/null || echo https://proxy.golang.org)
export GOPROXY=${GOPROXY_IN%,direct}

say() { printf '[build-tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# mins <seconds>: "7m05s"; about <seconds>: "~7 min" (estimates are rounded to minutes)
mins() { printf '%dm%02ds' $(( $1 / 60 )) $(( $1 % 60 )); }
about() { if (( $1 < 60 )); then printf '<1 min'; else printf '~%d min' $(( ($1 + 30) / 60 )); fi; }
# compiled <log>: packages `go build -v` has compiled so far (one import path per line)
compiled() { grep -cE '^[A-Za-z][A-Za-z0-9_.~-]*(/[A-Za-z0-9_.~+-]+)*$' "$1" 2>/dev/null || true; }
# ticker <component> <start> <log> <typical>: a line every $HEARTBEAT s while a build runs, so a long
# build never looks hung.  Runs in the background; `build` stops it.
ticker() {
  local n count nap=
  trap '[[ -z "$nap" ]] || kill "$nap" 2>/dev/null; exit 0' TERM   # leave no sleep behind
  while :; do
    sleep "$HEARTBEAT" & nap=$!
    wait "$nap" || true
    n=$(compiled "$3") count=""   # the Collector builder compiles without -v: no count for it
    if (( n > 0 )); then count=", $n packages compiled"; fi
    say "  $1: $(mins $(( $(date +%s) - $2 ))) so far$count (a cold build typically takes $(about "$4"))"
  done
}
TICKER=
trap '[[ -z "$TICKER" ]] || kill "$TICKER" 2>/dev/null || true' EXIT
# Progress across the components this run builds: set by the plan in the main loop.
PLAN_N=0 PLAN_I=0 PLAN_LEFT=0
die() { say "ERROR: $*"; exit 1; }

command -v go >/dev/null || die "the 'go' tool is not on PATH; install Go >= 1.25 (this machine ships 1.26)"
GOVERSION=$(go env GOVERSION)

key_dir() {  # component version -> cache dir path
  local h rev_var="RECIPE_${1//-/_}"
  h=$(printf '%s %s %s %s/%s %s' "$1" "$2" "$GOVERSION" "$(go env GOOS)" "$(go env GOARCH)" "${!rev_var:-$RECIPE}" | sha256sum | cut -c1-12)
  printf '%s/%s-%s-%s' "$TOOLS_ROOT" "$1" "$2" "$h"
}

check_proxy() {
  local probe="k8s.io/kubernetes/@v/$K8S_VERSION.info" base=${GOPROXY%%,*}
  [[ "$base" == off ]] && die "GOPROXY is 'off'; set GOPROXY to a module proxy"
  curl -fsS -m 20 -o /dev/null "$base/$probe" \
    || die "the Go module proxy $base is unreachable (GET $probe failed); check GOPROXY and the network"
}

# will_build <component> <version>: true when `build` would compile it (not cached, building allowed), so
# a component's git sources are checked only then.
will_build() { [[ ! -f "$(key_dir "$1" "$2")/manifest.json" && "${DS_TOOLS_CACHED_ONLY:-}" != 1 ]]; }

# build <component> <version> <function>: runs the function in a temp dir, then moves it into place.
build() {
  local comp=$1 ver=$2 fn=$3 dir tmp start
  dir=$(key_dir "$comp" "$ver")
  if [[ -f "$dir/manifest.json" ]]; then
    say "$comp $ver: cached at $dir"; echo "$comp=$dir"; return 0
  fi
  if [[ "${DS_TOOLS_CACHED_ONLY:-}" == 1 ]]; then
    say "$comp $ver is not built yet (no $dir); run 'make tools' to build it"
    exit 3
  fi
  [[ "$comp" == ocm13 ]] || check_proxy   # ocm13 builds from its vendor/ tree, no module downloads
  rm -rf "$dir".tmp.*   # left by an interrupted build; we hold the lock, so nobody else is building
  tmp="$dir.tmp.$$"; mkdir -p "$tmp/bin" "$tmp/src"
  start=$(date +%s)
  local typical=${TYPICAL[$comp]:-300}
  PLAN_I=$(( PLAN_I + 1 )); (( PLAN_I <= PLAN_N )) || PLAN_N=$PLAN_I
  say "[$PLAN_I/$PLAN_N] $comp $ver: building, typically $(about "$typical") cold;" \
    "about $(about "$PLAN_LEFT") left in all (log: $tmp/build.log)"
  : > "$tmp/build.log"
  ticker "$comp" "$start" "$tmp/build.log" "$typical" & TICKER=$!
  # `set -e` does not reach inside a recipe run as an `if` condition, so a recipe must return non-zero
  # itself; and a component that should have binaries but has none failed, whatever it returned.
  if ! ( cd "$tmp/src" && "$fn" "$tmp" "$ver" ) >"$tmp/build.log" 2>&1 \
      || { [[ "$comp" != ocm-api ]] && [[ -z "$(ls -A "$tmp/bin")" ]]; }; then
    kill "$TICKER" 2>/dev/null || true; TICKER=
    tail -n 30 "$tmp/build.log" >&2
    die "$comp $ver failed to build after $(mins $(( $(date +%s) - start ))); full log: $tmp/build.log"
  fi
  kill "$TICKER" 2>/dev/null || true; wait "$TICKER" 2>/dev/null || true; TICKER=
  local secs=$(( $(date +%s) - start ))
  PLAN_LEFT=$(( PLAN_LEFT > typical ? PLAN_LEFT - typical : 0 ))
  python3 - "$tmp" "$comp" "$ver" "$secs" "$GOVERSION" <<'PY'
import hashlib, json, os, sys
tmp, comp, ver, secs, gover = sys.argv[1:]
bins = {}
for name in sorted(os.listdir(os.path.join(tmp, "bin"))):
    p = os.path.join(tmp, "bin", name)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    bins[name] = {"sha256": h.hexdigest(), "bytes": os.path.getsize(p)}
json.dump({"component": comp, "version": ver, "go": gover, "build_seconds": int(secs), "binaries": bins},
          open(os.path.join(tmp, "manifest.json"), "w"), indent=2)
PY
  rm -rf "$tmp/src"
  rm -rf "$dir"; mv "$tmp" "$dir"
  say "$comp $ver: built in $(mins "$secs") -> $dir"
  if (( PLAN_I < PLAN_N )); then
    say "$PLAN_I of $PLAN_N built; $(( PLAN_N - PLAN_I )) to go, about $(about "$PLAN_LEFT") left"
  fi
  echo "$comp=$dir"
}

recipe_etcd() {  # the module root of etcd/server is package main
  local out=$1 ver=$2
  printf 'module local/etcd-bin\n\ngo 1.25.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ver" > go.mod
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -ldflags "-s -w" -o "$out/bin/etcd" go.etcd.io/etcd/server/v3
  "$out/bin/etcd" --version
}

recipe_k8s() {  # k8s.io/kubernetes needs a wrapper module replacing every staging module
  local out=$1 ver=$2 minor stg upmod ldf
  minor=$(echo "$ver" | cut -d. -f2); stg="v0.${ver#v1.}"
  upmod=$(go mod download -json "k8s.io/kubernetes@$ver" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  { echo "module local/k8s-bins"; echo
    awk '$1=="go"{print; exit}' "$upmod"; grep -E '^godebug ' "$upmod" || true; echo
    echo "require k8s.io/kubernetes $ver"; echo; echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\t\1 => \1 '"$stg"'#p' "$upmod"
    echo ")"; } > go.mod
  cat go.mod
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$ver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -ldflags "$ldf" -o "$out/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
  "$out/bin/kube-apiserver" --version
}

# wrapper <module> <version> [replace-line...]: a main module that requires the target, so `go build`
# can compile its commands.  `go install pkg@version` is not usable here: this proxy answers 403
# (not 404) for the sub-paths the go command probes as candidate modules, and 403 is fatal to it.
#
# go.sum is seeded from the target's own go.sum (and from that of every replacement), exactly the
# checksums `go install pkg@version` would trust: the checksum database behind this proxy lacks
# some modules (e.g. sigs.k8s.io/about-api), and those are then verified against the target's pins.
moddir() { go mod download -json "$1" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])'; }

wrapper() {  # wrapper <module> <version> [<replaced-module> <replacement-version>]
  local mod=$1 ver=$2 rmod=${3:-} rver=${4:-} upmod
  cat "$(moddir "$mod@$ver")/go.sum" > go.sum
  [[ -z "$rmod" ]] || cat "$(moddir "$rmod@$rver")/go.sum" >> go.sum
  upmod=$(go mod download -json "$mod@$ver" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  { echo "module local/wrapper"; echo; awk '$1=="go"{print; exit}' "$upmod"; echo
    echo "require $mod $ver"
    [[ -z "$rmod" ]] || echo "replace $rmod => $rmod $rver"; } > go.mod
  cat go.mod
}

# OCM is pinned to v1.2.1: the proxy serves no zip for ocm v1.3.x (403 "not available"; the checksum
# database has no v1.3.1 entry either), so the v1.3 line cannot be built through the proxy; the opt-in
# ocm13 component below builds v1.3.1 from a pinned git mirror instead.
recipe_ocm() {
  local out=$1 ver=$2 vpkg=open-cluster-management.io/ocm/pkg/version minor
  minor=$(echo "$ver" | cut -d. -f2)
  wrapper open-cluster-management.io/ocm "$ver"
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -o "$out/bin/" \
    -ldflags "-s -w -X $vpkg.versionFromGit=$ver -X $vpkg.majorFromGit=1 -X $vpkg.minorFromGit=$minor" \
    open-cluster-management.io/ocm/cmd/registration open-cluster-management.io/ocm/cmd/work \
    open-cluster-management.io/ocm/cmd/placement open-cluster-management.io/ocm/cmd/addon
}

# pinned_source <what> <git-dir-var> <url> <ref> <commit>: fail early, and say how to get it, unless the
# git directory in <git-dir-var> holds <ref> (a tag, or "-" for a bare commit) at <commit>; clones the
# repository into the tools cache once when no mirror is there.
pinned_source() {
  local what=$1 var=$2 url=$3 ref=$4 commit=$5 git_dir
  git_dir=${!var}
  local how="get it with: git clone --mirror $url <dir> && export $var=<dir>"
  if [[ "$git_dir" == "$TOOLS_ROOT/src/"* && ! -d "$git_dir" ]]; then
    say "$what: cloning $url into $git_dir (once; set $var to use a mirror you have)"
    mkdir -p "$TOOLS_ROOT/src"
    timeout 900 git clone --quiet --bare "$url" "$git_dir.tmp.$$" \
      && mv "$git_dir.tmp.$$" "$git_dir" \
      || { rm -rf "$git_dir.tmp.$$"; die "cannot clone $url for $what; $how"; }
  fi
  git --git-dir="$git_dir" rev-parse --git-dir >/dev/null 2>&1 \
    || die "no git mirror at $var=$git_dir (needed for $what); $how"
  if [[ "$ref" == - ]]; then
    git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null \
      || die "$git_dir has no commit $commit (needed for $what); update it (git --git-dir=<dir> fetch) or $how"
    return 0
  fi
  local tagged
  tagged=$(git --git-dir="$git_dir" rev-parse -q --verify "refs/tags/$ref^{commit}" 2>/dev/null) \
    || die "$git_dir has no tag $ref (needed for $what); update it (git --git-dir=<dir> fetch --tags) or $how"
  [[ "$tagged" == "$commit" ]] \
    || die "tag $ref in $git_dir is $tagged, pinned commit is $commit; refusing to build a moved tag"
}

# OCM v1.3.1 from source: the tree at the pinned commit is the main module.  It ships vendor/ (with
# modules.txt), so the build is -mod=vendor and downloads nothing.  Same binaries and bin/ layout as the
# ocm component, so e2e/tools.py can point at either; the webhook servers are subcommands of the same
# binaries (`registration|work|addon webhook-server`).  Also copied: the hub CRD templates as the
# cluster manager installs them (crds/hub/: CMA and MCA convert through a Webhook, with
# {{ .AddonAPIServiceCABundle }} / {{ .ClusterManagerNamespace }} placeholders) and the klusterlet's
# managed-cluster CRDs (crds/managed/, incl. clusterproperties).
recipe_ocm13() {
  local out=$1 ver=${2%%+*} vpkg=open-cluster-management.io/ocm/pkg/version minor
  minor=$(echo "$ver" | cut -d. -f2)
  git --git-dir="$OCM_SOURCE_GIT" archive "$OCM13_COMMIT" | tar -x -C .
  # The one source change: the webhook servers (controller-runtime's webhook.Server with no Host)
  # listen on every interface and have no flag for it; the harness binds every server to loopback.
  # Their metrics and health listeners are turned off by flags (--metrics-port=0 --health-probe-port=0).
  local wh=pkg/common/options/webhook.go
  grep -qP '^\t\t\tPort:    c.Port,$' "$wh" || { echo "webhook bind patch: 'Port:    c.Port,' not found in $wh"; return 1; }
  sed -i 's/^\t\t\tPort:    c.Port,$/&\n\t\t\tHost:    "127.0.0.1",/' "$wh"
  grep -q '"127.0.0.1"' "$wh" || { echo "webhook bind patch did not apply to $wh"; return 1; }
  GOFLAGS="-mod=vendor -buildvcs=false" go build -v -p 2 -trimpath -o "$out/bin/" \
    -ldflags "-s -w -X $vpkg.versionFromGit=$ver -X $vpkg.majorFromGit=1 -X $vpkg.minorFromGit=$minor -X $vpkg.commitFromGit=$OCM13_COMMIT" \
    ./cmd/registration ./cmd/work ./cmd/placement ./cmd/addon
  mkdir -p "$out/crds/hub" "$out/crds/managed"
  cp manifests/cluster-manager/hub/crds/*.crd.yaml "$out/crds/hub/"
  cp manifests/klusterlet/managed/*.crd.yaml "$out/crds/managed/"
  printf '{"tag": "%s", "commit": "%s"}\n' "$ver" "$OCM13_COMMIT" > "$out/source.json"
  "$out/bin/registration" --version
}

# Kueue's controller manager from the pinned tag: the tree is the main module (no replace directives,
# dependencies through the proxy).  Also copied, for the harness to install as Kueue's own kustomize
# build would: the CRDs (config/components/crd/bases), the webhook configurations (their service
# references become loopback URLs at install time) and the manager's ClusterRole.
recipe_kueue() {
  local out=$1 ver=$2 vpkg=sigs.k8s.io/kueue/pkg/version src
  # The module itself is the main module (its go.sum pins every dependency): copied out of the
  # read-only module cache and built in place.
  src=$(moddir "sigs.k8s.io/kueue@$ver") || return 1
  cp -r "$src/." . && chmod -R u+w . || return 1
  # The one source change: without Kueue's internal cert management, the metrics server reads its
  # certificate from a fixed /etc/kueue/metrics/certs; the harness runs Kueue as a process, so the
  # directory comes from $KUEUE_METRICS_CERT_DIR when set (the fixed path otherwise).
  local main=cmd/kueue/main.go fixed='metricsCertPath := "/etc/kueue/metrics/certs"'
  grep -qF "$fixed" "$main" || { echo "metrics cert patch: '$fixed' not found in $main"; return 1; }
  sed -i 's#'"$fixed"'#metricsCertPath := os.Getenv("KUEUE_METRICS_CERT_DIR")\n\t\tif metricsCertPath == "" {\n\t\t\tmetricsCertPath = "/etc/kueue/metrics/certs"\n\t\t}#' "$main"
  grep -qF 'os.Getenv("KUEUE_METRICS_CERT_DIR")' "$main" || { echo "metrics cert patch did not apply"; return 1; }
  # The second: MultiKueue's incremental dispatcher nominates the next stepSize workers only when a round
  # of incrementalDispatcherRoundTimeout has passed without admission, a constant 5 minutes Kueue offers
  # no configuration field for, so a test of spill-over to the next cluster would wait 5 minutes a step.
  # The constant becomes a variable read once from $KUEUE_INCREMENTAL_DISPATCHER_ROUND_TIMEOUT (a Go
  # duration such as 5s) when set, valid and positive; otherwise it stays 5 minutes.  The const line is
  # deleted and the variable defined in a file of its own, so the original imports stay untouched.
  local disp=pkg/controller/workloaddispatcher/incrementaldispatcher.go
  fixed='incrementalDispatcherRoundTimeout   = 5 * time.Minute'
  grep -qxF "$(printf '\t')$fixed" "$disp" || { echo "round timeout patch: '$fixed' not found in $disp"; return 1; }
  sed -i '/^\tincrementalDispatcherRoundTimeout   = 5 \* time\.Minute$/d' "$disp"
  cat > "${disp%/*}/roundtimeout_env.go" <<'GO'
package workloaddispatcher

import (
	"os"
	"time"
)

// Patched in by dynamic-scoring's e2e/build-tools.sh: the round timeout, a constant upstream.
var incrementalDispatcherRoundTimeout = roundTimeoutFromEnv()

func roundTimeoutFromEnv() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KUEUE_INCREMENTAL_DISPATCHER_ROUND_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Minute
}
GO
  ! grep -qF "$fixed" "$disp" && grep -qF 'KUEUE_INCREMENTAL_DISPATCHER_ROUND_TIMEOUT' "${disp%/*}/roundtimeout_env.go" \
    || { echo "round timeout patch did not apply"; return 1; }
  GOFLAGS="-mod=mod -buildvcs=false" go build -v -p 2 -trimpath -o "$out/bin/kueue-manager" \
    -ldflags "-s -w -X $vpkg.GitVersion=$ver -X $vpkg.BuildDate=1970-01-01T00:00:00Z" \
    ./cmd/kueue || return 1
  mkdir -p "$out/crds" "$out/webhook" "$out/rbac"
  cp config/components/crd/bases/*.yaml "$out/crds/" || return 1
  cp config/components/webhook/manifests.yaml "$out/webhook/" || return 1
  cp config/components/rbac/role.yaml "$out/rbac/" || return 1
  printf '{"tag": "%s", "module": "sigs.k8s.io/kueue@%s"}\n' "$ver" "$ver" > "$out/source.json"
}

# kueue-addon's hub controller from addon-contrib at the pinned commit, its Kueue and cluster-permission
# requirements replaced by the pinned trees of their mirrors.  Also copied: the CRDs its informers need
# besides Kueue's and OCM's (ManagedServiceAccount, ClusterPermission, ClusterProfile, as its own
# integration tests install them) and the hub ClusterRole its chart grants (plain YAML, without the
# chart's templated binding).
recipe_kueue_addon() {
  local out=$1 vpkg=open-cluster-management.io/addon-contrib/kueue-addon/pkg/version
  git --git-dir="$ADDON_CONTRIB_SOURCE_GIT" archive "$KUEUE_ADDON_COMMIT" kueue-addon | tar -x -C . || return 1
  mkdir kueue cluster-permission
  git --git-dir="$KUEUE_SOURCE_GIT" archive "$KUEUE_ADDON_KUEUE_COMMIT" | tar -x -C kueue || return 1
  git --git-dir="$CLUSTER_PERMISSION_SOURCE_GIT" archive "$CLUSTER_PERMISSION_COMMIT" \
    | tar -x -C cluster-permission || return 1
  cd kueue-addon || return 1
  go mod edit -replace "sigs.k8s.io/kueue=../kueue" \
    -replace "open-cluster-management.io/cluster-permission=../cluster-permission" || return 1
  GOFLAGS="-mod=mod -buildvcs=false" go build -v -p 2 -trimpath -o "$out/bin/kueue-addon-controller" \
    -ldflags "-s -w -X $vpkg.commitFromGit=$KUEUE_ADDON_COMMIT" ./cmd/kueue || return 1
  mkdir -p "$out/crds" "$out/rbac"
  for dep in managed-serviceaccount cluster-permission clusterprofile; do
    cp "test/integration/testdeps/$dep/crd.yaml" "$out/crds/$dep.yaml" || return 1
  done
  # the chart's ClusterRole (its first document; the binding after it is a Helm template)
  awk '/^---/{exit} {print}' charts/kueue-addon/templates/cluster-role.yaml > "$out/rbac/cluster-role.yaml"
  grep -q '^kind: ClusterRole$' "$out/rbac/cluster-role.yaml" && ! grep -q '{{' "$out/rbac/cluster-role.yaml" \
    || { echo "kueue-addon's chart cluster-role.yaml no longer starts with a plain ClusterRole"; return 1; }
  printf '{"commit": "%s", "kueue": "%s+%s", "cluster-permission": "%s"}\n' "$KUEUE_ADDON_COMMIT" \
    "$KUEUE_ADDON_KUEUE_VERSION" "$KUEUE_ADDON_KUEUE_COMMIT" "$CLUSTER_PERMISSION_COMMIT" > "$out/source.json"
}

# The upstream Go addon from addon-contrib at the pinned commit, built as its two Dockerfiles do (its
# go.mod pins every dependency; the proxy serves them all): bin/dynamic-scoring-addon is the addon
# manager and the agent (`controller` and `agent` subcommands; Dockerfile.addon), and
# bin/dynamic-scoring-manager the hub controller that turns DynamicScorers into the summaries
# ConfigMap (cmd/main.go; Dockerfile).  Also copied: its CRDs, the manager's ClusterRole, the addon's
# install resources (deploy/addon) and its sample CRs.
recipe_upstream() {
  local out=$1
  git --git-dir="$ADDON_CONTRIB_SOURCE_GIT" archive "$UPSTREAM_COMMIT" dynamic-scoring-framework \
    | tar -x -C . || return 1
  cd dynamic-scoring-framework || return 1
  GOFLAGS="-mod=mod -buildvcs=false" go build -v -p 2 -trimpath -ldflags "-s -w" \
    -o "$out/bin/dynamic-scoring-addon" ./cmd/dynamic-scoring || return 1
  GOFLAGS="-mod=mod -buildvcs=false" go build -v -p 2 -trimpath -ldflags "-s -w" \
    -o "$out/bin/dynamic-scoring-manager" ./cmd || return 1
  mkdir -p "$out/crds" "$out/rbac" "$out/deploy" "$out/samples"
  cp config/crd/bases/*.yaml "$out/crds/" || return 1
  cp config/rbac/role.yaml "$out/rbac/manager-role.yaml" || return 1
  cp -r deploy/addon/dynamic-scoring/resources/. "$out/deploy/" || return 1
  cp config/samples/*.yaml "$out/samples/" || return 1
  printf '{"commit": "%s"}\n' "$UPSTREAM_COMMIT" > "$out/source.json"
  "$out/bin/dynamic-scoring-addon" --help | head -3
}

# clusteradm v1.3.1 is the only release whose zip the proxy serves.  It requires ocm v1.3.1 solely for
# the operator chart helpers used by `init`/`join` (which cannot run pod-less anyway), so the wrapper
# points that requirement at the OCM version we run.  `accept`, `addon enable/disable`, `get` and
# `create` only speak the API.
recipe_clusteradm() {
  local out=$1 ver=$2
  wrapper open-cluster-management.io/clusteradm "${ver%%+*}" open-cluster-management.io/ocm "$OCM_VERSION"
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -ldflags "-s -w" -o "$out/bin/" open-cluster-management.io/clusteradm/cmd/clusteradm
  "$out/bin/clusteradm" version 2>/dev/null | head -3 || true
}

recipe_ocm_api() {  # not a binary: the CRD manifests shipped inside the api module
  local out=$1 ver=$2 src
  src=$(go mod download -json "open-cluster-management.io/api@$ver" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$out/crds"
  (cd "$src" && find . -name '*.crd.yaml' -print0 | xargs -0 -I{} cp --parents {} "$out/crds/")
  chmod -R u+w "$out/crds"
  find "$out/crds" -name '*.crd.yaml' | wc -l
}

# helm: only the CLI, to install the chart in charts/ against the local hub as a user would.
recipe_helm() {
  local out=$1 ver=$2 vpkg=helm.sh/helm/v3/internal/version
  wrapper helm.sh/helm/v3 "$ver"
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -ldflags "-s -w -X $vpkg.version=$ver -X $vpkg.gitTreeState=clean" \
    -o "$out/bin/" helm.sh/helm/v3/cmd/helm
  "$out/bin/helm" version --short
}

# actionlint: the GitHub Actions workflow linter `make lint` runs on .github/workflows/.  A plain
# module without replace directives, so the same wrapper as helm's; its version is an ldflags var.
recipe_actionlint() {
  local out=$1 ver=$2
  wrapper github.com/rhysd/actionlint "$ver"
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ver" \
    -o "$out/bin/" github.com/rhysd/actionlint/cmd/actionlint
  "$out/bin/actionlint" -version
}

# kube-rbac-proxy: a plain module whose one replace directive (gopkg.in/square/go-jose.v2 => go-jose
# v2.6.3) a wrapper module would drop, so the recipe repeats it; version stamped as its Makefile does.
recipe_kube_rbac_proxy() {
  local out=$1 ver=$2 vpkg=k8s.io/component-base/version
  wrapper github.com/brancz/kube-rbac-proxy "$ver"
  echo 'replace gopkg.in/square/go-jose.v2 => github.com/go-jose/go-jose v2.6.3+incompatible' >> go.mod
  GOFLAGS=-mod=mod go build -v -p 2 -trimpath -o "$out/bin/" \
    -ldflags "-s -w -X $vpkg.gitVersion=$ver -X $vpkg/verflag.programName=kube-rbac-proxy" \
    github.com/brancz/kube-rbac-proxy/cmd/kube-rbac-proxy || return 1
  "$out/bin/kube-rbac-proxy" --version
}

# argocd: only the ApplicationSet controller, plus the CRDs of the same version.  argo-cd's go.mod has
# replace directives, which `go install pkg@version` refuses and a wrapper module would drop, so the
# module itself is the main module: copied out of the (read-only) module cache and built in place.
# Its own ./cmd links every Argo CD component (server, CLI, dex, repo-server); a four-line main
# calling only the ApplicationSet command compiles far less and yields the same controller.
recipe_argocd() {
  local out=$1 ver=$2 mod=github.com/argoproj/argo-cd/v3 vpkg=github.com/argoproj/argo-cd/v3/common
  cp -r "$(moddir "$mod@$ver")/." . && chmod -R u+w .
  mkdir -p cmd/ds-applicationset-controller
  cat > cmd/ds-applicationset-controller/main.go <<'GO'
package main

import (
	"os"

	"k8s.io/klog/v2"

	appset "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
	"github.com/argoproj/argo-cd/v3/cmd/util"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func main() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
	util.SetAutoMaxProcs(false)
	if err := appset.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
GO
  GOFLAGS="-mod=mod -buildvcs=false" go build -v -p 2 -trimpath -o "$out/bin/argocd-applicationset-controller" \
    -ldflags "-s -w -X $vpkg.version=${ver#v} -X $vpkg.gitTag=$ver -X $vpkg.gitTreeState=clean" \
    ./cmd/ds-applicationset-controller
  mkdir -p "$out/crds" "$out/rbac"
  cp manifests/crds/application-crd.yaml manifests/crds/applicationset-crd.yaml \
    manifests/crds/appproject-crd.yaml "$out/crds/"
  # The controller's own namespaced Role, as Argo CD installs it: the e2e run grants exactly this.
  cp manifests/base/applicationset-controller/argocd-applicationset-controller-role.yaml "$out/rbac/"
  "$out/bin/argocd-applicationset-controller" --help | head -3
}

# The OpenTelemetry Collector: the builder generates a distribution with only the otlp receiver and the
# otlphttp exporter from published modules and compiles it.  Why the builder: the Collector's own
# otelcorecol command is not published as a Go module; the builder is.
recipe_otelcol() {
  local out=$1 ver=$2
  cat > builder.yaml <<YAML
dist:
  name: otelcol-ds
  description: Collector for dynamic-scoring tests (otlp receiver, otlphttp exporter)
  output_path: $PWD/out
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $ver
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter $ver
YAML
  go run "go.opentelemetry.io/collector/cmd/builder@$ver" --config builder.yaml || return 1
  mv out/otelcol-ds "$out/bin/otelcol-ds"
}

# comp_version <component>: the version part of its cache key (tag, and the commit where pinned by both).
comp_version() {
  case $1 in
    etcd) echo "$ETCD_VERSION" ;;
    k8s) echo "$K8S_VERSION" ;;
    ocm) echo "$OCM_VERSION" ;;
    clusteradm) echo "$CLUSTERADM_VERSION+ocm$OCM_VERSION" ;;
    ocm-api) echo "$OCM_API_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    argocd) echo "$ARGOCD_VERSION" ;;
    actionlint) echo "$ACTIONLINT_VERSION" ;;
    otelcol) echo "$OTELCOL_VERSION" ;;
    ocm13) echo "$OCM13_VERSION+$OCM13_COMMIT" ;;
    kueue) echo "$KUEUE_VERSION" ;;
    kueue-addon) echo "$KUEUE_ADDON_COMMIT+kueue$KUEUE_ADDON_KUEUE_VERSION+cp${CLUSTER_PERMISSION_COMMIT:0:12}" ;;
    upstream) echo "$UPSTREAM_COMMIT" ;;
    kube-rbac-proxy) echo "$KUBE_RBAC_PROXY_VERSION" ;;
    *) die "unknown component '$1' (known: etcd k8s ocm clusteradm ocm-api helm argocd actionlint otelcol ocm13 kueue kueue-addon upstream kube-rbac-proxy)" ;;
  esac
}

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(ocm-api etcd ocm ocm13 clusteradm k8s helm argocd actionlint kueue kueue-addon upstream otelcol kube-rbac-proxy)
mkdir -p "$TOOLS_ROOT"
# The plan: which components are cached and which will be built, with the typical cold time of each.
todo=() cached=()
for c in "${components[@]}"; do
  if will_build "$c" "$(comp_version "$c")"; then todo+=("$c"); else cached+=("$c"); fi
done
if (( ${#todo[@]} > 0 )); then
  plan=""
  for c in "${todo[@]}"; do
    PLAN_LEFT=$(( PLAN_LEFT + ${TYPICAL[$c]:-300} )); plan+="${plan:+, }$c ($(about "${TYPICAL[$c]:-300}"))"
  done
  PLAN_N=${#todo[@]}
  say "to build: $plan; about $(about "$PLAN_LEFT") in all on 2 cores${cached[*]:+; cached: ${cached[*]}}"
fi
# One lock per component, not one for the script: a cold argocd build takes many minutes, and the
# control-plane fixture asking for the (cached) etcd/k8s/ocm must not wait behind it.  The Go build
# and module caches are safe for concurrent use.
for c in "${components[@]}"; do
  exec 9>"$TOOLS_ROOT/.lock-$c"
  if ! flock -n 9; then
    say "$c: another build of it is running; waiting for it (it writes $TOOLS_ROOT/$c-*.tmp.*/build.log)"
    flock 9
  fi
  v=$(comp_version "$c")
  if will_build "$c" "$v"; then   # a component's git sources are checked only when it will be built
    case $c in
      ocm13) pinned_source "OCM $OCM13_VERSION" OCM_SOURCE_GIT "$OCM_SOURCE_URL" "$OCM13_VERSION" "$OCM13_COMMIT" ;;
      kueue-addon)
        pinned_source kueue-addon ADDON_CONTRIB_SOURCE_GIT "$ADDON_CONTRIB_SOURCE_URL" - "$KUEUE_ADDON_COMMIT"
        pinned_source "Kueue $KUEUE_ADDON_KUEUE_VERSION" KUEUE_SOURCE_GIT "$KUEUE_SOURCE_URL" \
          "$KUEUE_ADDON_KUEUE_VERSION" "$KUEUE_ADDON_KUEUE_COMMIT"
        pinned_source cluster-permission CLUSTER_PERMISSION_SOURCE_GIT "$CLUSTER_PERMISSION_SOURCE_URL" - \
          "$CLUSTER_PERMISSION_COMMIT" ;;
      upstream)
        pinned_source "upstream dynamic-scoring-framework" ADDON_CONTRIB_SOURCE_GIT "$ADDON_CONTRIB_SOURCE_URL" - \
          "$UPSTREAM_COMMIT" ;;
    esac
  fi
  build "$c" "$v" "recipe_${c//-/_}"
done
