from __future__ import annotations

import pytest

from dynamic_scoring.addon.config.deployment_config import ImageMirror
from dynamic_scoring.addon.render.images import apply_mirrors, cluster_mirrors, mirror_image

IMAGE = "quay.io/open-cluster-management/dynamic-scoring:0.1.0"


@pytest.mark.parametrize(
    ("source", "mirror", "expected"),
    [
        (
            "quay.io/open-cluster-management",
            "mirror.example.com/ocm",
            "mirror.example.com/ocm/dynamic-scoring:0.1.0",
        ),
        (
            "quay.io/open-cluster-management/",
            "mirror.example.com/ocm/",
            "mirror.example.com/ocm/dynamic-scoring:0.1.0",
        ),
        ("quay.io", "m.example.com", "m.example.com/open-cluster-management/dynamic-scoring:0.1.0"),
        ("docker.io", "m.example.com", IMAGE),
        ("", "m.example.com/flat", "m.example.com/flat/dynamic-scoring:0.1.0"),
        ("", "", "dynamic-scoring:0.1.0"),
    ],
)
def test_mirror_image(source: str, mirror: str, expected: str) -> None:
    assert mirror_image(IMAGE, ImageMirror(mirror=mirror, source=source)) == expected


def test_last_changing_rule_wins_and_rules_see_the_original() -> None:
    rules = [
        ImageMirror(source="quay.io", mirror="first.example.com"),
        ImageMirror(source="first.example.com", mirror="never.example.com"),
        ImageMirror(source="quay.io/open-cluster-management", mirror="second.example.com"),
        ImageMirror(source="docker.io", mirror="unrelated.example.com"),
    ]
    assert apply_mirrors(IMAGE, rules) == "second.example.com/dynamic-scoring:0.1.0"


def test_malformed_cluster_annotation_is_ignored() -> None:
    cluster = {"metadata": {"annotations": {"open-cluster-management.io/image-registries": "{not json"}}}
    assert cluster_mirrors(cluster) == ()
