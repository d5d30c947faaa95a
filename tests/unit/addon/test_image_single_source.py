"""The image repository is written down once, addon/constants.py DEFAULT_IMAGE_REPOSITORY, and every
file that cannot import it carries a copy this test compares: a copy that drifts would install,
document or publish an image nobody pushes.  The old default, quay.io/open-cluster-management, is an
organisation this project does not publish to; no shipped file may name it again."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.constants import (
    DEFAULT_IMAGE,
    DEFAULT_IMAGE_REPOSITORY,
    DEFAULT_IMAGE_TAG,
    IMAGE_NAME,
)

REPO = Path(__file__).resolve().parents[3]
WORKFLOW = REPO / ".github/workflows/release.yaml"
# Every shipped file that names the image: the installs, the samples, the build, the release, the docs.
NAMING_FILES = sorted(
    {
        REPO / "manifests/kustomization.yaml",
        REPO / "charts/dynamic-scoring/values.yaml",
        REPO / "Containerfile",
        WORKFLOW,
        REPO / "README.md",
        *REPO.glob("samples/**/*.yaml"),
        *REPO.glob("docs/*.md"),
    }
)
# `registry.host[:port]/path/dynamic-scoring[:tag|@digest]`: a pullable reference to our image.
# Hosts reserved for examples (RFC 2606 example.*, localhost) and github.com (the source) are not
# image references.
REFERENCE = re.compile(
    r"(?<![\w./-])((?:[a-z0-9-]+\.)+[a-z]{2,}(?::\d+)?(?:/[a-z0-9._-]+)*/dynamic-scoring)\b(?![\w/-])"
)
NOT_A_REGISTRY = re.compile(r"(^|\.)example(\.[a-z]+)?(:\d+)?/|^localhost|^github\.com/")
OLD_ORGANISATION = "quay.io/open-cluster-management"


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def images(node: Any) -> list[str]:
    """Every `image:` value in a parsed manifest."""
    if isinstance(node, dict):
        own = [node["image"]] if isinstance(node.get("image"), str) else []
        return own + [i for v in node.values() for i in images(v)]
    if isinstance(node, list):
        return [i for v in node for i in images(v)]
    return []


def test_the_constant_is_the_project_registry_and_the_tag_is_the_version() -> None:
    assert DEFAULT_IMAGE_REPOSITORY == "ghcr.io/dynamic-scoring/dynamic-scoring"
    assert DEFAULT_IMAGE_REPOSITORY.rpartition("/")[2] == IMAGE_NAME
    assert f"{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}" == DEFAULT_IMAGE
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(rf'(?m)^version = "{re.escape(DEFAULT_IMAGE_TAG)}"$', pyproject)


def test_kustomize_images_entry_is_the_constant() -> None:
    kustomization = yaml.safe_load((REPO / "manifests/kustomization.yaml").read_text())
    (entry,) = [i for i in kustomization["images"] if i["name"] == IMAGE_NAME]
    assert (entry["newName"], str(entry["newTag"])) == (DEFAULT_IMAGE_REPOSITORY, DEFAULT_IMAGE_TAG)


def test_chart_default_repository_is_the_constant() -> None:
    values = yaml.safe_load((REPO / "charts/dynamic-scoring/values.yaml").read_text())
    assert values["image"]["repository"] == DEFAULT_IMAGE_REPOSITORY


def test_sample_manifests_run_the_default_image() -> None:
    found = {
        rel(p): image
        for p in REPO.glob("samples/**/*.yaml")
        for doc in yaml.safe_load_all(p.read_text())
        for image in images(doc)
        if image.split("@")[0].rsplit(":", 1)[0].endswith(f"/{IMAGE_NAME}")
    }
    assert found, "no sample names the project's image; this test would check nothing"
    assert {p: i for p, i in found.items() if i != DEFAULT_IMAGE} == {}


def test_release_workflow_defaults_to_the_constant() -> None:
    env = yaml.safe_load(WORKFLOW.read_text())["env"]
    m = re.fullmatch(r"\$\{\{\s*vars\.IMAGE_REPOSITORY\s*\|\|\s*'([^']+)'\s*\}\}", env["IMAGE_REPOSITORY"])
    assert m, f"IMAGE_REPOSITORY is not `vars.IMAGE_REPOSITORY || '<default>'`: {env['IMAGE_REPOSITORY']}"
    assert m[1] == DEFAULT_IMAGE_REPOSITORY


@pytest.mark.parametrize("path", NAMING_FILES, ids=rel)
def test_every_reference_names_the_constant_and_none_the_old_organisation(path: Path) -> None:
    text = path.read_text()
    assert OLD_ORGANISATION not in text
    refs = {m[1] for m in REFERENCE.finditer(text) if not NOT_A_REGISTRY.search(m[1])}
    assert refs <= {DEFAULT_IMAGE_REPOSITORY}


def test_the_reference_scan_finds_what_it_must() -> None:
    """The scan above passes vacuously if its pattern matches nothing; it must see these."""
    text = "image: quay.io/x/dynamic-scoring:1\nghcr.io/dynamic-scoring/dynamic-scoring@sha256:ab\n"
    found = {m[1] for m in REFERENCE.finditer(text)}
    assert found == {"quay.io/x/dynamic-scoring", "ghcr.io/dynamic-scoring/dynamic-scoring"}
    ignored = "registry.example.com/dynamic-scoring github.com/dynamic-scoring/dynamic-scoring"
    assert [m[1] for m in REFERENCE.finditer(ignored) if not NOT_A_REGISTRY.search(m[1])] == []
    assert not REFERENCE.search("dynamic-scoring-addon ghcr.io/dynamic-scoring/dynamic-scoring-other")


def test_manager_deployment_uses_the_placeholder_the_images_entry_rewrites() -> None:
    manager = yaml.safe_load((REPO / "manifests/manager.yaml").read_text())
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE_NAME
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DYNAMIC_SCORING_AGENT_IMAGE"] == IMAGE_NAME
