"""Image mirror rules, applied the way addon-framework applies them.

Rules come from the ADC's `spec.registries`; only when none of them changes the image are the
ManagedCluster's `open-cluster-management.io/image-registries` annotation rules tried.  Each rule is
tried against the original image and the last one that changes it wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dynamic_scoring.addon.config.deployment_config import ImageMirror

IMAGE_REGISTRIES_ANNOTATION = "open-cluster-management.io/image-registries"


def mirror_image(image: str, rule: ImageMirror) -> str:
    """`image` rewritten by one rule, or unchanged when the rule does not apply.

    With a `source`, that prefix is replaced by `mirror` (a plain string prefix, as Go's
    `strings.HasPrefix`); without one, every registry is replaced: the image becomes
    `mirror/<last path segment>`.
    """
    source, mirror = rule.source.rstrip("/"), rule.mirror.rstrip("/")
    last = image.rsplit("/", 1)[-1]
    if not source:
        return f"{mirror}/{last}" if mirror else last
    if not image.startswith(source):
        return image
    return mirror + image[len(source) :]


def apply_mirrors(image: str, rules: Sequence[ImageMirror]) -> str:
    """The image after the last rule that changes it (the framework's `OverrideImage`)."""
    result = image
    for rule in rules:
        candidate = mirror_image(image, rule)
        if candidate != image:
            result = candidate
    return result


def cluster_mirrors(cluster: dict[str, Any] | None) -> tuple[ImageMirror, ...]:
    """Mirror rules from a ManagedCluster's image-registries annotation; none if absent or malformed.

    A malformed annotation is the cluster admin's concern, not a reason to stop delivering the
    agent; the framework logs and ignores it too.
    """
    raw = (((cluster or {}).get("metadata") or {}).get("annotations") or {}).get(IMAGE_REGISTRIES_ANNOTATION)
    if not raw:
        return ()
    try:
        doc = json.loads(raw)
        return tuple(
            ImageMirror(mirror=str(r.get("mirror", "")), source=str(r.get("source") or ""))
            for r in doc.get("registries") or []
        )
    except (ValueError, AttributeError, TypeError):
        return ()


def resolve_image(image: str, adc_rules: Sequence[ImageMirror], cluster: dict[str, Any] | None) -> str:
    """ADC registries first; the cluster annotation only when they leave the image unchanged."""
    mirrored = apply_mirrors(image, adc_rules)
    if mirrored != image:
        return mirrored
    return apply_mirrors(image, cluster_mirrors(cluster))
