"""The AddOnPlacementScore name rule, re-exported where the agent always found it.

The rule lives in ``dynamic_scoring.ocm.naming`` because the hub applies it too (to detect score names
that would collide on one AddOnPlacementScore before distributing them); one copy keeps both sides
deriving the same name.
"""

from __future__ import annotations

from dynamic_scoring.ocm.naming import aps_name

__all__ = ["aps_name"]
