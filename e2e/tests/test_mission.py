"""The mission end to end, as a user runs it: the steps of `make demo` without the live view.

On the session's control plane: the user's own objects first (the agent namespace with a tenant
Secret on each cluster, the Placement's namespace), a snapshot of every object on the hub and on
cluster2, then `helm install` (the documented command), `clusteradm addon enable` on both
clusters, the seasonal sample scorer registered as the sample DynamicScorer cpu-seasonal-4h, and
the sample Placement (the margin recipe) choosing the cluster with the most CPU headroom.  The
tests are the story's steps, in file order, on one installation; the last one uninstalls and
compares with the snapshot.

The scoring interval is 5 s and the Prometheus window 5 s (`irate` over 5 s, scraped every 1 s),
so the whole story takes about two minutes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast

import pytest
import yaml

from dynamic_scoring.addon.constants import AGENT_DEPLOYMENT, DEFAULT_IMAGE_REPOSITORY
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import parse_time
from e2e.controlplane import ControlPlane
from e2e.image import default_tag, image_exists, image_id, podman
from e2e.inventory import Key, snapshot
from e2e.kube import Kubectl
from e2e.mission import (
    ADDON,
    ADDON_V1A1,
    CHART,
    CLUSTERS,
    DS_V1A1,
    HEAVY,
    INSTALL_NS,
    LIGHT,
    MANAGER,
    NAMESPACE,
    SCORE,
    SCORER,
    TENANT_HEADER,
    TENANT_SECRET,
    USER_NS,
    WORK_V1,
    Mission,
    TenantGateway,
)
from e2e.procs import StartupError, wait_until, wait_value

pytestmark = [
    pytest.mark.own_install,
    pytest.mark.ocm_contract,
    pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning"),
]

INTERVAL = 5
WINDOW = 5
# Load shift -> new decision, at most: one scoring interval (the agent may have just started a
# cycle) + the query window (irate needs the new samples to dominate the window's mean) + 5 s for
# one scrape (1 s), irate's two-sample lag (1-2 s), the scorer call and the APS write, and the
# placement controller's reaction to the APS event (under 0.2 s measured).
FLIP_BOUND = INTERVAL + WINDOW + 5
# Scores cross -> new decision: the placement controller watches AddOnPlacementScores.  2 s is
# this 2-core machine under the parallel test load, not a property of OCM.
SCORE_TO_DECISION_BOUND = 2.0


class Story:
    """The installation, its clients, and what the user had before it."""

    def __init__(self, mission: Mission, kubectls: dict[str, Kubectl]) -> None:
        self.m = mission
        self.kubectls = kubectls
        self.before: dict[str, set[Key]] = {}
        self.aps_uids_before_upgrade: dict[str, str | None] = {}
        self.image_tags: list[str] = []  # tags the story added to local storage; removed at its end
        self.user_objects: dict[str, set[Key]] = {
            "cluster1": {
                Key("Namespace", "", INSTALL_NS),
                Key("Secret", INSTALL_NS, TENANT_SECRET),
                Key("Namespace", "", USER_NS),
            },
            "cluster2": {Key("Namespace", "", INSTALL_NS), Key("Secret", INSTALL_NS, TENANT_SECRET)},
        }

    def leftovers(self, cluster: str) -> set[Key]:
        """Objects now on `cluster` that were not there before the install, the user's excepted."""
        now = snapshot(self.kubectls[cluster])
        return {k for k in now - self.before[cluster] if k.namespace != USER_NS}


