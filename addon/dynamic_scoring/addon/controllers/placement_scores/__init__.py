"""Hub controllers over the AddOnPlacementScores of our addon (see `expiry` and `external`)."""

from __future__ import annotations

from dynamic_scoring.addon.controllers.placement_scores.expiry import score_expiry_controller
from dynamic_scoring.addon.controllers.placement_scores.external import external_agent_scores_controller

__all__ = ["external_agent_scores_controller", "score_expiry_controller"]
