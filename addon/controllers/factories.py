"""The one list of controller factories the manager runs.

A new group of hub controllers is one more line here: a function taking the `HubContext` and
returning its `Controller`s (see `addon.controllers.ControllerFactory`).
"""

from __future__ import annotations

from addon.controllers import ControllerFactory
from addon.controllers.distribution.controller import distribution_controller
from addon.controllers.lifecycle import lifecycle_controllers
from addon.controllers.placement_scores import external_agent_scores_controller, score_expiry_controller
from addon.controllers.registry.controller import scorer_controller

CONTROLLER_FACTORIES: list[ControllerFactory] = [
    lifecycle_controllers,
    scorer_controller,
    distribution_controller,
    score_expiry_controller,
    external_agent_scores_controller,
]