@pytest.fixture(scope="module")
def story(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    cp = control_plane
    if not all(cp.clusters[c].prometheus_url for c in CLUSTERS):
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    assert cp.hub is not None and cp.spoke2 is not None and cp.tools is not None
    m = Mission(
        cp, progress=print, interval=INTERVAL, window=WINDOW, work_dir=tmp_path_factory.mktemp("mission")
    )
    kubectls = {
        "cluster1": Kubectl(cp.tools.kubectl, cp.hub.admin_kubeconfig),
        "cluster2": Kubectl(cp.tools.kubectl, cp.spoke2.admin_kubeconfig),
    }
    s = Story(m, kubectls)
    # the harness prepares the install namespace for the klusterlets: put back what was there
    existed = {c: client.find("v1", "Namespace", INSTALL_NS) is not None for c, client in m.spokes.items()}
    m.tenant_secrets()
    m.hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": USER_NS}})
    s.before = {c: snapshot(k) for c, k in kubectls.items()}
    loads = {c: m.load_file(c).read() for c in CLUSTERS}  # put back afterwards for later tests
    m.set_load("cluster1", LIGHT)
    m.set_load("cluster2", HEAVY)
    try:
        m.install()
        m.enable()
        m.start_gateway()
        m.register(m.start_scorer())
        yield s
    finally:
        m.stop_local()
        for tag in s.image_tags:
            # this name only: `podman untag IMAGE` without a name strips every name of the image,
            # the built image's own tag with them (the same image), under any run still using it
            podman("untag", tag, tag, check=False)
        if s.image_tags:
            assert image_exists(default_tag()), "untagging the upgrade's name took the built image's own"
        if m.hub.find("v1", "Namespace", NAMESPACE) is not None:  # a step failed before the uninstall
            for c in CLUSTERS:
                if m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, c) is not None:
                    m.disable(c)
            m.run_helm("uninstall", "dynamic-scoring", "--namespace", NAMESPACE, "--ignore-not-found")
            m.hub.delete("v1", "Namespace", NAMESPACE)
        for cluster, client in m.spokes.items():
            if existed[cluster]:
                client.delete("v1", "Secret", TENANT_SECRET, INSTALL_NS)
            else:
                client.delete("v1", "Namespace", INSTALL_NS)
        m.hub.delete("v1", "Namespace", USER_NS)
        wait_until(
            lambda: (
                all(
                    existed[c] or client.find("v1", "Namespace", INSTALL_NS) is None
                    for c, client in m.spokes.items()
                )
                and m.hub.find("v1", "Namespace", USER_NS) is None
                and m.hub.find("v1", "Namespace", NAMESPACE) is None
            ),
            timeout=90,
            what="the story's namespaces gone",
        )
        for c in CLUSTERS:
            m.load_file(c).write(loads[c])


def test_the_tenant_gateway_routes_by_header_and_names_a_missing_or_unknown_tenant() -> None:
    class Named(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            port = cast(ThreadingHTTPServer, self.server).server_port
            body = f"{port} {self.path}".encode()  # which upstream, what path
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    upstreams = [ThreadingHTTPServer(("127.0.0.1", 0), Named) for _ in range(2)]
    for u in upstreams:
        threading.Thread(target=u.serve_forever, daemon=True).start()
    gw = TenantGateway(
        {f"c{i}": f"http://127.0.0.1:{u.server_address[1]}" for i, u in enumerate(upstreams)}
    ).start()
    try:
        for i, u in enumerate(upstreams):
            req = urllib.request.Request(
                f"{gw.url}/api/v1/query_range?query=up", headers={TENANT_HEADER: f"c{i}"}
            )
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.read().decode() == f"{u.server_address[1]} /api/v1/query_range?query=up"
        for headers in ({}, {TENANT_HEADER: "c9"}):
            req = urllib.request.Request(f"{gw.url}/api/v1/query_range", headers=headers)
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req, timeout=5)
            assert err.value.code == 400
            assert "X-Scope-OrgID must name one of ['c0', 'c1']" in err.value.read().decode()
    finally:
        gw.stop()
        for u in upstreams:
            u.shutdown()
            u.server_close()


def test_every_score_is_in_range_and_carries_valid_until(story: Story) -> None:
    m = story.m
    m.wait_ranked("cluster1", timeout=120)
    for cluster in CLUSTERS:

        def read(cluster: str = cluster) -> tuple[dt.datetime, JSON | None]:
            return dt.datetime.now(dt.UTC), m.aps(cluster)  # the time just before the read

        # the scores were seen; the agent's condition is its own to write: wait for it, not one read
        now, aps = wait_value(
            read,
            lambda seen: (
                [
                    (c.get("type"), c.get("status"))
                    for c in ((seen[1] or {}).get("status") or {}).get("conditions") or []
                ]
                == [("ScoresUpToDate", "True")]
            ),
            timeout=60,
            what=f"{cluster}'s score with one condition, ScoresUpToDate=True",
        )
        assert aps is not None
        status = aps["status"]
        assert [i["name"] for i in status["scores"]] == [SCORE]
        for item in status["scores"]:
            assert isinstance(item["value"], int) and -100 <= item["value"] <= 100, item
        until = parse_time(status.get("validUntil", ""))
        assert until is not None and until > now, status.get("validUntil")
        assert until - now <= dt.timedelta(seconds=max(3 * INTERVAL, 30) + 1)  # validForSeconds
        (cond,) = status["conditions"]
        assert (cond["type"], cond["status"]) == ("ScoresUpToDate", "True"), cond


