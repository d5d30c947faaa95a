"""The HTTP transports of the probe and the agents: resolve once, check every address, connect to it.

Checking a URL's host name and then letting the HTTP library resolve it again would leave a gap: a
name whose DNS answer changes between the two look-ups (DNS rebinding) passes the check with a
public address and is then connected to on ``127.0.0.1``.  So the check lives where the connection
is made.  ``GuardedBackend`` is an httpcore network backend: httpcore asks it for a TCP connection
to ``(host, port)``; it resolves ``host`` once with ``getaddrinfo``, refuses the whole name when any
address it resolves to is refused by the ``AddressPolicy``, and otherwise opens the socket to one of
those very addresses.  TLS is started afterwards by httpcore with ``server_hostname`` set to the
URL's host, so SNI, certificate verification and the ``Host`` header still use the name, not the IP.
``AsyncGuardedBackend`` is the same for the agents' ``httpx.AsyncClient``s (resolving with the event
loop's ``getaddrinfo`` under ``asyncio.timeout``), and ``async_guarded_transport`` builds their
transport; ``address_refusal`` finds the refusal in a failed exchange's exception chain.

``guarded_transport`` builds an ``httpx.HTTPTransport`` and swaps this backend into its connection
pool.  httpx does not expose the backend as a parameter, so this reaches one private attribute; it
fails loudly (``RuntimeError`` at manager start) rather than silently probing unchecked if a future
httpx changes that attribute.  Proxies are never used (the client has ``trust_env=False``): through a
proxy the address check would apply to the proxy, not to the scorer.  The agents may be configured
with a proxy; what they check then is decided in ``dynamic_scoring.agent.proxy``.

The look-up runs on a small shared thread pool so that it is under the request's connect timeout:
a name whose DNS server never answers fails the probe with a timeout instead of holding a controller
worker for the system resolver's own (much longer) timeout.  The abandoned look-up finishes in the
background; at most ``RESOLVER_THREADS`` run at once, and further ones wait for a free thread within
their own timeout.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import httpcore
import httpx

from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy, IPAddress
from dynamic_scoring.outbound.transport_errors import causes


class AddressNotAllowed(httpcore.ConnectError):
    """The host resolves to an address the policy refuses; ``category`` says which rule."""

    def __init__(self, host: str, category: str) -> None:
        super().__init__(f"address not allowed: {host} resolves to a {category} address")
        self.host = host
        self.category = category


RESOLVER_THREADS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _resolver_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="probe-resolver")
        return _pool


def _addresses(infos: Iterable[tuple[object, ...]]) -> list[IPAddress]:
    found: list[IPAddress] = []
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def check_literal(host: str, policy: AddressPolicy) -> None:
    """Refuse ``host`` when it is a literal IP address the policy refuses (names are left alone).

    For a hop that is not connected to directly (a target behind a proxy): its name cannot be
    resolved here as the proxy would, but a literal address needs no resolving.

    Raises:
        AddressNotAllowed: ``host`` is a refused literal address.
    """
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return
    refused = policy.refusal(address)
    if refused is not None:
        raise AddressNotAllowed(host, refused)


def resolve(host: str, port: int, timeout: float | None = None) -> list[IPAddress]:
    """Every distinct address ``host`` resolves to for TCP, in the resolver's order.

    Raises:
        httpcore.ConnectError: the name does not resolve (wrapping the ``socket.gaierror``).
        httpcore.ConnectTimeout: no answer within ``timeout`` seconds.
    """
    lookup = _resolver_pool().submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = lookup.result(timeout)
    except FutureTimeout:
        lookup.cancel()
        raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout}s") from None
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    return _addresses(infos)


async def resolve_async(host: str, port: int, timeout: float | None = None) -> list[IPAddress]:
    """``resolve`` for the event loop: the loop's ``getaddrinfo`` (its executor) under ``timeout``.

    Raises:
        httpcore.ConnectError: the name does not resolve.
        httpcore.ConnectTimeout: no answer within ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout}s") from None
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    return _addresses(infos)


