"""The packaging that cannot be run here, checked by reading it: Containerfile, Chart metadata, generator.

There is no container engine on this machine, so the image is never built in tests.  What can
drift silently is checked instead: the image's user and version label, the entry points the
manifests call, the paths the Containerfile copies, and that the chart's version, default image
and generated templates follow pyproject.toml and manifests/.  The rendered chart is compared
with `kubectl kustomize manifests/` by e2e/tests/test_install_chart.py (real helm and kubectl).
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.config.variables import MONITORING_CLUSTER_ROLES
from e2e import chartgen, image
from e2e.image import DISTRIBUTIONS

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dynamic-scoring"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "a continuation line runs off the end of the Containerfile"
    return out


def final_stage(instrs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (w, _) in enumerate(instrs) if w == "FROM"]
    assert starts, "no FROM"
    return instrs[starts[-1] :]


def labels(args: str) -> dict[str, str]:
    return dict(tok.split("=", 1) for tok in shlex.split(args))


CONTAINERFILE = instructions((REPO / "Containerfile").read_text())


def test_the_image_runs_as_a_non_root_user() -> None:
    users = [a for w, a in final_stage(CONTAINERFILE) if w == "USER"]
    assert users, "the final stage sets no USER, so the image runs as root"
    user = users[-1].split(":")[0]
    assert user not in {"0", "root"}, users[-1]
    assert user.isdigit(), "a numeric uid lets runAsNonRoot verify it without /etc/passwd"
    manager = yaml.safe_load((REPO / "manifests/manager.yaml").read_text())
    assert manager["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(user)


def test_the_version_label_is_the_project_version() -> None:
    found: dict[str, str] = {}
    for word, args in final_stage(CONTAINERFILE):
        if word == "LABEL":
            found.update(labels(args))
    assert found.get("org.opencontainers.image.version") == pyproject()["project"]["version"]


def test_both_entry_points_the_manifests_call_are_console_scripts_the_image_installs() -> None:
    scripts = {
        name
        for member in DISTRIBUTIONS
        for name in tomllib.loads((REPO / member / "pyproject.toml").read_text())["project"]["scripts"]
    }
    manager = yaml.safe_load((REPO / "manifests/manager.yaml").read_text())
    agent = (REPO / "templates/agent/deployment.yaml.j2").read_text()
    (agent_cmd,) = re.findall(r"command:\s*\[([a-z-]+)\]", agent)
    called = {manager["spec"]["template"]["spec"]["containers"][0]["command"][0], agent_cmd}
    assert called == {"dynamic-scoring-addon", "dynamic-scoring-agent"}
    assert called <= set(scripts)
    runs = " ".join(a for w, a in CONTAINERFILE if w == "RUN")
    assert re.search(
        r"pip install --no-cache-dir --no-index --no-deps /wheels/project/dynamic_scoring\*\.whl", runs
    ), "the project's three wheels (and so their console scripts) are installed"
    assert "-e " not in runs, "an editable install needs the source tree, which the final stage does not copy"
    env = " ".join(a for w, a in final_stage(CONTAINERFILE) if w == "ENV")
    assert "PATH=/opt/venv/bin" in env, "the venv's console scripts must be on PATH for `command:`"


def test_the_containerfile_installs_only_from_the_wheelhouse_make_image_writes() -> None:
    """Every COPY source is a wheelhouse directory `e2e.image` writes, and pip never reaches an index."""
    copied = [a.split()[0] for w, a in CONTAINERFILE if w == "COPY" and not a.startswith("--from")]
    project = image.WHEELHOUSE.relative_to(REPO) / "project"
    per_arch = image.WHEELHOUSE.relative_to(REPO) / "linux-${TARGETARCH}"
    assert [c.rstrip("/") for c in copied] == [per_arch.as_posix(), project.as_posix()]
    for word, args in CONTAINERFILE:
        if word == "RUN" and "pip install" in args:
            assert args.count("pip install") == args.count("--no-index"), args
    ignore = (REPO / ".dockerignore").read_text().split()
    assert ignore[ignore.index("*") + 1] == "!dist/wheelhouse/", "the build context is the wheelhouse only"


def test_chart_version_and_default_image_follow_pyproject_and_the_kustomization() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = pyproject()["project"]["version"]
    assert chart["version"] == version and chart["appVersion"] == version
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    repository, _, tag = chartgen.kustomize_image().rpartition(":")
    assert values["image"]["repository"] == repository
    assert (values["image"]["tag"] or chart["appVersion"]) == tag


def obj(kind: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, **extra}


def test_generator_templates_the_image_and_leaves_crds_and_the_namespace_to_helm() -> None:
    image = "registry.example/ds:9.9"
    deployment = obj(
        "Deployment",
        "m",
        spec={"containers": [{"image": image, "env": [{"name": "AGENT_IMAGE", "value": image}]}]},
    )
    files = chartgen.render_files(
        [obj("Namespace", "dynamic-scoring"), obj("CustomResourceDefinition", "x.example.io"), deployment],
        image,
    )
    assert set(files) == {"crds/x.example.io.yaml", "templates/deployment-m.yaml"}
    text = files["templates/deployment-m.yaml"]
    assert image not in text
    assert text.count(chartgen.IMAGE_INCLUDE) == 2
    assert all(t.startswith(chartgen.GENERATED) for t in files.values())


def test_generator_refuses_what_helm_would_misread() -> None:
    with pytest.raises(chartgen.ChartGenError, match="Helm would parse"):
        chartgen.render_files([obj("ConfigMap", "c", data={"t": "{{ x }}"})], "i:1")
    with pytest.raises(chartgen.ChartGenError, match="cannot template"):
        chartgen.render_files([obj("ConfigMap", "c", data={"note": "uses i:1 inside"})], "i:1")


def test_every_generated_file_in_the_chart_is_listed_and_hand_written_files_are_not_touched() -> None:
    generated = chartgen.generated_paths()
    assert {p for p in generated if p.startswith("crds/")}, "no generated CRDs in the chart"
    hand_written = {
        "values.schema.json",
        "templates/_helpers.tpl",
        "templates/NOTES.txt",
        "templates/poddisruptionbudget.yaml",
        "templates/service-metrics.yaml",
        "templates/servicemonitor.yaml",
        "templates/rbac-multikueue-order.yaml",
        "templates/rbac-multikueue-dispatch.yaml",
    }
    assert not hand_written & generated
    for p in hand_written:
        assert (CHART / p).is_file()
    assert not (CHART / "templates/guard.yaml").exists(), "the chart follows the release namespace now"


def manager_deployment(**spec: Any) -> dict[str, Any]:
    """The manager Deployment's shape, as chartgen expects it from manifests/."""
    labels = {"app.kubernetes.io/name": chartgen.MANAGER, "app.kubernetes.io/part-of": "dynamic-scoring"}
    container = {
        "name": "manager",
        "image": "i:1",
        "imagePullPolicy": "IfNotPresent",
        "args": ["manager", "--log-level=info"],
        "env": [
            {"name": chartgen.MULTIKUEUE_ORDER_ENV, "value": "false"},
            {"name": "DYNAMIC_SCORING_MULTIKUEUE_DISPATCH", "value": "false"},
            {"name": "DYNAMIC_SCORING_MULTIKUEUE_DISPATCH_DELAY", "value": "10"},
            *({"name": env, "value": ""} for env, _ in chartgen.TOKEN_ALLOW_ENVS),
        ],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
    }
    pod = {
        "serviceAccountName": chartgen.MANAGER,
        "securityContext": {"runAsNonRoot": True, **chartgen.PINNED_USER},
        "containers": [container],
    }
    return obj(
        "Deployment",
        chartgen.MANAGER,
        spec={"replicas": 2, "template": {"metadata": {"labels": labels}, "spec": pod}, **spec},
    )


