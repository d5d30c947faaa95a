"""Path prefixes in allowed-hosts entries (security finding S7).

A host-only binding reaches every backend behind a path-routed shared ingress, so an entry may carry
a path prefix.  These tests pin how request paths are normalised and matched, and that entries
without a path keep meaning what they always meant.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.outbound.secret_binding import (
    ALLOWED_HOSTS_ANNOTATION,
    binding_refusal,
    parse_allowed_hosts,
    request_paths,
)
from dynamic_scoring.outbound.urls import normalise_path, path_within

INGRESS = "https://ingress.example.com"


def allowed(annotation: str, url: str) -> bool:
    return binding_refusal({ALLOWED_HOSTS_ANNOTATION: annotation}, url, secret="s", namespace="ns") is None


@pytest.mark.parametrize(
    "annotation",
    [
        "ingress.example.com/team-a",
        "ingress.example.com/team-a/",
        "https://ingress.example.com/team-a",
        "https://ingress.example.com:443/team-a/",
        "ingress.example.com:443/team-a",
        "*.example.com/team-a",
        "ingress.example.com/team%2Da",  # an escaped unreserved character is that character
    ],
)
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/team-a", True),
        ("/team-a/", True),
        ("/team-a/scoring", True),
        ("/team-a/api/v1/query_range?query=up", True),
        ("/team-a//scoring", True),  # under the prefix whether slashes are merged or not
        ("/team-a/./scoring", True),
        ("/team-a/x/../scoring", True),
        ("/team-a/x/%2e%2E/scoring", True),
        ("/%74eam-a/scoring", True),  # %74 is "t"
        ("/team-a%2Fscoring", False),  # an encoded slash: one segment or two, depending on who reads
        ("/team-ab", False),  # not a segment boundary
        ("/team-a.evil", False),
        ("/team-b/scoring", False),
        ("/", False),
        ("", False),
        ("/scoring?next=/team-a/", False),  # the query never counts
        ("/team-a/../team-b/scoring", False),  # resolved by the client: /team-b/scoring
        ("/team-a/%2e%2e/team-b/scoring", False),  # resolved by the server
        ("/team-a/.%2E/team-b/scoring", False),
        ("/team-a//../team-b", True),  # the client sends /team-a/team-b: no // is left
        ("/team-a//%2e%2e/team-b", False),  # /team-a/team-b kept, /team-b merged: not both under
        ("//team-a/scoring", False),  # a backend that keeps // does not see /team-a
        ("/team-a/%252e%252e/team-b", False),  # an encoded %: a second decoding would make ..
        ("/team-a/%5C..%5Cteam-b", False),  # encoded backslash
        ("/team-a/..;/team-b", False),  # path parameters: a known traversal on some servers
        ("/team-a/%zz", False),  # malformed escape
        ("/team-a/%00", False),
        ("/%2e%2e/team-a", False),  # above the root: refused, not clamped
        ("/TEAM-A/scoring", False),  # paths are case-sensitive
    ],
)
def test_a_path_bound_entry_allows_only_paths_under_its_prefix(
    annotation: str, path: str, expected: bool
) -> None:
    assert allowed(annotation, INGRESS + path) is expected


@pytest.mark.parametrize(
    ("annotation", "url"),
    [
        ("ingress.example.com/team-a", "http://ingress.example.com/team-a/x"),  # default ports still apply
        ("https://ingress.example.com/team-a", "https://ingress.example.com:8443/team-a/x"),
        ("https://ingress.example.com/team-a", "http://ingress.example.com:443/team-a/x"),
        ("ingress.example.com/team-a", "https://other.example.com/team-a/x"),
        ("*.example.com/team-a", "https://example.com/team-a/x"),
    ],
)
def test_a_path_never_widens_scheme_host_or_port(annotation: str, url: str) -> None:
    wanted = url.startswith("http://ingress.example.com/") and annotation.startswith("ingress")
    assert allowed(annotation, url) is wanted


@pytest.mark.parametrize(
    ("annotation", "url"),
    [
        # Entries as they were before paths: every path, both schemes for a bare host.
        ("ingress.example.com", "https://ingress.example.com/team-b/x"),
        ("ingress.example.com", "http://ingress.example.com/anything"),
        ("ingress.example.com", "https://ingress.example.com/a/%2Fb\\c"),  # no path: no path rules
        ("ingress.example.com:8443", "https://ingress.example.com:8443/x"),
        ("https://ingress.example.com", "https://ingress.example.com/x"),
        ("https://ingress.example.com/", "https://ingress.example.com/x"),
        ("ingress.example.com/", "https://ingress.example.com/x"),  # "/" is every path
        ("*.example.com", "https://ingress.example.com/x"),
        ("[::1]:8000", "http://[::1]:8000/x"),
    ],
)
def test_entries_without_a_path_keep_allowing_every_path(annotation: str, url: str) -> None:
    assert allowed(annotation, url)


@pytest.mark.parametrize(
    "entry",
    [
        "ingress.example.com/team-a/../team-b",
        "ingress.example.com/./team-a",
        "ingress.example.com/team-a/%2e%2e",
        "ingress.example.com//team-a",
        "ingress.example.com/team-a//",
        "ingress.example.com/team-a?x=1",
        "ingress.example.com/team-a#x",
        "ingress.example.com/team%2Fa",
        "ingress.example.com/team-a\\x",
        "ingress.example.com/team;a",
        "fd00::/8",  # a network, not a host and a path: a path on an IPv6 address needs brackets
    ],
)
def test_a_path_that_is_not_plain_makes_the_entry_unreadable(entry: str) -> None:
    entries, bad = parse_allowed_hosts(entry)
    assert entries == () and bad == (entry,)


def test_a_bracketed_ipv6_address_may_carry_a_path() -> None:
    assert allowed("[::1]:8000/team-a", "http://[::1]:8000/team-a/x")
    assert not allowed("[::1]:8000/team-a", "http://[::1]:8000/team-b/x")


def test_an_entry_without_a_path_and_one_with_a_path_combine() -> None:
    assert allowed("ingress.example.com/team-a, scorer.example.com", "https://scorer.example.com/x")
    assert allowed("ingress.example.com/team-a, ingress.example.com/team-b", INGRESS + "/team-b/x")
    assert not allowed("ingress.example.com/team-a, ingress.example.com/team-b", INGRESS + "/team-c")


def test_the_refusal_for_a_path_names_the_host_but_not_the_path() -> None:
    """The path is the scorer author's text; the owner, not the message, picks the prefix to add."""
    annotations = {ALLOWED_HOSTS_ANNOTATION: "ingress.example.com/team-a"}
    why = binding_refusal(annotations, INGRESS + "/secret-b?k=v", secret="tok", namespace="ns")
    assert why is not None
    assert "not bound to this path on ingress.example.com" in why and "secret-b" not in why
    assert "--overwrite" not in why
    unsafe = binding_refusal(annotations, INGRESS + "/team-a%2Fx", secret="tok", namespace="ns")
    assert unsafe is not None and "cannot be normalised safely" in unsafe
    other_host = binding_refusal(annotations, "https://evil.example.com/team-a", secret="t", namespace="ns")
    assert other_host is not None and "not bound to evil.example.com" in other_host


