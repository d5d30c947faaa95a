"""The one list of controller factories the manager runs.

A new group of hub controllers is one more line here: a function taking the `HubContext` and
returning its `Controller`s (see `addon.controllers.ControllerFactory`).
"""

from __future__ import annotations

from addon.controllers import ControllerFactory
from addon.controllers.lifecycle import lifecycle_controllers

CONTROLLER_FACTORIES: list[ControllerFactory] = [
    lifecycle_controllers,
]