def test_generator_turns_the_managers_fields_into_values_whose_defaults_are_the_manifests() -> None:
    ns = obj("Namespace", "dynamic-scoring")
    dep = manager_deployment()
    dep["metadata"]["namespace"] = "dynamic-scoring"
    text = chartgen.render_files([ns, dep], "i:1")[f"templates/deployment-{chartgen.MANAGER}.yaml"]
    for template in (
        "replicas: {{ .Values.manager.replicas }}",
        "- --log-level={{ .Values.manager.logLevel }}",
        "imagePullPolicy: {{ .Values.manager.imagePullPolicy }}",
        "{{- toYaml .Values.manager.resources | nindent 10 }}",
        "namespace: {{ .Release.Namespace }}",
        "{{- with .Values.manager.tolerations }}",
        "priorityClassName: {{ . | quote }}",
        '{{- if include "dynamic-scoring.pinUser" . }}',
        "value: {{ .Values.multikueueOrder.enabled | toString | quote }}",
        "value: {{ .Values.multikueueOrder.dispatch.enabled | toString | quote }}",
        "value: {{ .Values.multikueueOrder.dispatch.delaySeconds | toString | quote }}",
        "{{- with .Values.agentToken.destinationAllow }}",
        "{{- with .Values.agentToken.audienceAllow }}",
        "{{- with .Values.agentToken.monitoringRoleAllow }}",
        'value: {{ join " " . | quote }}',
    ):
        assert template in text, template
    assert "HELMTOKEN" not in text
    assert "dynamic-scoring\n" not in text.replace("part-of: dynamic-scoring\n", "")