def _check(policy: AddressPolicy, host: str, addresses: Iterable[IPAddress]) -> None:
    for address in addresses:
        refused = policy.refusal(address)
        if refused is not None:
            raise AddressNotAllowed(host, refused)


class GuardedBackend(httpcore.NetworkBackend):
    """An httpcore backend that connects only to addresses the ``AddressPolicy`` allows."""

    def __init__(self, policy: AddressPolicy = STRICT, inner: httpcore.NetworkBackend | None = None) -> None:
        self.policy = policy
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Resolve ``host``, refuse it if any address is refused, else connect to the first that answers."""
        addresses = resolve(host, port, timeout)
        _check(self.policy, host, addresses)
        last: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        if last is not None:
            raise last
        raise httpcore.ConnectError(f"{host} resolves to no address")

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Never: a probe goes over TCP only."""
        raise httpcore.ConnectError("unix sockets are not probed")

    def sleep(self, seconds: float) -> None:
        """Delegated (httpcore uses it between connection retries, which the probe does not ask for)."""
        self._inner.sleep(seconds)


class AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """``GuardedBackend`` for ``httpx.AsyncClient``: the agents' Prometheus and scorer calls."""

    def __init__(
        self, policy: AddressPolicy = STRICT, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self.policy = policy
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host``, refuse it if any address is refused, else connect to the first that answers."""
        addresses = await resolve_async(host, port, timeout)
        _check(self.policy, host, addresses)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        if last is not None:
            raise last
        raise httpcore.ConnectError(f"{host} resolves to no address")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Never: scorers and Prometheus are called over TCP only."""
        raise httpcore.ConnectError("unix sockets are not used")

    async def sleep(self, seconds: float) -> None:
        """Delegated (httpcore uses it between connection retries)."""
        await self._inner.sleep(seconds)


def address_refusal(exc: BaseException) -> AddressNotAllowed | None:
    """The ``AddressNotAllowed`` behind a failed exchange (httpx wraps httpcore's errors), or None."""
    for cause in causes(exc):
        if isinstance(cause, AddressNotAllowed):
            return cause
    return None


def _swap_backend(transport: object, backend: object) -> None:
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool | httpcore.AsyncConnectionPool) or not hasattr(
        pool, "_network_backend"
    ):
        raise RuntimeError(
            f"httpx {httpx.__version__}: cannot install the address check "
            "(HTTPTransport._pool._network_backend is gone); pin a supported httpx"
        )
    pool._network_backend = backend  # type: ignore[assignment]


def async_guarded_transport(
    *,
    verify: ssl.SSLContext | bool = True,
    limits: httpx.Limits,
    policy: AddressPolicy = STRICT,
    proxy: str | None = None,
) -> httpx.AsyncHTTPTransport:
    """An ``httpx.AsyncHTTPTransport`` whose connections go through ``AsyncGuardedBackend(policy)``.

    With ``proxy`` the backend's connection is the one to the proxy, so ``policy`` judges the proxy's
    address (the caller chooses a policy for that hop; see ``dynamic_scoring.agent.proxy``).

    Raises:
        RuntimeError: this httpx no longer keeps its backend where we replace it.
    """
    transport = httpx.AsyncHTTPTransport(verify=verify, limits=limits, retries=0, proxy=proxy)
    _swap_backend(transport, AsyncGuardedBackend(policy))
    return transport


def guarded_transport(
    *, verify: ssl.SSLContext | bool = True, limits: httpx.Limits, policy: AddressPolicy = STRICT
) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` whose connections go through ``GuardedBackend(policy)``.

    Raises:
        RuntimeError: this httpx no longer keeps its backend where we replace it; refusing to run
            unchecked is the safe failure.
    """
    transport = httpx.HTTPTransport(verify=verify, limits=limits, retries=0)
    _swap_backend(transport, GuardedBackend(policy))
    return transport


__all__ = [
    "RESOLVER_THREADS",
    "AddressNotAllowed",
    "AsyncGuardedBackend",
    "GuardedBackend",
    "address_refusal",
    "async_guarded_transport",
    "check_literal",
    "guarded_transport",
    "resolve",
    "resolve_async",
]
