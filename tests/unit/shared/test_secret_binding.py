"""The rule that binds a Secret to the destinations its owner listed (shared by agent and manager)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.outbound.secret_binding import (
    ALLOWED_HOSTS_ANNOTATION,
    ALLOWED_SCORERS_ANNOTATION,
    binding_refusal,
    destination,
    parse_allowed_hosts,
)


def allowed(annotation: str | None, url: str) -> bool:
    annotations = {} if annotation is None else {ALLOWED_HOSTS_ANNOTATION: annotation}
    return binding_refusal(annotations, url, secret="s", namespace="ns") is None


@pytest.mark.parametrize(
    ("annotation", "url"),
    [
        ("scorer.example.com", "https://scorer.example.com/scoring"),
        ("scorer.example.com", "http://scorer.example.com/scoring"),
        ("Scorer.Example.COM.", "https://scorer.example.com./x"),
        (
            "prometheus-k8s.monitoring.svc:9090",
            "http://prometheus-k8s.monitoring.svc:9090/api/v1/query_range",
        ),
        ("scorer.example.com:443", "https://scorer.example.com/"),
        ("scorer.example.com:8443", "https://scorer.example.com:8443/"),
        ("https://scorer.example.com", "https://scorer.example.com:443/scoring"),
        ("https://scorer.example.com/", "https://scorer.example.com/scoring"),
        ("http://scorer.example.com:8000", "http://scorer.example.com:8000/scoring"),
        ("a.example.com,  b.example.com:9090\nc.example.com", "http://b.example.com:9090/"),
        ("*.scorers.example.com", "https://eu.scorers.example.com/scoring"),
        ("*.scorers.example.com:8000", "http://a.b.scorers.example.com:8000/scoring"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000/scoring"),
        ("[::1]:8000", "http://[0:0::1]:8000/scoring"),
        ("[0:0::1]:8000", "http://[::1]:8000/scoring"),
        ("::1", "http://[::1]/scoring"),
        ("bad entry*, scorer.example.com", "https://scorer.example.com/"),
    ],
)
def test_listed_destinations_are_allowed(annotation: str, url: str) -> None:
    assert allowed(annotation, url)


@pytest.mark.parametrize(
    ("annotation", "url"),
    [
        (None, "https://scorer.example.com/"),
        ("", "https://scorer.example.com/"),
        ("   ", "https://scorer.example.com/"),
        # A host entry means the scheme's default port only.
        ("scorer.example.com", "https://scorer.example.com:8443/"),
        ("scorer.example.com", "http://scorer.example.com:443/"),
        ("scorer.example.com:8443", "https://scorer.example.com/"),
        # A scheme pins the scheme.
        ("https://scorer.example.com", "http://scorer.example.com:443/"),
        ("https://scorer.example.com", "http://scorer.example.com/"),
        # Another host, a look-alike, a parent or a sibling.
        ("scorer.example.com", "https://evil.example.com/"),
        ("scorer.example.com", "https://scorer.example.com.evil.net/"),
        ("scorer.example.com", "https://xscorer.example.com/"),
        ("*.scorers.example.com", "https://scorers.example.com/"),
        ("*.scorers.example.com", "https://evilscorers.example.com/"),
        # Names compare as written: the resolver's other spellings of an address are not it.
        ("127.0.0.1", "http://2130706433/"),
        ("127.0.0.1", "http://localhost/"),
        # A wildcard never matches an IP address.
        ("*.0.0.1", "http://127.0.0.1/"),
        # Unreadable entries allow nothing.
        ("*", "https://scorer.example.com/"),
        ("*.com*", "https://scorer.example.com/"),
        ("scorer.*.com", "https://scorer.example.com/"),
        ("scorer.example.com:", "https://scorer.example.com/"),
        ("scorer.example.com:99999", "https://scorer.example.com/"),
        ("ftp://scorer.example.com", "https://scorer.example.com/"),
        # A path in an entry narrows it (see test_secret_binding_paths.py); a query never widens.
        ("https://scorer.example.com/scoring", "https://scorer.example.com/other"),
        ("https://scorer.example.com/scoring?x=1", "https://scorer.example.com/scoring"),
        ("user@scorer.example.com", "https://scorer.example.com/"),
        ("scörer.example.com", "https://xn--screr-jua.example.com/"),
    ],
)
def test_anything_else_is_refused(annotation: str | None, url: str) -> None:
    assert not allowed(annotation, url)


def test_urls_that_are_not_http_destinations_are_refused() -> None:
    for url in ("file:///etc/passwd", "scorer.example.com", "https:///nohost", "ftp://scorer.example.com/"):
        assert not allowed("scorer.example.com", url)
    why = binding_refusal({}, "ftp://scorer.example.com/?api_key=k3y", secret="s", namespace="ns")
    assert why is not None and "k3y" not in why and "not an http(s) URL" in why


def test_the_refusal_names_secret_destination_and_annotation_and_how_to_bind() -> None:
    why = binding_refusal({}, "http://scorer.example.com:8000/scoring", secret="tok", namespace="agents")
    assert why is not None
    assert "secret agents/tok" in why
    assert "scorer.example.com:8000" in why
    assert "it has no allowed-hosts annotation" in why
    command = f"kubectl -n agents annotate secret tok --overwrite {ALLOWED_HOSTS_ANNOTATION}="
    assert command + "'scorer.example.com:8000'" in why


def test_the_suggested_annotation_keeps_the_existing_entries_and_names_unreadable_ones() -> None:
    annotations = {ALLOWED_HOSTS_ANNOTATION: "a.example.com, b..example.com"}
    why = binding_refusal(annotations, "https://scorer.example.com/", secret="tok", namespace="ns")
    assert why is not None
    assert "(unreadable: 'b..example.com')" in why
    assert f"{ALLOWED_HOSTS_ANNOTATION}='a.example.com, b..example.com, scorer.example.com'" in why


def test_the_suggested_entry_then_allows_the_destination() -> None:
    for url in (
        "https://s.example.com/x",
        "http://s.example.com:8000/",
        "http://[::1]:9/",
        "http://10.0.0.1/",
    ):
        assert allowed(destination(url).entry, url)


def test_parse_reports_what_it_could_not_read() -> None:
    entries, bad = parse_allowed_hosts("a.example.com, *, https://b.example.com:8443, c:x")
    assert [(e.host, e.port, e.scheme) for e in entries] == [
        ("a.example.com", None, None),
        ("b.example.com", 8443, "https"),
    ]
    assert bad == ("*", "c:x")


LABEL = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
HOSTS = st.lists(LABEL, min_size=1, max_size=4).map(".".join)


@given(listed=HOSTS, target=HOSTS, port=st.integers(1, 65535), scheme=st.sampled_from(["http", "https"]))
def test_a_host_entry_allows_exactly_its_host(listed: str, target: str, port: int, scheme: str) -> None:
    url = f"{scheme}://{target}:{port}/scoring"
    assert allowed(f"{listed}:{port}", url) == (listed == target)
    assert allowed(f"*.{listed}:{port}", url) == target.endswith("." + listed)


def test_an_allowed_scorers_list_limits_which_dynamic_scorers_may_use_a_bound_secret() -> None:
    """A host binding protects the value, not what it unlocks; the owner may also name the scorers."""
    url = "http://prometheus.monitoring.svc:9090/api/v1/query_range"
    hosts = {ALLOWED_HOSTS_ANNOTATION: "prometheus.monitoring.svc:9090"}

    def refusal(scorers: str | None, scorer: str) -> str | None:
        annotations = dict(hosts) if scorers is None else {**hosts, ALLOWED_SCORERS_ANNOTATION: scorers}
        return binding_refusal(annotations, url, secret="prom", namespace="agents", scorer=scorer)

    assert refusal(None, "anyone") is None  # no list: any scorer, towards the allowed hosts
    assert refusal("cpu-headroom, cpu-forecast", "cpu-forecast") is None
    why = refusal("cpu-headroom,cpu-forecast", "exfiltrate")
    assert why is not None and "may not be used by DynamicScorer exfiltrate" in why
    assert f"{ALLOWED_SCORERS_ANNOTATION}='cpu-headroom, cpu-forecast, exfiltrate'" in why
    assert refusal("", "cpu-headroom") is not None  # present and empty: none
    assert refusal("cpu-headroom", "") is not None  # a summary without a name cannot match a list
    assert refusal("cpu-headroom", "cpu-headroom-2") is not None  # exact names only
    # The host binding still comes first: a listed scorer cannot send it elsewhere.
    other = binding_refusal(
        {**hosts, ALLOWED_SCORERS_ANNOTATION: "cpu-headroom"},
        "https://evil.example.com/",
        secret="prom",
        namespace="agents",
        scorer="cpu-headroom",
    )
    assert other is not None and "not bound to evil.example.com" in other


@pytest.mark.parametrize(
    ("annotation", "url"),
    [
        # "scorer.dev" is the Service scorer in namespace dev (through the pod's DNS search list);
        # "scorer.dev." is only the public name under the .dev top-level domain.
        ("scorer.dev", "https://scorer.dev./scoring"),
        ("scorer.dev.", "https://scorer.dev/scoring"),
        ("*.scorers.example.com", "https://eu.scorers.example.com./scoring"),
        ("*.scorers.example.com.", "https://eu.scorers.example.com/scoring"),
        # A wildcard over numbers would match the resolver's spellings of addresses.
        ("*.0.0.1", "http://0x7f.0.0.1/"),
        ("*.1", "http://0x7f.1/"),
        ("*.0x1", "http://1.2.3.0x1/"),
        # Look-alikes are their own xn-- names.
        ("apple.com", "https://\u0430pple.com/"),
        ("allowed.example", "https://allowed.example@evil.example/"),
        ("allowed.example", "https://allowed.example;@evil.example/"),
        ("allowed.example", "https://allowed.example:443@evil.example/"),
        ("allowed.example", "https://allowed.example%2f@evil.example/"),
        ("allowed.example", "https://allowed%2eexample/"),
        ("127.0.0.1", "http://[::ffff:127.0.0.1]/"),
    ],
)
def test_adversarial_spellings_are_refused(annotation: str, url: str) -> None:
    assert not allowed(annotation, url)


@pytest.mark.parametrize(
    ("annotation", "url"),
    [
        # The xn-- entry the docs ask for matches both spellings of the name (both are sent to it).
        ("xn--screr-kua.example.com", "https://xn--screr-kua.example.com/"),
        ("xn--screr-kua.example.com", "https://sc\u00f6rer.example.com/"),
        ("*.example.com", "https://sc\u00f6rer.example.com/"),
        ("scorer.dev.", "https://SCORER.dev./"),
        ("https://h.example", "https://h.example:443"),
        ("http://h.example", "http://h.example:80/"),
    ],
)
def test_equivalent_spellings_are_allowed(annotation: str, url: str) -> None:
    assert allowed(annotation, url)


def test_the_suggested_entry_keeps_a_trailing_dot_and_the_xn_form() -> None:
    assert destination("https://scorer.dev./").entry == "scorer.dev."
    assert destination("https://sc\u00f6rer.example.com/").entry == "xn--screr-kua.example.com"
