from __future__ import annotations

from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from agent.k8s.paths import namespaced, segment


@given(st.text(min_size=1))
def test_a_segment_never_leaves_its_place_in_the_path(name: str) -> None:
    quoted = segment(name)
    assert "/" not in quoted and "?" not in quoted and "#" not in quoted
    assert quoted not in (".", "..")  # urllib3 would remove a dot segment before sending
    assert unquote(quoted) == name  # the apiserver sees the name it was given


def test_traversal_names_stay_in_their_namespace() -> None:
    path = namespaced("/api/v1", "addons", "secrets", "../../other/secrets/x")
    assert path == "/api/v1/namespaces/addons/secrets/..%2F..%2Fother%2Fsecrets%2Fx"
    assert namespaced("/api/v1", "addons", "secrets", "..") == "/api/v1/namespaces/addons/secrets/%2E%2E"
    assert namespaced("/g/v1", "ns", "things", "a", "status") == "/g/v1/namespaces/ns/things/a/status"
    assert namespaced("/g/v1", "ns", "things") == "/g/v1/namespaces/ns/things"
