"""Session fixtures of the component tier: one real Prometheus and real scorer processes.

Start-up is paid once per run.  Prometheus is backfilled with constant per-pod CPU gauges
(``ds_test_cpu_cores``) ending a minute before the session starts; a lookback delta of one day makes
a range query over the last hour return exactly those constants at every step, so expected scores
can be computed exactly.  A ``LoadExporter`` is scraped live for the tests of the harness itself.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.settings import AgentSettings, RetryPolicy
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.outbound.addresses import AddressPolicy
from e2e.prometheus import LoadExporter, PrometheusServer, synthetic_cpu_openmetrics
from tests.component.harness import ScorerPKI, ScorerProcess

PODS: dict[tuple[str, ...], float] = {
    ("team-a", "web-1", "node-1"): 0.5,
    ("team-a", "web-2", "node-1"): 1.5,
    ("team-b", "db-1", "node-2"): 1.0,
}
GAUGE = "ds_test_cpu_cores"


@dataclass(frozen=True)
class PromFixture:
    server: PrometheusServer
    exporter: LoadExporter

    @property
    def query_range_url(self) -> str:
        return self.server.query_range_url


@pytest.fixture(scope="session")
def component_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("component")


@pytest.fixture(scope="session")
def pki(component_dir: Path) -> ScorerPKI:
    return ScorerPKI.create(component_dir / "pki")


@pytest.fixture(scope="session")
def prometheus(component_dir: Path) -> Iterator[PromFixture]:
    now = time.time()
    exporter = LoadExporter().start()
    server = PrometheusServer(
        component_dir / "prometheus", scrape_targets=[exporter.target], lookback_delta="1d"
    )
    server.backfill(synthetic_cpu_openmetrics(PODS, now - 7200, now - 60, 15, kind="gauge", metric=GAUGE))
    try:
        server.start()
        yield PromFixture(server, exporter)
    finally:
        server.stop()
        exporter.stop()


@pytest.fixture(scope="session")
def scorer(component_dir: Path) -> Iterator[ScorerProcess]:
    proc = ScorerProcess("scorer-http", component_dir).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def tls_scorer(component_dir: Path, pki: ScorerPKI) -> Iterator[ScorerProcess]:
    proc = ScorerProcess("scorer-tls", component_dir, server=pki.server, pki=pki).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def mtls_scorer(component_dir: Path, pki: ScorerPKI) -> Iterator[ScorerProcess]:
    proc = ScorerProcess(
        "scorer-mtls", component_dir, server=pki.server, client_ca=pki.client_ca.cert_path, pki=pki
    ).start()
    yield proc
    proc.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def secrets() -> MemorySecrets:
    return MemorySecrets(namespace="dynamic-scoring")


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
"""The agent's address-policy opt-in for servers on 127.0.0.1 (the deployed default refuses loopback)."""

FAST = AgentSettings(
    initial_jitter_seconds=0.2,
    retry=RetryPolicy(base_delay=0.1, max_delay=0.4, max_attempts=3, min_attempt_seconds=0.2),
    publish_timeout_seconds=5.0,
    stop_timeout_seconds=2.0,
    extra_ca_files=(),
    address_policy=LOOPBACK,  # every test Prometheus and scorer listens on 127.0.0.1
)


@pytest.fixture
async def supervisor(secrets: MemorySecrets, publisher: MemoryPublisher) -> AsyncIterator[Supervisor]:
    sup = Supervisor(
        cluster_name="cluster1",
        secrets=secrets,
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=FAST,
    )
    try:
        yield sup
    finally:
        await sup.close()
