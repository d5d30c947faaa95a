"""The README's own scorer, registration and Placement are the files in samples/my_scorer/, and agree.

A user copies the README; the e2e test builds and runs samples/my_scorer/.  These checks keep the two
the same, and check what the README promises about them through the hub's own logic: the registered
scorer resolves to the score the Placement names (AddOnPlacementScore ``cpu-free``, item ``cpu_free``).
"""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import yaml

from dynamic_scoring.addon.constants import DEFAULT_INSTALL_NAMESPACE
from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import DynamicScorer, parse_scorer
from dynamic_scoring.addon.registry.probe import check_config
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION, listed_destination
from dynamic_scoring.scorer import ScorerApp

ROOT = Path(__file__).resolve().parents[3]
MINE = ROOT / "samples" / "my_scorer"


def readme_blocks(section: str, language: str) -> list[str]:
    text = (ROOT / "README.md").read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [str(b) for b in re.findall(rf"```{language}\n(.*?)```", text, re.S)]


def without_header(text: str) -> str:
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MINE / name).read_text()) if d]


def app() -> ScorerApp:
    module = types.ModuleType("cpu_free")
    exec(compile((MINE / "cpu_free.py").read_text(), "cpu_free.py", "exec"), module.__dict__)
    scorer: ScorerApp = module.app
    return scorer


def test_the_readme_scorer_is_the_sample_file() -> None:
    assert readme_blocks("Write a scorer", "python") == [(MINE / "cpu_free.py").read_text()]


def test_the_readme_registration_is_the_sample_file() -> None:
    assert readme_blocks("Register it", "yaml") == [without_header((MINE / "dynamicscorer.yaml").read_text())]


def test_the_readme_placement_is_in_the_sample_file() -> None:
    [placement] = readme_blocks("Place workloads by it", "yaml")
    assert (MINE / "placement.yaml").read_text().endswith(placement)


def test_the_registered_scorer_resolves_to_the_score_the_placement_names() -> None:
    doc, problems = check_config(app().config())
    assert doc is not None and not problems, problems
    [obj] = documents("dynamicscorer.yaml")
    obj["status"] = {"lastSyncedConfig": json.loads(doc.model_dump_json())}
    scorer = parse_scorer(obj)
    assert isinstance(scorer, DynamicScorer), scorer
    resolution = resolve(scorer)
    assert not resolution.problems and resolution.summary is not None, resolution
    summary = resolution.summary
    assert summary.score_name == "cpu_free"
    assert summary.scoring_endpoint == "http://cpu-free.scorers.svc:8000/scoring"
    assert summary.source_query == (
        'sum(rate(container_cpu_usage_seconds_total{container!=""}[1m])) / sum(machine_cpu_cores)'
    )
    assert summary.score_dimension_format == "${scoreName}"  # one item per cluster, named cpu_free

    placement = next(d for d in documents("placement.yaml") if d["kind"] == "Placement")
    [addon] = [
        c["scoreCoordinate"]["addOn"]
        for c in placement["spec"]["prioritizerPolicy"]["configurations"]
        if c["scoreCoordinate"]["type"] == "AddOn"
    ]
    assert addon == {"resourceName": aps_name(summary.score_name), "scoreName": summary.score_name}


