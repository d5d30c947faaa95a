"""The hub probe's address rules: what is refused by default, what the operator's flags change."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy, category, embedded_ipv4
from dynamic_scoring.outbound.guarded_transport import AddressNotAllowed, GuardedBackend, resolve


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "metadata"),
        ("169.254.170.2", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("168.63.129.16", "metadata"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.10", "reserved"),
        ("2001:db8::1", "reserved"),
        ("10.96.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.10", "private"),
        ("fd12:3456::1", "private"),
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        # IPv4 inside IPv6 is judged by the IPv4 address it carries
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::127.0.0.1", "loopback"),
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
        ("::ffff:8.8.8.8", None),
        # Forms that Python 3.11's is_global calls global
        ("::ffff:0:7f00:1", "loopback"),  # SIIT IPv4-translated 127.0.0.1
        ("::ffff:0:a9fe:a9fe", "metadata"),
        ("64:ff9b:1::7f00:1", "reserved"),  # local-use NAT64: the IPv4 address cannot be located
        ("64:ff9b:1:7f00:1::", "reserved"),
        ("192.0.0.8", "reserved"),
        ("192.0.0.170", "reserved"),
        ("fec0::1", "private"),  # deprecated site-local
    ],
)
def test_categories(text: str, expected: str | None) -> None:
    assert category(ipaddress.ip_address(text)) == expected


@pytest.mark.parametrize(
    "text", ["127.0.0.1", "::1", "169.254.169.254", "fe80::1", "0.0.0.0", "::ffff:127.0.0.1", "224.0.0.1"]
)
def test_the_default_refuses_loopback_link_local_metadata_and_unspecified(text: str) -> None:
    assert STRICT.refusal(ipaddress.ip_address(text)) is not None


@pytest.mark.parametrize("text", ["10.96.0.1", "192.168.49.2", "fd00::5", "8.8.8.8"])
def test_the_default_allows_private_and_public(text: str) -> None:
    # in-cluster scorers live behind ClusterIPs and pod IPs
    assert STRICT.refusal(ipaddress.ip_address(text)) is None


def test_deny_private_refuses_private_and_an_allow_list_opens_one_range() -> None:
    strict = AddressPolicy.parse([], deny_private=True)
    assert strict.refusal(ipaddress.ip_address("10.96.0.1")) == "private"
    assert strict.refusal(ipaddress.ip_address("8.8.8.8")) is None
    scoped = AddressPolicy.parse("10.96.0.0/12", deny_private=True)
    assert scoped.refusal(ipaddress.ip_address("10.96.0.1")) is None
    assert scoped.refusal(ipaddress.ip_address("10.0.0.1")) == "private"


def test_allow_cidrs_open_loopback_only_where_listed() -> None:
    dev = AddressPolicy.parse("127.0.0.0/8, ::1/128")
    assert dev.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert dev.refusal(ipaddress.ip_address("::1")) is None
    assert dev.refusal(ipaddress.ip_address("169.254.169.254")) == "metadata"


def test_a_bad_cidr_is_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not an IP network"):
        AddressPolicy.parse(["127.0.0.0/8", "10.0.0.0/33"])


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_ipv4_address_mapped_into_ipv6_is_judged_like_itself(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    mapped = ipaddress.IPv6Address((0xFFFF << 32) | value)
    assert embedded_ipv4(mapped) == v4
    assert category(mapped) == category(v4)
    assert STRICT.refusal(mapped) == STRICT.refusal(v4)


@given(st.integers(min_value=0, max_value=2**24 - 1))
def test_every_loopback_address_is_refused_whatever_else_is_allowed(low: int) -> None:
    address = ipaddress.IPv4Address((127 << 24) | low)
    # every IPv4 address but 127/8: an allow list opens exactly what it covers
    lax = AddressPolicy.parse(
        "0.0.0.0/2 64.0.0.0/3 96.0.0.0/4 112.0.0.0/5 120.0.0.0/6 124.0.0.0/7 126.0.0.0/8 128.0.0.0/1"
    )
    assert STRICT.refusal(address) == "loopback"
    assert lax.refusal(address) == "loopback"


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "0177.0.0.1", "127.1", "localhost", "::ffff:127.0.0.1"]
)
def test_numeric_spellings_resolve_to_loopback_and_are_refused(host: str) -> None:
    # the resolver turns every spelling into 127.0.0.1 (or ::1); the backend judges what it resolved
    assert all(category(a) == "loopback" for a in resolve(host, 80))
    with pytest.raises(AddressNotAllowed) as refused:
        GuardedBackend(STRICT).connect_tcp(host, 80, timeout=1)
    assert refused.value.category == "loopback"
