"""The External dispatcher's pure rules: which Workloads are ours, and whom to nominate when."""

from __future__ import annotations

import datetime as dt

from dynamic_scoring.addon.dispatch import (
    CONDITION,
    FIELD_MANAGER,
    MULTIKUEUE_CONTROLLER,
    Decision,
    check_config,
    condition,
    decide,
    exhausted_message,
    last_nominated,
    nomination_message,
    owners,
    waiting,
)
from dynamic_scoring.kube.jsontypes import JSON

NOW = dt.datetime(2026, 12, 4, 12, 0, 30, tzinfo=dt.UTC)
ORDER = ["c3", "c4", "c2"]
CHECKS = {"mk": "spill-over"}
ORDERS = {"spill-over": ORDER}


def check(
    controller: str = MULTIKUEUE_CONTROLLER, kind: str = "MultiKueueConfig", name: str = "spill-over"
) -> JSON:
    return {
        "metadata": {"name": "mk"},
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": kind, "name": name},
        },
    }


def entry(manager: str, time: str, *, nominations: bool = True, subresource: str = "status") -> JSON:
    fields: JSON = {"f:status": {"f:nominatedClusterNames": {}} if nominations else {"f:conditions": {}}}
    return {
        "manager": manager,
        "operation": "Update",
        "subresource": subresource,
        "time": time,
        "fieldsV1": fields,
    }


def workload(
    *nominated: str,
    state: str = "Pending",
    reserved: bool = True,
    cluster: str | None = None,
    managed: list[JSON] | None = None,
    finished: bool = False,
) -> JSON:
    conditions = [{"type": "QuotaReserved", "status": "True" if reserved else "False"}]
    if finished:
        conditions.append({"type": "Finished", "status": "True"})
    status: JSON = {"conditions": conditions, "admissionChecks": [{"name": "mk", "state": state}]}
    if nominated:
        status["nominatedClusterNames"] = list(nominated)
    if cluster:
        status["clusterName"] = cluster
    return {
        "metadata": {"name": "job-1", "namespace": "team", "managedFields": managed or []},
        "status": status,
    }


def ours(at: str) -> list[JSON]:
    return [entry("kueue-admission", "2026-12-04T11:59:00Z", nominations=False), entry(FIELD_MANAGER, at)]


def test_only_a_multikueue_check_naming_a_config_counts() -> None:
    assert check_config(check()) == "spill-over"
    assert check_config(check(controller="open-cluster-management.io/placement")) is None
    assert check_config(check(kind="ProvisioningRequestConfig")) is None
    assert check_config(check(name="")) is None
    assert check_config({}) is None


def test_a_workload_is_ours_only_while_it_waits_on_one_of_our_configs() -> None:
    found = waiting(workload(), CHECKS, ORDERS)
    assert found is not None and (found.check, found.config, found.order) == (
        "mk",
        "spill-over",
        tuple(ORDER),
    )
    # Kueue nominates only with quota reserved on the hub and the check Pending
    assert waiting(workload(reserved=False), CHECKS, ORDERS) is None
    assert waiting(workload(state="Ready"), CHECKS, ORDERS) is None
    assert waiting(workload(state="Retry"), CHECKS, ORDERS) is None
    # admitted somewhere (clusterName), or finished: never touched again
    assert waiting(workload(cluster="c3"), CHECKS, ORDERS) is None
    assert waiting(workload(finished=True), CHECKS, ORDERS) is None
    # a check that names a config we did not write (kueue-addon's, a hand-made one)
    assert waiting(workload(), CHECKS, {"other": ORDER}) is None
    assert waiting(workload(), {}, ORDERS) is None
    # another admission check still pending (a provisioning request): MultiKueue copies nothing yet
    provisioning = workload()
    provisioning["status"]["admissionChecks"].append({"name": "prov", "state": "Pending"})
    assert waiting(provisioning, CHECKS, ORDERS) is None
    provisioning["status"]["admissionChecks"][1]["state"] = "Ready"
    assert waiting(provisioning, CHECKS, ORDERS) is not None
    deleting = workload()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-04T12:00:00Z"
    assert waiting(deleting, CHECKS, ORDERS) is None


def test_first_the_best_scored_cluster() -> None:
    decision = decide(workload(), ORDER, NOW, 10)
    assert decision == Decision(nominate=["c3"], added=("c3",), wake_in=10)


def test_the_next_one_only_after_the_delay_since_our_last_nomination() -> None:
    # written at 12:00:25 (cut to the second, so maybe as late as :25.999): 4 s waited, 6 to go
    early = decide(workload("c3", managed=ours("2026-12-04T12:00:25Z")), ORDER, NOW, 10)
    assert early.nominate is None and early.wake_in == 6
    due = decide(workload("c3", managed=ours("2026-12-04T12:00:19Z")), ORDER, NOW, 10)
    assert due == Decision(nominate=["c3", "c4"], added=("c4",), wake_in=10)
    third = decide(workload("c3", "c4", managed=ours("2026-12-04T12:00:00Z")), ORDER, NOW, 10)
    assert third.nominate == ["c3", "c4", "c2"]


