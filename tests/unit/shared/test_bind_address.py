from __future__ import annotations

import pytest

from dynamic_scoring.runtime.bind_address import parse_bind_address


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        (":8443", ("0.0.0.0", 8443)),
        ("[::1]:4318", ("::1", 4318)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_hub_and_agent_addresses_read_the_same(address: str, expected: tuple[str, int]) -> None:
    assert parse_bind_address(address) == expected


@pytest.mark.parametrize("address", ["8080", "host:", "host:http", ":65536", ":-1", ""])
def test_a_malformed_address_is_refused_naming_it(address: str) -> None:
    with pytest.raises(ValueError, match="expected host:port"):
        parse_bind_address(address)
