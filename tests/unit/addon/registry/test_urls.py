"""URL joining with Go's url.JoinPath semantics, and host checks the CRD's CEL rule cannot make."""

from __future__ import annotations

import pytest

from dynamic_scoring.outbound.urls import has_path, join_url, origin, redact_url, url_problem


@pytest.mark.parametrize(
    ("base", "path", "joined"),
    [
        ("http://h:9090", "/api/v1/query_range", "http://h:9090/api/v1/query_range"),
        ("http://h:9090/", "api/v1/query_range", "http://h:9090/api/v1/query_range"),
        ("http://h/prefix/", "/scoring", "http://h/prefix/scoring"),
        ("http://h/prefix", "a/../b", "http://h/prefix/b"),
        ("http://h/x", "/dir/", "http://h/x/dir/"),
        ("http://h/x?tenant=a", "/score", "http://h/x/score?tenant=a"),
        ("http://h/x", "", "http://h/x"),
    ],
)
def test_join_url(base: str, path: str, joined: str) -> None:
    assert join_url(base, path) == joined


@pytest.mark.parametrize(
    "url",
    ["http://scorer.ns.svc:8000/config", "https://10.0.0.1:30007", "http://[::1]:8000/x", "http://localhost"],
)
def test_usable_urls(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://<NODE_IP>:30007/config", "placeholder"),
        ("ftp://h/x", "http:// or https://"),
        ("http:///path", "no host"),
        ("http://h:notaport/", "not a URL"),
        ("http://user:secret@h/", "credentials"),
        ("http://under_score.example/", "not a valid host"),
    ],
)
def test_unusable_urls_say_why_without_echoing_credentials(url: str, needle: str) -> None:
    why = url_problem(url)
    assert why is not None and needle in why
    assert "secret" not in why


def test_origin_redact_and_has_path() -> None:
    assert origin("https://u:p@h:8443/a/b?c=d") == "https://h:8443"
    # the one redaction rule (the agent's): no user-info, no query values
    assert redact_url("https://u:p@h/x?token=abc") == "https://h/x?token=<redacted>"
    assert redact_url("https://h/x") == "https://h/x"
    assert has_path("http://h/api") and not has_path("http://h/") and not has_path("http://h")
