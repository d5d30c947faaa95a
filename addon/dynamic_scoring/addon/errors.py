"""Errors the pure parts raise, worded for the place a user reads them (a condition or an Event)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    """Something the user should fix, named by where it is (``spec.source.host``, ``DynamicScorer x``).

    Scorer resolution and distribution planning report these into the condition of the object the
    user wrote; ``str()`` is the text they read there.  (A stored object that cannot be read at all
    is a ``SpecProblem``, which carries the object's name instead.)
    """

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class AddonConfigError(ValueError):
    """A config the user wrote cannot be applied; `field` names where, the message says why.

    A reconcile turns this into `ManifestApplied=False/ManifestWorkApplyFailed` plus a Warning
    Event on the ManagedClusterAddOn, and keeps the last good work in place.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class WorkTooLargeError(ValueError):
    """One manifest alone exceeds the per-work size limit, so no packing can place it."""


class TemplatesUnavailableError(RuntimeError):
    """The manager cannot render its agent: a template is missing from its installation.

    A packaging defect, not a user's config: an image or a pip install without the wheel's
    `dynamic_scoring/addon/templates`.  Reported on the ManagedClusterAddOn (`ManifestApplied=False`, reason
    `AgentTemplatesUnavailable`) so that it is seen where a broken addon is looked at; nothing
    heals it but a complete installation.
    """
