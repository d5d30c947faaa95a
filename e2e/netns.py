"""A private network namespace for a process that binds fixed ports on every interface.

The upstream Go agent binds `:8080` (metrics) and `:8443` (addon-framework's health server) on every
interface, and no flag changes either: two of them, or one beside anything else on those ports,
cannot share the host's network.  So the harness runs such a process in a network namespace of its
own (`unshare --net`; root) whose only interface is its own loopback, and a relay process
(`python -m e2e.netns relay`) listens inside it on the ports the process must reach (the
apiservers', a scorer's) and forwards each connection to the same port on the host's 127.0.0.1.
The process keeps its kubeconfigs unchanged, and nothing it opens is reachable from outside.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

from e2e.procs import Proc, wait_until

CLONE_NEWNET = 0x40000000


def server_ports(kubeconfig: Path) -> list[int]:
    """The loopback ports a kubeconfig's servers listen on (what a relay must forward)."""
    text = kubeconfig.read_text()
    return [int(p) for p in re.findall(r"server:\s*https?://127\.0\.0\.1:(\d+)", text)]


class NetNs:
    """A private network namespace with loopback only, and the relay to the host's loopback ports."""

    def __init__(self, workdir: Path, ports: list[int], name: str = "netns") -> None:
        self.holder = Proc(name, ["unshare", "--net", "sleep", "86400"], workdir / f"{name}.log").start()
        self.relay: Proc | None = None
        try:
            wait_until(
                lambda: os.readlink(f"/proc/{self.holder.pid}/ns/net") != os.readlink("/proc/self/ns/net"),
                timeout=10,
                what="the network namespace",
                proc=self.holder,
            )
            subprocess.run(
                ["nsenter", f"--net={self.path}", "ip", "link", "set", "lo", "up"], check=True, timeout=10
            )
            ready = workdir / f"{name}-relay.ready"
            ready.unlink(missing_ok=True)
            argv = [
                sys.executable,
                "-m",
                "e2e.netns",
                "relay",
                "--netns",
                self.path,
                "--ready",
                str(ready),
            ]
            argv += [f"--port={p}" for p in ports]
            self.relay = Proc(f"{name}-relay", argv, workdir / f"{name}-relay.log").start()
            wait_until(ready.exists, timeout=20, what="the relay to listen", proc=self.relay)
        except BaseException:
            self.stop()
            raise

    @property
    def path(self) -> str:
        """The namespace's handle, for `nsenter --net=` and `setns`."""
        return f"/proc/{self.holder.pid}/ns/net"

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def scrape(self, url: str) -> dict[str, float]:
        """Counters of an agent's /metrics (reachable only inside the namespace), summed per name."""
        from prometheus_client.parser import text_string_to_metric_families

        code = (
            "import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
        )
        out = subprocess.run(
            self.argv([sys.executable, "-c", code, url]),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        sums: dict[str, float] = {}
        for family in text_string_to_metric_families(out):
            for sample in family.samples:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
        return sums

    def stop(self) -> None:
        """Stop the relay and let the namespace go (its last holder exits)."""
        if self.relay is not None:
            self.relay.stop()
        self.holder.stop()


# ---------------------------------------------------------------------------------------- the relay


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(1 << 18)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _serve(listener: socket.socket, port: int) -> None:
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def relay_main(netns: str, ports: list[int], ready: Path) -> None:
    """Listen on 127.0.0.1:<port> inside `netns`, forward to 127.0.0.1:<port> of this process's own.

    A socket stays in the namespace it was created in, so the listeners are made after entering
    the agent's namespace and the outgoing connections after returning to the host's.
    """
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    _setns(target)
    listeners = []
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        listeners.append((s, port))
    _setns(home)
    threads = [threading.Thread(target=_serve, args=(s, p), daemon=True) for s, p in listeners]
    for t in threads:
        t.start()
    ready.write_text("ok\n")
    for t in threads:
        t.join()


def main() -> None:
    """`python -m e2e.netns relay ...`: the relay, as its own process."""
    parser = argparse.ArgumentParser(prog="python -m e2e.netns")
    sub = parser.add_subparsers(dest="cmd", required=True)
    relay = sub.add_parser("relay", help="forward loopback ports of a network namespace to the host's")
    relay.add_argument("--netns", required=True)
    relay.add_argument("--port", type=int, action="append", required=True)
    relay.add_argument("--ready", type=Path, required=True)
    args = parser.parse_args()
    relay_main(args.netns, args.port, args.ready)


if __name__ == "__main__":
    main()
