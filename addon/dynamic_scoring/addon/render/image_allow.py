"""Which agent images the manager renders: the hub admin's allow-list, checked on the final image.

The agent runs with `secrets: get` in its install namespace, which by default is shared with other
addons and holds their `*-hub-kubeconfig` Secrets.  Whoever may write an AddOnDeploymentConfig (a
namespace or cluster-set admin, not necessarily a hub admin) can set its `Image` variable or its
`registries` mirrors, and a cluster's image-registries annotation rewrites the image too.  Without a
check, any of them could run code of their choice with those rights.  So the manager renders an
agent only when the image that would run, after every rewrite, lies in a repository the hub admin
allowed: the manager's own agent image's repository always, plus `--agent-image-allow` prefixes.

Matching is literal, at a path-segment boundary: `registry.example.com/team` allows
`registry.example.com/team/agent:1` and `registry.example.com/team@sha256:...`, never
`registry.example.com/teamevil/agent`.  Spellings the container runtime would normalize (`agent`
and `docker.io/library/agent`) are different strings here, so an unlisted spelling is refused rather
than guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from dynamic_scoring.addon.config.deployment_config import ImageMirror
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.images import IMAGE_REGISTRIES_ANNOTATION, apply_mirrors

AGENT_IMAGE_ALLOW_FLAG = "--agent-image-allow"
AGENT_IMAGE_ALLOW_ENV = "DYNAMIC_SCORING_AGENT_IMAGE_ALLOW"
IMAGE_VARIABLE_FIELD = "spec.customizedVariables[Image]"
REGISTRIES_FIELD = "spec.registries"

_SEPARATORS = re.compile(r"[\s,]+")


def image_repository(image: str) -> str:
    """`image` without its digest (`@sha256:...`) and its tag (a `:` after the last `/`).

    A `:` before the last `/` is a registry port (`localhost:5000/agent`), not a tag.
    """
    name = image.split("@", 1)[0]
    colon = name.rfind(":")
    return name[:colon] if colon > name.rfind("/") else name


def parse_allow_prefix(value: str) -> str:
    """One `--agent-image-allow` value as a repository prefix, without a trailing `/`.

    Raises:
        ValueError: empty, a URL, or carrying a tag or digest: it could never match a repository,
            and the admin would wonder why the image is still refused.
    """
    prefix = value.strip().rstrip("/")
    if not prefix or any(c.isspace() for c in prefix) or "://" in prefix:
        raise ValueError(f"{value!r} is not a repository prefix such as registry.example.com/team")
    if "@" in prefix or ("/" in prefix and image_repository(prefix) != prefix):
        raise ValueError(
            f"{value!r} has a tag or digest; give the repository (prefix) only, "
            f"e.g. {image_repository(prefix)!r}: every tag and digest under it is allowed"
        )
    return prefix


def parse_allow_values(values: Iterable[str]) -> tuple[str, ...]:
    """Every prefix in the flag's values; each may be a comma- or space-separated list (the env var).

    Raises:
        ValueError: a value that is not a repository prefix (`parse_allow_prefix`).
    """
    return tuple(
        parse_allow_prefix(part) for value in values for part in _SEPARATORS.split(value) if part.strip()
    )


def allowed_prefixes(agent_image: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The manager's own agent image repository, then the admin's prefixes, without repeats.

    The manager's own image is the hub admin's choice (its flag or environment), so its repository
    is always allowed: clusters whose ADC sets nothing keep working whatever the flag lists.
    """
    return tuple(dict.fromkeys((image_repository(agent_image), *(p.rstrip("/") for p in extra))))


def image_allowed(image: str, prefixes: Iterable[str]) -> bool:
    """True when the repository of `image` is one of `prefixes` or lies below one of them."""
    repository = image_repository(image)
    return any(repository == p or repository.startswith(f"{p}/") for p in prefixes)


class AgentImageNotAllowedError(AddonConfigError):
    """The agent image, after the ADC's and the cluster's rewrites, is outside the allow-list.

    A subclass so that the deploy controller gives it its own Event reason; everything that handles
    an `AddonConfigError` (keep the last good work, report on `ManifestApplied`) applies.
    """

    def __init__(self, field: str, image: str, configured: str, prefixes: Sequence[str]) -> None:
        how = f" ({configured!r} rewritten by {field})" if configured != image else ""
        super().__init__(
            field,
            f"agent image {image!r}{how} is not allowed: the manager renders only images under "
            f"{', '.join(prefixes)}. Use an image there, or have the hub admin allow its repository "
            f"with the manager flag {AGENT_IMAGE_ALLOW_FLAG}={image_repository(image)} "
            f"(env {AGENT_IMAGE_ALLOW_ENV})",
        )
        self.image = image


def check_agent_image(
    *,
    configured: str,
    image: str,
    image_variable_set: bool,
    adc_rules: Sequence[ImageMirror],
    cluster: dict[str, Any] | None,
    prefixes: Sequence[str],
) -> None:
    """Refuse `image` (what `resolve_image` made of `configured`) unless `prefixes` allow it.

    The field named is where the refused image came from: the ADC's `registries` when they rewrote
    it, the ManagedCluster's annotation when that did, else the ADC's `Image` variable.

    Raises:
        AgentImageNotAllowedError: the image is outside every allowed prefix.
    """
    if image_allowed(image, prefixes):
        return
    if apply_mirrors(configured, adc_rules) != configured:
        field = REGISTRIES_FIELD
    elif image != configured:
        name = ((cluster or {}).get("metadata") or {}).get("name", "")
        field = f"ManagedCluster {name} annotation {IMAGE_REGISTRIES_ANNOTATION}"
    elif image_variable_set:
        field = IMAGE_VARIABLE_FIELD
    else:  # the manager's own image is always allowed (allowed_prefixes); kept for a caller that differs
        field = "the manager's --agent-image"
    raise AgentImageNotAllowedError(field, image, configured, prefixes)


__all__ = [
    "AGENT_IMAGE_ALLOW_ENV",
    "AGENT_IMAGE_ALLOW_FLAG",
    "AgentImageNotAllowedError",
    "allowed_prefixes",
    "check_agent_image",
    "image_allowed",
    "image_repository",
    "parse_allow_prefix",
    "parse_allow_values",
]
