"""Child processes of the local control plane: start with a log file, wait for readiness, stop for sure.

Every server the harness starts is a plain process listening on 127.0.0.1.  Tests must leave no
process and no port behind, so each child runs in its own process group and `stop()` escalates
from SIGTERM to SIGKILL on the whole group.  When a component fails to come up, the error carries
the tail of its log, because that is the first thing anybody debugging it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class StartupError(RuntimeError):
    """A component did not become ready; the message names it and quotes its log."""


def free_port() -> int:
    """Return a port that was free on 127.0.0.1 a moment ago (racy by nature; callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_in_use(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, or a note that it does not exist."""
    try:
        data = path.read_bytes()[-64 * 1024 :]
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def wait_until(
    check: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    proc: Proc | None = None,
) -> T:
    """Poll `check` until it returns something truthy; fail early if `proc` died meanwhile."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # the check talks to a server that may not be up yet
            last_error = exc
        if proc is not None and not proc.alive:
            raise StartupError(
                f"{proc.name} exited with code {proc.returncode} while waiting for {what}; "
                f"last log lines of {proc.log_path}:\n{tail(proc.log_path)}"
            )
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            log = f"; last log lines of {proc.log_path}:\n{tail(proc.log_path)}" if proc else ""
            raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}{detail}{log}")
        time.sleep(interval)


def wait_value(
    read: Callable[[], T],
    ok: Callable[[T], object],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
) -> T:
    """`wait_until` for state another process writes: poll `read` until `ok(value)`; return that value.

    On timeout the error names `what` and the last value read (shortened), so a test that fails
    shows what was there instead of what it expected.
    """
    seen: list[T] = []

    def check() -> tuple[T] | None:
        value = read()
        seen[:] = [value]
        return (value,) if ok(value) else None

    try:
        return wait_until(check, timeout=timeout, what=what, interval=interval)[0]
    except StartupError as exc:
        if not seen:
            raise
        last = repr(seen[0])
        last = last if len(last) <= 2000 else last[:2000] + "..."
        raise StartupError(f"{exc}; last seen: {last}") from None


async def wait_until_async(
    check: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    blocking: bool = False,
) -> T:
    """`wait_until` for async tests: poll `check` until it returns something truthy, loop not blocked.

    Between polls the event loop runs (`asyncio.sleep`), so the code under test keeps working; a
    `blocking` check (one that talks to a server) runs in a worker thread.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = await asyncio.to_thread(check) if blocking else check()
            if result:
                return result
        except Exception as exc:  # like `wait_until`: the check may talk to a server that is not ready
            last_error = exc
        if loop.time() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        await asyncio.sleep(interval)


async def wait_value_async(
    read: Callable[[], T],
    ok: Callable[[T], object],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    blocking: bool = False,
) -> T:
    """`wait_value` for async tests: poll `read` until `ok(value)`; return that value.

    On timeout the error names `what` and the last value read (shortened), as `wait_value`'s does.
    Unlike `wait_value`, an exception from `read` or `ok` fails the wait at once: it is meant for
    state the test can always read, such as an object's status.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await asyncio.to_thread(read) if blocking else read()
        if ok(value):
            return value
        if loop.time() > deadline:
            last = repr(value)
            last = last if len(last) <= 2000 else last[:2000] + "..."
            raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last}")
        await asyncio.sleep(interval)


class Proc:
    """One child process with its own process group and log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.base_argv = list(argv)  # the command line it was made with; `argv` may add to it
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The process id while started."""
        return self._popen.pid if self._popen else None

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self._popen is not None and self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code once it ended."""
        return self._popen.poll() if self._popen else None

    def start(self) -> Proc:
        """Start the process; its stdout and stderr go to the log file (appended)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        return self

    def send_signal(self, sig: int) -> None:
        """Signal the process itself (not its group)."""
        if self._popen is not None:
            self._popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Wait for the process to end and return its exit code."""
        if self._popen is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._popen.wait(timeout=timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after `timeout` seconds."""
        if self._popen is None:
            return
        kill_group(self._popen.pid, timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=1)


def kill_group(pid: int, timeout: float = 10.0) -> None:
    """Stop process group `pid` (the leader's pid): TERM, wait, then KILL."""
    kill_groups([pid], timeout)


def kill_groups(pids: Sequence[int], timeout: float = 10.0) -> None:
    """Stop several process groups at once: TERM all, wait up to `timeout` in total, KILL the rest.

    Returns once every group is gone, or 5 s after the KILL.

    Sequential stops would add up each component's graceful-shutdown time.
    """
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(group_alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    # SIGKILL is delivered at once, but a large process (a kube-apiserver) takes a moment to be torn
    # down: wait for that too, so a caller that checks right after sees the outcome, not the race
    killed = time.monotonic() + 5
    while time.monotonic() < killed and any(group_alive(p) for p in pids):
        time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process of group `pgid` exists.

    Zombies do not count: when another process started the group (the CLI's `down` stops what a
    test session started), only that parent can reap them, but they hold no port and no CPU.
    """
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-pgid, os.WNOHANG)[0] != 0:
            pass
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields[0] = state, fields[2] = pgrp
            return True
    return False


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid` (field 22 of /proc/pid/stat), to detect pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) may contain spaces; it is wrapped in parentheses
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def pid_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def listening_ports(pids: set[int]) -> set[int]:
    """TCP ports in LISTEN state whose socket belongs to one of `pids`.

    Found from /proc, not from bookkeeping, so it also catches ports a component opened on its
    own (every OCM controller serves HTTPS, for instance).
    """
    return {port for _, port in listening_addresses(pids)}


def _proc_net_address(hex_addr: str) -> str:
    """/proc/net/tcp{,6}'s address (host-order 32-bit words in hex) as text."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped or ip)


def listening_addresses(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that one of `pids` holds."""
    inodes: set[str] = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
        except (FileNotFoundError, PermissionError):
            continue
    found: set[tuple[str, int]] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[3] == "0A" and parts[9] in inodes:  # 0A = LISTEN
                    address, port = parts[1].rsplit(":", 1)
                    found.add((_proc_net_address(address), int(port, 16)))
    return found
