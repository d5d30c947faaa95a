# The two commands that matter: `make e2e-up` (a real OCM hub and two managed clusters on this
# machine) and `make test` (every test tier).  Everything else is a step of those.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help venv tools tools-ocm deps lint lint-python lint-workflows test test-unit test-component test-integration test-e2e test-compat test-loaded \
        e2e-up e2e-down e2e-status bench clean demo chart image

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 20

# The three distributions of the one namespace, editable and in one resolve, so that the extras'
# dynamic-scoring-agent and dynamic-scoring-addon are these checkouts, never an index's.
EDITABLES := -e ./agent -e ./addon

$(STAMP): pyproject.toml agent/pyproject.toml addon/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(EDITABLES) -e '.[dev]'
	@touch $@

venv: $(STAMP) ## create .venv with the project and its dev tools

tools: ## every pinned binary the tests use: tools-ocm, plus Argo CD's ApplicationSet controller, the OTel Collector, actionlint, Kueue, kueue-addon, the upstream Go addon and kube-rbac-proxy (prints progress and an estimate)
	e2e/build-tools.sh ocm13 ocm-api etcd ocm clusteradm k8s helm argocd actionlint kueue kueue-addon upstream otelcol kube-rbac-proxy

tools-ocm: ## the local OCM control plane's binaries and helm (etcd, Kubernetes, OCM v1.3.1, clusteradm): all the demo needs; OCM v1.2.1 is built when first asked for (e2e-up OCM=v1.2.1, the compat run)
	e2e/build-tools.sh ocm13 ocm-api etcd clusteradm k8s helm

deps: ## install system packages the tests need (Debian prometheus/promtool)
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { \
	  echo "installing Debian package prometheus (needs root)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null 2>&1 || { \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus >/dev/null; } \
	  || { echo "could not install prometheus; install Debian's 'prometheus' package and retry" >&2; exit 1; }; }

lint: lint-python lint-workflows ## ruff, mypy --strict, import layering, dead code (vulture), the docs check (e2e/doclint.py), actionlint on .github/workflows (built by `make tools`)

lint-python: $(STAMP) ## the Python part of lint: ruff, mypy --strict, import layering, vulture, and the docs check (README.md and docs/ render: fences close and name a language, relative links and anchors resolve)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture
	$(BIN)/python -m e2e.doclint

lint-workflows: $(STAMP) ## actionlint on .github/workflows (built by `make tools`)
	@actionlint=$$($(BIN)/python -m e2e.tools path actionlint) && $$actionlint -no-color .github/workflows/*.yaml

# The addon-contract tests once more on the older OCM release (the default run uses v1.3.1).
COMPAT_OCM ?= v1.2.1

test: $(STAMP) deps ## lint, the image, every test tier, then the OCM-contract e2e tests on v1.2.1; on a cold machine the tiers overlap the tool build
	$(BIN)/python -m e2e.testrun

test-unit: $(STAMP) ## unit tier only
	$(BIN)/pytest -m unit

test-component: $(STAMP) deps ## component tier only
	$(BIN)/pytest -m component

test-integration: $(STAMP) tools ## integration tier only
	$(BIN)/pytest -m integration

test-e2e: $(STAMP) deps tools image ## e2e tier only, then its OCM-contract tests on $(COMPAT_OCM)
	$(BIN)/pytest -m e2e
	DS_OCM_VERSION=$(COMPAT_OCM) $(BIN)/pytest -m "e2e and ocm_contract"

# The flake hunt: the integration and e2e tiers, RUNS times in a row, while busy processes take
# every core (as the tool build does in CI); stops at the first red run.
RUNS ?= 3

test-loaded: $(STAMP) deps tools image ## flake hunt: the integration and e2e tiers RUNS (3) times in a row under a CPU load on every core (e2e/cpuload.py)
	$(BIN)/python -m e2e.cpuload --runs $(RUNS) -- $(BIN)/pytest -m "integration or e2e"

test-compat: $(STAMP) deps tools image ## only the OCM-contract e2e tests, on $(COMPAT_OCM) (COMPAT_OCM=v1.3.1 for the newer hub)
	DS_OCM_VERSION=$(COMPAT_OCM) $(BIN)/pytest -m "e2e and ocm_contract"

demo: $(STAMP) deps tools-ocm image ## the whole loop, live: OCM, helm install, enable, sample scorer, Placement following the load (Ctrl-C ends)
	$(BIN)/python -m e2e.demo $(DEMO_ARGS)

image: $(STAMP) ## build the project's image with podman (local storage + dist/dynamic-scoring-<version>.oci.tar)
	$(BIN)/python -m e2e.image build $(IMAGE_ARGS)

chart: $(STAMP) tools-ocm ## regenerate charts/dynamic-scoring from manifests/
	$(BIN)/python -m e2e.chartgen

e2e-up: $(STAMP) deps tools-ocm ## start the local OCM control plane in the background; writes .e2e/env (OCM=v1.2.1 for the older hub)
	$(BIN)/python -m e2e.cli up $(if $(OCM),--ocm $(OCM))

e2e-down: $(STAMP) ## stop everything e2e-up started
	$(BIN)/python -m e2e.cli down

e2e-status: $(STAMP) ## say what the local control plane runs
	$(BIN)/python -m e2e.cli status

bench: $(STAMP) deps ## run the benchmarks under bench/ (prints numbers; the bench extra adds matplotlib for plots)
	$(BIN)/pip install -q $(EDITABLES) -e '.[dev,bench]'
	$(BIN)/python -m bench

clean: ## remove the venv and caches in the repo (not the tools cache)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
