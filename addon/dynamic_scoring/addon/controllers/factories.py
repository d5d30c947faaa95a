"""The one list of controller factories the manager runs.

A new group of hub controllers is one more line here: a function taking the `HubContext` and
returning its `Controller`s (see `dynamic_scoring.addon.controllers.ControllerFactory`).
"""

from __future__ import annotations

from dynamic_scoring.addon.controllers import ControllerFactory
from dynamic_scoring.addon.controllers.distribution.controller import distribution_controller
from dynamic_scoring.addon.controllers.lifecycle import lifecycle_controllers
from dynamic_scoring.addon.controllers.multikueue import multikueue_order_controller
from dynamic_scoring.addon.controllers.multikueue.dispatch import multikueue_dispatch_controller
from dynamic_scoring.addon.controllers.placement_scores import (
    external_agent_scores_controller,
    score_expiry_controller,
)
from dynamic_scoring.addon.controllers.registry.controller import scorer_controller

CONTROLLER_FACTORIES: list[ControllerFactory] = [
    lifecycle_controllers,
    scorer_controller,
    distribution_controller,
    score_expiry_controller,
    external_agent_scores_controller,
    multikueue_order_controller,
    multikueue_dispatch_controller,
]