def test_generator_refuses_a_values_default_that_differs_from_the_manifests() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["manager"]["replicas"] = 3
    with pytest.raises(chartgen.ChartGenError, match=r"manager.replicas is 3 but manifests/ have 2"):
        chartgen.render_files([manager_deployment()], "i:1", values)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["installStrategy"]["type"] = "Placements"
    cma = obj("ClusterManagementAddOn", chartgen.ADDON, spec={"installStrategy": {"type": "Manual"}})
    with pytest.raises(chartgen.ChartGenError, match="installStrategy"):
        chartgen.render_files([cma], "i:1", values)


def test_generator_refuses_a_manager_pod_that_pins_another_user() -> None:
    """The chart's OpenShift form leaves out exactly the user manifests/ pin; another one is a mistake."""
    dep = manager_deployment()
    dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 1000
    with pytest.raises(chartgen.ChartGenError, match="the manager's pod pins"):
        chartgen.render_files([dep], "i:1")


def test_generator_refuses_a_manager_without_the_multikueue_switches_at_the_values_defaults() -> None:
    for env, value in (
        (chartgen.MULTIKUEUE_ORDER_ENV, None),
        (chartgen.MULTIKUEUE_ORDER_ENV, "true"),
        ("DYNAMIC_SCORING_MULTIKUEUE_DISPATCH", "true"),
        ("DYNAMIC_SCORING_MULTIKUEUE_DISPATCH_DELAY", "5"),
    ):
        dep = manager_deployment()
        container = dep["spec"]["template"]["spec"]["containers"][0]
        container["env"] = [e for e in container["env"] if e["name"] != env]
        if value is not None:
            container["env"].append({"name": env, "value": value})
        with pytest.raises(chartgen.ChartGenError, match=env):
            chartgen.render_files([dep], "i:1")


def test_generator_refuses_a_manager_whose_agent_token_bound_is_not_empty() -> None:
    """The chart's default (no destination allowed) must be what manifests/ install."""
    for env, _ in chartgen.TOKEN_ALLOW_ENVS:
        dep = manager_deployment()
        container = dep["spec"]["template"]["spec"]["containers"][0]
        container["env"] = [
            e if e["name"] != env else {"name": env, "value": "https://x"} for e in container["env"]
        ]
        with pytest.raises(chartgen.ChartGenError, match=env):
            chartgen.render_files([dep], "i:1")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["agentToken"]["destinationAllow"] = ["https://x"]
    with pytest.raises(chartgen.ChartGenError, match=r"agentToken\.destinationAllow is"):
        chartgen.render_files([manager_deployment()], "i:1", values)


def test_generator_refuses_a_manager_field_it_would_template_over() -> None:
    dep = manager_deployment()
    dep["spec"]["template"]["spec"]["nodeSelector"] = {"a": "b"}
    with pytest.raises(chartgen.ChartGenError, match="nodeSelector"):
        chartgen.render_files([dep], "i:1")


def test_values_yaml_keeps_the_one_repository_line_the_release_workflow_rewrites() -> None:
    text = (CHART / "values.yaml").read_text()
    assert len(re.findall(r"(?m)^  repository: ", text)) == 1


def test_the_schemas_monitoring_roles_are_the_ones_an_adc_may_bind() -> None:
    """The chart refuses at install what the manager would refuse at start (--agent-monitoring-role-allow)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    roles = schema["properties"]["agentToken"]["properties"]["monitoringRoleAllow"]["items"]["enum"]
    assert tuple(roles) == MONITORING_CLUSTER_ROLES
