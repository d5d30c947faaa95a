"""The AddOnPlacementScore object name for a score name, exactly as upstream derives it.

Existing Placements refer to these names (``addOn.resourceName``), so the rules are upstream's, step
by step, including the ones that cannot change the result any more; ``a..b`` stays invalid and
distinct score names may collide (``col_a`` and ``col-a``): ``dynamic_scoring.agent.plan.plan_summaries``
rejects the later of two publishing entries that collide, and the hub's distribution plan reports such
scorers before sending them.  Shared by both sides so the hub predicts exactly the agent's names.
"""

from __future__ import annotations

import re

_OUTSIDE = re.compile(r"[^a-z0-9.-]")
_DASHES = re.compile(r"-{2,}")
_MAX = 253


def _alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def aps_name(score_name: str) -> str:
    """Sanitise ``score_name`` into a DNS-subdomain-like name: ``sample_my_score`` → ``sample-my-score``."""
    if not score_name:
        return "score"
    name = score_name.lower()
    name = _OUTSIDE.sub("-", name)
    name = _DASHES.sub("-", name)
    name = name.strip("-.")
    if len(name) > _MAX:
        name = name[:_MAX]
        while name and not _alnum(name[-1]):
            name = name[:-1]
    if not name:
        return "score"
    if not _alnum(name[0]):
        name = "a" + name
    if not _alnum(name[-1]):
        name = name + "a"
    return name


__all__ = ["aps_name"]
