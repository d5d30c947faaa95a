"""Hub controllers over the AddOnPlacementScores our agents write (see `expiry`)."""

from __future__ import annotations

from addon.controllers.scores.expiry import score_expiry_controller

__all__ = ["score_expiry_controller"]
