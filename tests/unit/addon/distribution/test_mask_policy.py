"""``maskPolicy``: Skip keeps a masked pair out; Score sends it marked ``masked`` when there is a default."""

from __future__ import annotations

import pytest

from dynamic_scoring.addon.distribution.plan import ClusterInput, ScorerInput, plan
from dynamic_scoring.addon.distribution.status import accepted_condition
from dynamic_scoring.addon.registry.models import DynamicScoringConfigSpec, Mask
from dynamic_scoring.contract.wire import ScorerSummary, dump_summaries, parse_summaries

CLUSTERS = [ClusterInput("c1", {}, "ns"), ClusterInput("c2", {}, "ns")]
MASKS = [Mask(cluster_name="c2", score_name="gpu")]


def scorer(name: str, score: str, default: int | None) -> ScorerInput:
    s = ScorerSummary(
        name=name,
        score_name=score,
        source_type="None",
        scoring_endpoint="http://s:1/scoring",
        scoring_interval=30,
        missing_data_score=default,
    )
    return ScorerInput(name, "2026-01-01T00:00:00Z", s, True)


def test_skip_is_the_default_and_leaves_the_pair_out() -> None:
    p = plan([scorer("g", "gpu", -100)], MASKS, CLUSTERS)
    assert [s.score_name for s in p.clusters["c2"]] == []
    assert p.problems == ()


def test_score_sends_the_masked_pair_marked_and_only_there() -> None:
    p = plan([scorer("g", "gpu", -100)], MASKS, CLUSTERS, mask_policy="Score")
    (on_c1,), (on_c2,) = p.clusters["c1"], p.clusters["c2"]
    assert on_c1.masked is None and on_c2.masked is True and on_c2.missing_data_score == -100
    assert p.scorers["g"].clusters == ("c1", "c2")
    assert "masked on c2, where the agent writes the default score -100" in p.scorers["g"].message
    assert p.problems == ()
    # The agent decodes what the ConfigMap carries.
    decoded, errors = parse_summaries(dump_summaries(p.clusters["c2"]))
    assert errors == [] and decoded[0].masked is True


def test_score_without_a_default_is_skipped_and_warned_on_the_config() -> None:
    p = plan([scorer("g", "gpu", None)], MASKS, CLUSTERS, mask_policy="Score")
    assert p.clusters["c2"] == ()
    assert [pr.field for pr in p.problems] == ["spec.maskPolicy"]
    cond = accepted_condition(None, None, p)
    assert (cond.status, cond.reason) == ("True", "AcceptedWithWarnings")
    assert "state no spec.missingData.score" in cond.message and "g" in cond.message


@pytest.mark.parametrize(("written", "read"), [("score", "Score"), ("Skip", "Skip"), (None, "Skip")])
def test_mask_policy_spellings(written: str | None, read: str) -> None:
    data = {} if written is None else {"maskPolicy": written}
    assert DynamicScoringConfigSpec.model_validate(data).mask_policy == read
