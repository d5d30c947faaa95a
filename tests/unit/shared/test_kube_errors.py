import pytest
import urllib3
from kubernetes import client

from dynamic_scoring.kube.api import Conflict, Gone, KubeError, NotFound, map_transport_errors


@pytest.mark.parametrize(
    "exc",
    [
        urllib3.exceptions.ProtocolError("Response ended prematurely"),
        urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out."),  # type: ignore[arg-type]
        ConnectionResetError("reset by peer"),
    ],
)
def test_stream_failures_that_are_not_oserror_become_unavailable(exc: Exception) -> None:
    with pytest.raises(KubeError) as info, map_transport_errors("watch /api/v1/configmaps"):
        raise exc
    assert type(info.value) is KubeError
    assert info.value.reason == "Unavailable"
    assert info.value.__cause__ is exc
    assert "watch /api/v1/configmaps" in str(info.value)


@pytest.mark.parametrize(("status", "kind"), [(404, NotFound), (409, Conflict), (410, Gone)])
def test_api_exceptions_keep_their_status_class(status: int, kind: type[KubeError]) -> None:
    with pytest.raises(kind) as info, map_transport_errors("GET /x"):
        raise client.ApiException(status=status, reason="r")
    assert info.value.status == status


def test_typed_errors_pass_through_unchanged() -> None:
    original = Conflict(409, "Conflict", "stale")
    with pytest.raises(Conflict) as info, map_transport_errors("PATCH /x"):
        raise original
    assert info.value is original


def test_truncated_json_is_a_bad_response_not_a_crash() -> None:
    import json

    with pytest.raises(KubeError) as info, map_transport_errors("GET /x"):
        json.loads(b'{"items": [')
    assert info.value.reason == "BadResponse"
