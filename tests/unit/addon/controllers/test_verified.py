"""The "nothing to do" memo: it holds only while both the inputs and every object's version hold."""

from __future__ import annotations

from dynamic_scoring.addon.controllers.verified import Verified, Versions

WRITTEN: Versions = (("Role", "c1/r", "5"), ("RoleBinding", "c1/b", "6"))


def test_it_holds_while_the_inputs_and_the_versions_are_the_ones_remembered() -> None:
    memo = Verified()
    assert not memo.holds("c1", b"in", lambda known: known)  # nothing remembered yet
    memo.remember("c1", b"in", WRITTEN)
    assert memo.holds("c1", b"in", lambda known: known)
    assert not memo.holds("c1", b"other inputs", lambda known: known)
    edited = (("Role", "c1/r", "7"), ("RoleBinding", "c1/b", "6"))
    assert not memo.holds("c1", b"in", lambda _known: edited)
    assert not memo.holds("c1", b"in", lambda known: (*known, ("Work", "c1/w-1", "1")))  # one more object


def test_the_current_versions_are_asked_for_the_remembered_objects() -> None:
    memo = Verified()
    memo.remember("c1", b"in", WRITTEN)
    asked: list[Versions] = []

    def current(known: Versions) -> Versions:
        asked.append(known)
        return known

    memo.holds("c1", b"in", current)
    assert asked == [WRITTEN]


def test_forget_drops_the_key_and_only_that_key() -> None:
    memo = Verified()
    memo.remember("c1", b"in", WRITTEN)
    memo.remember("c2", b"in", WRITTEN)
    memo.forget("c1")
    memo.forget("c3")  # never remembered: nothing to do
    assert len(memo) == 1
    assert not memo.holds("c1", b"in", lambda known: known)
    assert memo.holds("c2", b"in", lambda known: known)