def test_the_placement_picks_the_higher_scored_cluster(story: Story) -> None:
    m = story.m

    def settled() -> bool:
        # LIGHT, 1.4 of 4 cores -> headroom 65 -> +50, HEAVY 2.6 -> 35 -> -50 once the band maps 20..80 onto
        # -100..100, give or take rounding; the first scores after the load was set may still
        # average in the start-up load
        light, heavy = m.score("cluster1"), m.score("cluster2")
        return light is not None and heavy is not None and 40 <= light <= 60 and -60 <= heavy <= -40

    wait_until(settled, timeout=3 * (INTERVAL + WINDOW), what="scores of the set load on both clusters")
    wait_until(lambda: m.decision() == ["cluster1"], timeout=FLIP_BOUND, what="the decision on cluster1")


def test_the_decision_follows_a_load_shift_within_one_interval_plus_margin(story: Story) -> None:
    flip = story.m.shift("cluster2", timeout=60)
    print(
        f"\nload shift -> scores crossed {flip.scores_crossed:.2f}s, decision {flip.decided:.2f}s; "
        f"score-to-decision {flip.score_to_decision:.2f}s (bounds {FLIP_BOUND}s, {SCORE_TO_DECISION_BOUND}s)"
    )
    assert flip.decided <= FLIP_BOUND
    assert flip.score_to_decision <= SCORE_TO_DECISION_BOUND
    assert story.m.decision() == ["cluster2"]


def test_the_manager_and_both_agents_run_from_the_built_image(story: Story) -> None:
    """Each of the three runs as a podman container of the image `make image` built, as uid 65532.

    The agent's root filesystem is read-only (its manifest says so): only its /tmp emptyDir is
    writable, nothing of the image and not its Secret mount.
    """
    m = story.m
    rows = json.loads((m.cp.run_dir / "runner" / "pods.json").read_text())
    ours = {
        (r["cluster"], r["deployment"]): r
        for r in rows
        if r["deployment"] in (MANAGER, AGENT_DEPLOYMENT) and r["pid"] is not None
    }
    assert set(ours) == {("hub", MANAGER), ("hub", AGENT_DEPLOYMENT), ("cluster2", AGENT_DEPLOYMENT)}, ours
    built = image_id(default_tag())
    for (cluster, deployment), row in ours.items():
        name = row["container"]
        assert name, f"{cluster}/{deployment} is not running as a container"
        assert podman("inspect", "--format", "{{.ImageID}}", name).strip() == built.removeprefix("sha256:")
        assert podman("exec", name, "id", "-u").strip() == "65532"
    agent = ours[("cluster2", AGENT_DEPLOYMENT)]["container"]
    podman("exec", agent, "touch", "/tmp/written")  # its emptyDir
    for path in ("/opt/venv/x", "/x", "/var/run/hub/x"):
        out = podman("exec", agent, "sh", "-c", f"touch {path} 2>&1 || echo refused", check=False)
        assert "Read-only file system" in out and "refused" in out, (path, out)


