"""OCM Placement's ranking for a replay: the placement model's own rules, without building a hub.

``dynamic_scoring.ctl.placement_model.explain`` recomputes a decision from hub objects (clusters,
cluster sets, bindings, AddOnPlacementScores, PlacementDecisions); a replay asks tens of thousands of
times "which k clusters now", where only the scores and the previous decision change.  So this
module calls the model's prioritizer functions directly (``prioritizer_weights``, ``balance_scores``,
``steady_scores``, ``addon_score``) and sorts as the model does (total descending, then name), with
no filters: every cluster is a candidate, none is tainted, no other Placement exists (so Balance
gives everyone 100).  ``tests/unit/bench/test_quality_replay.py`` checks it against ``explain`` on
random inputs.

Three Placement forms are compared (:data:`FORMS`):

* ``additive``: the usual form of OCM's docs, no ``mode`` (Additive), so Balance 1 and Steady 1 are
  added; Steady's 100 for the clusters already chosen outweighs any AddOn difference (at most 100),
  so the first decision sticks (a challenger at 100 against an incumbent at 0 only ties, and the
  name breaks the tie);
* ``exact``: ``mode: Exact`` with only the AddOn score: the top k by score, every step;
* ``margin``: the README's recipe, ``mode: Exact`` with the AddOn score at weight 10 and Steady at
  weight 1: a challenger must beat an incumbent by more than 100 x 1 / 10 = 10 points.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Literal

from dynamic_scoring.ctl import placement_model as pm
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm import placement_policy as pp

Form = Literal["additive", "exact", "margin"]
FORMS: tuple[Form, ...] = ("additive", "exact", "margin")

NOW = dt.datetime(2023, 11, 15, tzinfo=dt.UTC)
"""Any instant: the replay's scores carry no ``validUntil``, so none expires."""


def placement(k: int, form: Form, resource: str, score: str, name: str = "quality") -> JSON:
    """The Placement: ``numberOfClusters`` k and the AddOn score, in ``form`` (see the module docstring)."""
    addon: JSON = {
        "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": resource, "scoreName": score}},
        "weight": 10 if form == "margin" else 1,
    }
    configurations = [addon]
    if form == "margin":
        configurations.append({"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 1})
    policy: JSON = {"configurations": configurations}
    if form != "additive":
        policy["mode"] = "Exact"
    return {
        "metadata": {"namespace": "quality", "name": name},
        "spec": {"numberOfClusters": k, "prioritizerPolicy": policy},
    }


def score_object(cluster: str, resource: str, score: str, value: int) -> JSON:
    """The AddOnPlacementScore a cluster's agent would publish: one item, no ``validUntil``."""
    return {
        "metadata": {"namespace": cluster, "name": resource},
        "status": {"scores": [{"name": score, "value": value}]},
    }


def rank(
    placement_obj: JSON,
    names: Sequence[str],
    scores: Mapping[str, int] | None,
    previous: Sequence[str],
) -> tuple[str, ...]:
    """The clusters the Placement picks now: ``numberOfClusters`` of ``names``, best first.

    Args:
        placement_obj: from :func:`placement`.
        names: every candidate cluster.
        scores: the published AddOn score per cluster (a missing cluster has no score and counts 0,
            as in the model); None when no cluster publishes one.
        previous: the clusters the Placement's decision names now (Steady's "already decided").
    """
    weights = pp.prioritizer_weights(placement_obj)
    decided = set(previous)
    totals = dict.fromkeys(names, 0)
    for coordinate, weight in weights:
        if coordinate.builtin == pp.BALANCE:
            table = pm.balance_scores(names, [])
        elif coordinate.builtin == pp.STEADY:
            table = pm.steady_scores(names, decided)
        elif coordinate.builtin:
            raise ValueError(f"prioritizer {coordinate.builtin} is not modelled by the replay")
        else:
            table = {
                n: pm.addon_score(
                    None
                    if scores is None or n not in scores
                    else score_object(n, coordinate.resource, coordinate.score, scores[n]),
                    coordinate,
                    NOW,
                )
                for n in names
            }
        for n in names:
            totals[n] += table[n][0] * weight
    ranked = sorted(names, key=lambda n: (-totals[n], n))
    number = (placement_obj.get("spec") or {}).get("numberOfClusters")
    return tuple(ranked if number is None else ranked[: max(0, int(number))])


__all__ = ["FORMS", "Form", "placement", "rank", "score_object"]
