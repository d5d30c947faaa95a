from __future__ import annotations

from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.resources import Resource, segment

SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
THINGS = Resource("g", "v1", "things", "Thing", namespaced=True)


@given(st.text(min_size=1))
def test_a_segment_never_leaves_its_place_in_the_path(name: str) -> None:
    quoted = segment(name)
    assert "/" not in quoted and "?" not in quoted and "#" not in quoted
    assert quoted not in (".", "..")  # urllib3 would remove a dot segment before sending
    assert unquote(quoted) == name  # the apiserver sees the name it was given


def test_traversal_names_stay_in_their_namespace() -> None:
    path = SECRETS.path("addons", "../../other/secrets/x")
    assert path == "/api/v1/namespaces/addons/secrets/..%2F..%2Fother%2Fsecrets%2Fx"
    assert SECRETS.path("addons", "..") == "/api/v1/namespaces/addons/secrets/%2E%2E"
    assert THINGS.path("ns", "a", "status") == "/apis/g/v1/namespaces/ns/things/a/status"
    assert THINGS.path("ns") == "/apis/g/v1/namespaces/ns/things"