def test_helm_upgrade_to_the_next_chart_version_keeps_scorers_and_scores(
    story: Story, tmp_path: Path
) -> None:
    m = story.m
    scorer_uid = m.hub.get(DS_V1A1, "DynamicScorer", SCORER, NAMESPACE)["metadata"]["uid"]
    aps_uids = {c: (m.aps(c) or {}).get("metadata", {}).get("uid") for c in CLUSTERS}
    assert all(aps_uids.values())
    nxt = tmp_path / "dynamic-scoring"
    shutil.copytree(CHART, nxt)
    chart = yaml.safe_load((nxt / "Chart.yaml").read_text())
    core = re.match(r"(\d+)\.(\d+)\.(\d+)", str(chart["version"]))  # 0.1.0-dev.0 between releases
    assert core is not None, chart["version"]
    major, minor, patch = (int(p) for p in core.groups())
    # a pre-release of the next version, unique to this run: a second run on this host (make test
    # runs the compat run beside the first) tags its own image, so neither's untag takes the other's
    chart["version"] = chart["appVersion"] = f"{major}.{minor}.{patch + 1}-e2e.r{uuid.uuid4().hex[:8]}"
    (nxt / "Chart.yaml").write_text(yaml.safe_dump(chart))
    image = f"{DEFAULT_IMAGE_REPOSITORY}:{chart['appVersion']}"
    # the next release's image: the runner runs only images present locally, as a node that has
    # pulled them would; the next version holds the same build
    podman("tag", default_tag(), image)
    story.image_tags.append(image)  # kept until the story ends: the agents restart on it later

    m.run_helm("upgrade", "dynamic-scoring", str(nxt), "--namespace", NAMESPACE)
    upgraded = dt.datetime.now(dt.UTC)
    dep = m.hub.get("apps/v1", "Deployment", MANAGER, NAMESPACE)
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == image
    m.wait_manager()

    def agents_retagged() -> bool:
        for c in CLUSTERS:
            work = m.hub.find(WORK_V1, "ManifestWork", f"addon-{ADDON}-deploy-0", c)
            images = [
                ct["image"]
                for man in (work or {}).get("spec", {}).get("workload", {}).get("manifests", [])
                if man["kind"] == "Deployment"
                for ct in man["spec"]["template"]["spec"]["containers"]
            ]
            if images != [image]:
                return False
        return True

    wait_until(agents_retagged, timeout=60, what="both agents' works rendered with the upgraded image")

    def agents_upgraded() -> bool:
        rows = json.loads((m.cp.run_dir / "runner" / "pods.json").read_text())
        running = {r["cluster"]: r for r in rows if r["deployment"] == AGENT_DEPLOYMENT and r["pid"]}
        return set(running) == {"hub", "cluster2"} and all(
            r["ready"] and r["image"] == image for r in running.values()
        )

    wait_until(agents_upgraded, timeout=90, what="both agents running the upgraded image, ready")
    upgraded = dt.datetime.now(dt.UTC)  # scores must come from the upgraded agents
    assert m.hub.get(DS_V1A1, "DynamicScorer", SCORER, NAMESPACE)["metadata"]["uid"] == scorer_uid
    story.aps_uids_before_upgrade = aps_uids

    def fresh_scores() -> bool:
        rows = {r.cluster: r for r in m.rows()}
        written = {
            c: dt.datetime.now(dt.UTC) - dt.timedelta(seconds=r.written_ago or 1e9) for c, r in rows.items()
        }
        return all(w > upgraded and rows[c].score is not None for c, w in written.items())

    # the agents' writes are skipped while nothing changes, so nudge the load to force a new score
    m.set_load("cluster1", 3.0)
    m.set_load("cluster2", 0.8)
    wait_until(fresh_scores, timeout=60, what="scores written after the upgrade on both clusters")
    # OCM's placement controller re-schedules on those writes, on its own: wait for its decision
    wait_value(m.decision, lambda d: d == ["cluster2"], timeout=FLIP_BOUND, what="the decision on cluster2")


def test_the_upgrade_never_removed_a_score(story: Story) -> None:
    """A new leader once withdrew every config work before its first plan (fixed in 0f4500e)."""
    m = story.m
    for c in CLUSTERS:
        uid = (m.aps(c) or {}).get("metadata", {}).get("uid")
        assert uid == story.aps_uids_before_upgrade[c], f"{c}'s AddOnPlacementScore was deleted and recreated"


def test_deleting_the_dynamic_scorer_removes_its_scores_on_both_clusters(story: Story) -> None:
    m = story.m
    m.delete_scorer()
    start = time.monotonic()
    wait_until(lambda: all(m.aps(c) is None for c in CLUSTERS), timeout=60, what="both APS deleted")
    print(f"\nDynamicScorer deleted -> both AddOnPlacementScores gone in {time.monotonic() - start:.1f}s")


def test_disable_on_one_cluster_then_uninstall_removes_everything_we_created(story: Story) -> None:
    m = story.m
    m.disable("cluster2")
    left: dict[str, set[Key]] = {}

    def cluster2_clean() -> bool:
        left["cluster2"] = story.leftovers("cluster2")  # the agent's Lease included: its Deployment owns it
        left["hub, namespace cluster2"] = {
            k for k in story.leftovers("cluster1") if k.namespace == "cluster2"
        }
        return not any(left.values())

    try:
        wait_until(cluster2_clean, timeout=90, what="nothing of ours left for cluster2")
    except StartupError:
        pytest.fail(f"left after disabling cluster2: {describe(left)}")
    assert m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, "cluster1") is not None

    start = time.monotonic()
    m.uninstall()

    def everything_gone() -> bool:
        left.clear()
        left.update({c: story.leftovers(c) for c in CLUSTERS})
        return not any(left.values())

    try:
        wait_until(everything_gone, timeout=120, what="every object we created gone")
    except StartupError:
        pytest.fail(f"left after uninstall: {describe(left)}")
    print(
        f"\nuninstall with cluster1 still enabled -> nothing of ours left in {time.monotonic() - start:.1f}s"
    )
    for cluster, keys in story.user_objects.items():
        now = snapshot(story.kubectls[cluster])
        assert keys <= now, f"the uninstall removed the user's {sorted(map(str, keys - now))} on {cluster}"


def describe(left: dict[str, set[Key]]) -> str:
    return "; ".join(f"{c}: {sorted(map(str, v))}" for c, v in left.items() if v) or "nothing"