def test_request_paths_read_the_path_as_httpx_sends_it() -> None:
    assert request_paths(INGRESS) == ("/",)
    assert request_paths(INGRESS + "/a/../b?x=/../..") == ("/b",)
    assert request_paths(INGRESS + "/a//b") == ("/a//b", "/a/b")
    assert request_paths(INGRESS + "/a/%2F") is None


SEGMENT = st.text(alphabet=string.ascii_letters + string.digits + "-_~", min_size=1, max_size=8)
SEGMENTS = st.lists(SEGMENT, min_size=1, max_size=4)
# Characters a path may carry literally or percent-encoded without changing its meaning.
UNRESERVED = string.ascii_letters + string.digits + "-._~"


def _encode_some(text: str, mask: list[bool]) -> str:
    return "".join(
        f"%{ord(ch):02X}" if ch in UNRESERVED and flip else ch
        for ch, flip in zip(text, mask + [False] * len(text), strict=False)
    )


@given(prefix=SEGMENTS, rest=st.lists(SEGMENT, max_size=3), mask=st.lists(st.booleans(), max_size=40))
def test_re_encoding_unreserved_characters_never_changes_the_answer(
    prefix: list[str], rest: list[str], mask: list[bool]
) -> None:
    """A path matches its prefix exactly when any spelling with unreserved characters escaped does."""
    entry = "ingress.example.com/" + "/".join(prefix)
    path = "/" + "/".join(prefix + rest)
    assert allowed(entry, INGRESS + path)
    assert allowed(entry, INGRESS + _encode_some(path, mask))


TRICKY = st.lists(
    st.sampled_from(["/", ".", "..", "%2e", "%2E", "%2F", "%25", "%5C", "a", "b", "-"]), max_size=12
)


@given(prefix=SEGMENTS, tail=TRICKY, before=st.booleans())
def test_no_path_outside_the_prefix_is_allowed(prefix: list[str], tail: list[str], before: bool) -> None:
    """Whatever the spelling, an allowed path normalises to the prefix or below it, both ways."""
    entry = "ingress.example.com/" + "/".join(prefix)
    path = "/" + "".join(tail) + "/" + "/".join(prefix) if before else "/" + "/".join(prefix) + "".join(tail)
    url = INGRESS + path
    if allowed(entry, url):
        paths = request_paths(url)
        assert paths is not None
        for normalised in paths:
            assert path_within(normalised, "/" + "/".join(prefix))
            segments = normalised.split("/")
            assert segments[1 : len(prefix) + 1] == prefix
            assert "." not in segments and ".." not in segments


@given(segments=st.lists(st.sampled_from(["a", "b", ".", "..", "", "%2e", "%2E%2e"]), max_size=8))
def test_normalising_is_idempotent_and_leaves_no_dot_segment(segments: list[str]) -> None:
    path = "/" + "/".join(segments)
    for merge in (False, True):
        once = normalise_path(path, merge_slashes=merge)
        if once is None:
            continue
        assert normalise_path(once, merge_slashes=merge) == once
        assert not {".", ".."} & set(once.split("/"))


def test_path_within_is_at_a_segment_boundary() -> None:
    assert path_within("/team-a", "/team-a") and path_within("/team-a/", "/team-a")
    assert path_within("/team-a/x", "/team-a") and not path_within("/team-ab", "/team-a")
    assert path_within("/anything", "")