def test_the_order_is_the_config_as_it_is_now_and_nothing_nominated_is_withdrawn_for_a_score() -> None:
    # the scores moved: c2 is now best; c3 stays nominated, c2 comes next
    moved = decide(workload("c3", managed=ours("2026-12-04T12:00:00Z")), ["c2", "c4", "c3"], NOW, 10)
    assert moved.nominate == ["c3", "c2"]


def test_a_cluster_that_left_the_placement_is_withdrawn_and_never_nominated_again() -> None:
    # c4 left the config: dropped at once, even before the next is due
    left = decide(workload("c3", "c4", managed=ours("2026-12-04T12:00:28Z")), ["c3", "c2"], NOW, 10)
    assert left.nominate == ["c3"] and left.dropped == ("c4",) and left.added == ()
    # the only nominated one left: the best remaining instead
    gone = decide(workload("c4", managed=ours("2026-12-04T12:00:28Z")), ["c3", "c2"], NOW, 10)
    assert gone.nominate == ["c3"] and gone.dropped == ("c4",)


def test_every_cluster_nominated_a_delay_ago_is_reported_once_and_keeps_waiting() -> None:
    pending = decide(workload(*ORDER, managed=ours("2026-12-04T12:00:25Z")), ORDER, NOW, 10)
    assert not pending.exhausted and pending.wake_in == 6
    done = decide(workload(*ORDER, managed=ours("2026-12-04T12:00:00Z")), ORDER, NOW, 10)
    assert done.exhausted and done.nominate is None and done.wake_in is None
    assert decide(workload(), [], NOW, 10) == Decision()


def test_another_writers_nominations_are_left_alone() -> None:
    pinned = workload("c2", managed=[entry("kubectl-edit", "2026-12-04T11:00:00Z")])
    assert owners(pinned) == ["kubectl-edit"]
    assert decide(pinned, ORDER, NOW, 10) == Decision(foreign=("kubectl-edit",))
    # Kueue's own (a component workload's cluster), even with our older entry for other fields
    kueue = workload(
        "c4",
        managed=[
            entry("kueue-admission", "2026-12-04T11:00:00Z"),
            entry(FIELD_MANAGER, "x", nominations=False),
        ],
    )
    assert decide(kueue, ORDER, NOW, 10).foreign == ("kueue-admission",)
    # a list nobody is recorded for (an object read without managedFields) is not taken as ours
    assert decide(workload("c2"), ORDER, NOW, 10).foreign == ("unknown",)
    # shared with Kueue (it re-applied the same value): still ours
    shared = workload(
        "c3", managed=[*ours("2026-12-04T12:00:00Z"), entry("kueue-admission", "2026-12-04T12:00:10Z")]
    )
    assert decide(shared, ORDER, NOW, 10).nominate == ["c3", "c4"]


def test_when_we_last_wrote_is_our_status_entrys_time() -> None:
    obj = workload("c3", managed=[entry(FIELD_MANAGER, "2026-12-04T12:00:10Z", subresource="")])
    assert last_nominated(obj) is None
    obj = workload("c3", managed=ours("2026-12-04T12:00:10.5Z"))
    assert last_nominated(obj) == dt.datetime(2026, 12, 4, 12, 0, 10, 500000, tzinfo=dt.UTC)


def test_the_messages_say_which_cluster_and_why() -> None:
    first = nomination_message("spill-over", Decision(nominate=["c3"], added=("c3",)), [], 10)
    assert first == "nominated c3, the best-scored cluster of MultiKueueConfig spill-over"
    next_ = nomination_message("spill-over", Decision(nominate=["c3", "c4"], added=("c4",)), ["c3"], 10)
    assert "within 10 s" in next_ and "nominated c4, the next" in next_ and "(nominated before: c3)" in next_
    dropped = nomination_message("spill-over", Decision(nominate=["c3"], dropped=("c4",)), ["c3", "c4"], 10)
    assert dropped == "withdrew c4: no longer in MultiKueueConfig spill-over"
    text = exhausted_message("spill-over", ORDER, 10)
    assert "(c3, c4, c2)" in text and "keeps waiting" in text and "ClusterQueues" in text


def test_the_condition_says_what_is_nominated_and_what_comes_next() -> None:
    going = condition(
        workload(), "spill-over", ["c3"], Decision(nominate=["c3"], added=("c3",), wake_in=10), 10, NOW
    )
    assert going["type"] == CONDITION and going["status"] == "True" and going["reason"] == "Nominated"
    assert going["message"] == (
        "nominated c3 of MultiKueueConfig spill-over, best-scored first; "
        "the next one unless a cluster admits the Workload within 10 s"
    )
    assert going["lastTransitionTime"] == "2026-12-04T12:00:30Z"
    # the same reason again: its transition time stays
    held = workload("c3")
    held["status"]["conditions"].append({**going, "lastTransitionTime": "2026-12-04T11:00:00Z"})
    later = condition(held, "spill-over", ["c3", "c4"], Decision(nominate=["c3", "c4"], wake_in=10), 10, NOW)
    assert later["lastTransitionTime"] == "2026-12-04T11:00:00Z" and "c3, c4" in later["message"]
    done = condition(held, "spill-over", ORDER, Decision(exhausted=True), 10, NOW)
    assert done["reason"] == "AllClustersNominated" and done["lastTransitionTime"] == "2026-12-04T12:00:30Z"
    assert done["message"] == exhausted_message("spill-over", ORDER, 10)