def test_the_deployment_serves_what_the_registration_and_the_image_say() -> None:
    objs = {d["kind"]: d for d in documents("deploy.yaml")}
    [container] = objs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    assert objs["Service"]["metadata"]["name"] == "cpu-free"
    assert objs["Service"]["metadata"]["namespace"] == "scorers"  # cpu-free.scorers.svc, as registered
    assert "EXPOSE 8000" in (MINE / "Containerfile").read_text()
    assert "port=8000" in (MINE / "cpu_free.py").read_text()
    selector = objs["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"]
    assert selector == objs["Deployment"]["spec"]["selector"]["matchLabels"]
    # the callers: this cluster's agent and the hub manager's pods (its probe), by the installs' own labels
    [rule] = objs["NetworkPolicy"]["spec"]["ingress"]
    peers = [{k: v["matchLabels"] for k, v in peer.items() if k != "ipBlock"} for peer in rule["from"]]
    manager = yaml.safe_load((ROOT / "manifests" / "manager.yaml").read_text())
    manager_labels = manager["spec"]["template"]["metadata"]["labels"]
    namespace = yaml.safe_load((ROOT / "manifests" / "namespace.yaml").read_text())["metadata"]["name"]
    assert {
        "namespaceSelector": {"kubernetes.io/metadata.name": namespace},
        "podSelector": {"app.kubernetes.io/name": manager_labels["app.kubernetes.io/name"]},
    } in peers
    assert {
        "namespaceSelector": {"kubernetes.io/metadata.name": "open-cluster-management-agent-addon"}
    } in peers


def test_the_readme_containerfile_is_the_sample_file_without_its_comments() -> None:
    lines = (MINE / "Containerfile").read_text().splitlines(keepends=True)
    assert readme_blocks("Write a scorer", "dockerfile") == [
        "".join(x for x in lines if not x.startswith("#"))
    ]


def test_one_token_secret_name_joins_the_scorer_the_registration_and_the_agents_copy() -> None:
    """The Secret the Deployment mounts, the one the DynamicScorer names and the one the hub delivers
    to every agent are the same name and key, and the delivered copy is bound to the scoring URL."""
    [registration] = documents("dynamicscorer.yaml")
    ref = registration["spec"]["scoring"]["auth"]["tokenSecretRef"]
    # the scorer's side: the mounted Secret's key is the file TOKEN_FILE names, which cpu_free.py reads
    deployment = next(d for d in documents("deploy.yaml") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [volume] = pod["volumes"]
    [container] = pod["containers"]
    [mount] = container["volumeMounts"]
    assert volume["secret"]["secretName"] == ref["name"] and mount["name"] == volume["name"]
    assert mount.get("readOnly") is True and volume["secret"].get("optional") is not True
    [item] = volume["secret"]["items"]
    token_file = {e["name"]: e["value"] for e in container["env"]}["TOKEN_FILE"]
    assert item["key"] == ref["key"] and token_file == f"{mount['mountPath']}/{item['path']}"
    assert 'os.environ.get("TOKEN_FILE")' in (MINE / "cpu_free.py").read_text()

    # the agents' side: a ManifestWorkReplicaSet over a Placement of the same namespace
    delivery = {d["kind"]: d for d in documents("token-for-agents.yaml")}
    mwrs = delivery["ManifestWorkReplicaSet"]
    namespace = mwrs["metadata"]["namespace"]
    assert delivery["Namespace"]["metadata"]["name"] == namespace
    assert delivery["Placement"]["metadata"]["namespace"] == namespace
    assert delivery["ManagedClusterSetBinding"]["metadata"]["namespace"] == namespace
    assert (
        delivery["ManagedClusterSetBinding"]["spec"]["clusterSet"]
        in delivery["Placement"]["spec"]["clusterSets"]
    )
    assert mwrs["spec"]["placementRefs"] == [{"name": delivery["Placement"]["metadata"]["name"]}]
    [secret] = mwrs["spec"]["manifestWorkTemplate"]["workload"]["manifests"]
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == ref["name"]
    assert secret["metadata"]["namespace"] == DEFAULT_INSTALL_NAMESPACE  # where the agents read it
    assert set(secret["data"]) == {ref["key"]}
    assert secret["data"][ref["key"]] == "REPLACE-WITH-THE-TOKEN-IN-BASE64"  # no usable token ships
    allowed = secret["metadata"]["annotations"][ALLOWED_HOSTS_ANNOTATION]
    scoring_url = (
        registration["spec"]["configURL"].removesuffix("/config") + registration["spec"]["scoring"]["path"]
    )
    assert listed_destination(allowed, scoring_url), (allowed, scoring_url)
    assert not listed_destination(allowed, "http://prometheus-k8s.monitoring.svc:9090/api/v1/query_range")
