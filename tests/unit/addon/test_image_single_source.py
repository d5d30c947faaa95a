"""The shipped image is written down once, in manifests/kustomization.yaml; the renderer's fallback
must agree with it, or a manager started by hand would deploy a different agent."""

from __future__ import annotations

from pathlib import Path

import yaml

from addon.constants import DEFAULT_IMAGE, DEFAULT_IMAGE_REPOSITORY, DEFAULT_IMAGE_TAG, IMAGE_NAME

REPO = Path(__file__).resolve().parents[3]


def test_kustomize_images_entry_is_the_renderer_default() -> None:
    kustomization = yaml.safe_load((REPO / "manifests/kustomization.yaml").read_text())
    (entry,) = [i for i in kustomization["images"] if i["name"] == IMAGE_NAME]
    assert (entry["newName"], str(entry["newTag"])) == (DEFAULT_IMAGE_REPOSITORY, DEFAULT_IMAGE_TAG)
    assert f"{entry['newName']}:{entry['newTag']}" == DEFAULT_IMAGE


def test_manager_deployment_uses_the_placeholder_the_images_entry_rewrites() -> None:
    manager = yaml.safe_load((REPO / "manifests/manager.yaml").read_text())
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE_NAME
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DYNAMIC_SCORING_AGENT_IMAGE"] == IMAGE_NAME
