"""The hub's scorer probe against hostile endpoints: memory and latency per case (issue 22).

    python -m bench hub-probe

A DynamicScorer's author chooses the URLs the manager probes and a scorer's operator chooses the
answers, so both can be hostile.  This runs the probe exactly as the scorer controller does
(``guarded_transport`` + ``probe_health``/``fetch_config``) against one in-process server with a
path per behaviour: slow, dripping, huge (identity and chunked), compressed (gzip and deflate
bombs), redirecting, lying (wrong Content-Type, invalid JSON, huge key sets, deep nesting) and
addresses the default policy refuses (loopback spellings, metadata).

Each case runs in a fresh child process (``python -m bench.hub.probe child ...``) so its memory is
its own: the child imports everything and warms one honest request up, resets the kernel's peak
counter (``/proc/self/clear_refs`` = 5), runs the case, and reports the outcome, the latency and the
peak resident growth (VmHWM after minus VmRSS before).  The ``8 in parallel`` case runs the probe
concurrency the manager allows by default (``--scorer-probe-concurrency 8``).

Targets: every hostile case ends with a refusal (never ``ok``); peak growth stays under 8 MiB per
probe (the ``/config`` cap is 256 KiB of decoded body, ``/healthz`` 64 KiB; before the fix one
200 KiB gzip body peaked at ~142 MiB); a slow or dripping scorer costs at most its timeout plus one
read (2 s timeout here: < 4.5 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench import Row, benchmark, verdict

TIMEOUT = 2.0
GROWTH_TARGET_MIB = 8.0
CONFIG = json.dumps(
    {
        "name": "cpu",
        "source": {"type": "Prometheus", "host": "https://prom.example", "path": "/api/v1/query_range"},
        "scoring": {
            "host": "https://scorer.example",
            "path": "/scoring",
            "params": {"name": "cpu", "interval": 30},
        },
    }
).encode()


def _compressed(mib: int, wbits: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = b"0" * (1 << 20)
    return b"".join([packer.compress(block) for _ in range(mib)] + [packer.flush()])


class _Payloads:
    """Built once, lazily (the 1 GiB bomb takes a few seconds to compress)."""

    def __init__(self) -> None:
        self.gzip_200 = _compressed(200, 16 + zlib.MAX_WBITS)
        self.gzip_1024 = _compressed(1024, 16 + zlib.MAX_WBITS)
        self.deflate_200 = _compressed(200, zlib.MAX_WBITS)
        params = {"name": "cpu", **{f"key-{i:06d}": i for i in range(11_000)}}
        many = {"name": "many", "scoring": {"host": "https://s.example", "params": params}}
        self.many_keys = json.dumps(many).encode()
        self.deep = b"[" * 100_000 + b"]" * 100_000


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    payloads: _Payloads

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _head(self, code: int, ctype: str | None = "application/json", **headers: str) -> None:
        self.send_response(code)
        if ctype:
            self.send_header("Content-Type", ctype)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()

    def _send(self, body: bytes, ctype: str | None = "application/json", **headers: str) -> None:
        self._head(200, ctype, Content_Length=str(len(body)), **headers)
        self.wfile.write(body)

    def do_GET(self) -> None:
        p, data = self.path, self.payloads
        try:
            if p in ("/healthz", "/config"):
                self._send(CONFIG if p == "/config" else b'{"status":"ok"}')
            elif p == "/slow":
                time.sleep(30)
                self._send(b"{}")
            elif p == "/drip":
                self._head(200, Content_Length="100000")
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif p == "/huge":
                self._head(200, Content_Length=str(256 << 20))
                block = b" " * (1 << 20)
                for _ in range(256):
                    self.wfile.write(block)
            elif p == "/endless":
                self._head(200, Transfer_Encoding="chunked")
                chunk = b"%x\r\n%s\r\n" % (1 << 16, b" " * (1 << 16))
                for _ in range(1 << 14):  # 1 GiB, unless the probe hangs up first
                    self.wfile.write(chunk)
            elif p == "/gzip-bomb":
                self._send(data.gzip_200, Content_Encoding="gzip")
            elif p == "/gzip-bomb-1g":
                self._send(data.gzip_1024, Content_Encoding="gzip")
            elif p == "/deflate-bomb":
                self._send(data.deflate_200, Content_Encoding="deflate")
            elif p == "/redirect":
                self._head(302, Location="http://169.254.169.254/latest/meta-data/", Content_Length="0")
            elif p == "/html":
                self._send(b"<html>" + b"x" * 4096 + b"</html>", "text/html")
            elif p == "/invalid-json":
                self._send(b'{"name": ' + b"1" * 100_000)
            elif p == "/many-keys":
                self._send(data.many_keys)
            elif p == "/deep":
                self._send(data.deep)
            else:
                self._send(b"{}")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the probe hung up: what it should do


CASES: list[tuple[str, str, str, str, int]] = [
    # (name, kind, path or URL, policy, parallel)
    ("honest /healthz", "health", "/healthz", "dev", 1),
    ("honest /config", "config", "/config", "dev", 1),
    ("slow (30 s)", "config", "/slow", "dev", 1),
    ("dripping body", "config", "/drip", "dev", 1),
    ("huge: 256 MiB identity", "config", "/huge", "dev", 1),
    ("huge: endless chunked", "config", "/endless", "dev", 1),
    ("gzip bomb 200 KiB -> 200 MiB", "config", "/gzip-bomb", "dev", 1),
    ("gzip bomb 1 MiB -> 1 GiB", "config", "/gzip-bomb-1g", "dev", 1),
    ("deflate bomb -> 200 MiB", "config", "/deflate-bomb", "dev", 1),
    ("gzip bomb on /healthz", "health", "/gzip-bomb", "dev", 1),
    ("8 gzip bombs in parallel", "config", "/gzip-bomb", "dev", 8),
    ("redirect to metadata", "config", "/redirect", "dev", 1),
    ("lying: text/html", "config", "/html", "dev", 1),
    ("lying: invalid JSON", "config", "/invalid-json", "dev", 1),
    ("lying: 11,000 param keys", "config", "/many-keys", "dev", 1),
    ("lying: 100,000-deep JSON", "config", "/deep", "dev", 1),
    ("loopback (default policy)", "health", "/healthz", "strict", 1),
    ("loopback as 2130706433", "health", "http://2130706433:{port}/healthz", "strict", 1),
    ("metadata 169.254.169.254", "health", "http://169.254.169.254/latest/meta-data/", "dev", 1),
]


def _vm(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(url: str, kind: str, policy: str, parallel: int, warm: str) -> dict[str, Any]:
    """One case in this (fresh) process: outcome, latency and peak resident growth."""
    import httpx

    from dynamic_scoring.addon.registry.probe import ProbeResult, fetch_config, probe_health
    from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy
    from dynamic_scoring.outbound.guarded_transport import guarded_transport

    chosen = STRICT if policy == "strict" else AddressPolicy.parse("127.0.0.0/8")
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=8)
    client = httpx.Client(transport=guarded_transport(limits=limits, policy=chosen), trust_env=False)
    warm_client = httpx.Client(
        transport=guarded_transport(limits=limits, policy=AddressPolicy.parse("127.0.0.0/8")), trust_env=False
    )
    fetch_config(warm_client, warm + "/config", timeout=TIMEOUT)  # imports, pools and code paths warm

    def one() -> ProbeResult:
        if kind == "health":
            return probe_health(client, url, timeout=TIMEOUT)
        return fetch_config(client, url, timeout=TIMEOUT).result

    before = _vm("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak counter starts again from now
    started = time.monotonic()
    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda _: one(), range(parallel)))
    elapsed = time.monotonic() - started
    peak = _vm("VmHWM")
    return {
        "reasons": sorted({r.reason for r in results}),
        "ok": any(r.ok for r in results),
        "latency_s": elapsed,
        "baseline_kib": before,
        "growth_kib": max(0, peak - before),
        "message": results[0].message[:160],
    }


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A probe hanging up mid-request is the expected outcome here, not worth a traceback."""


def _serve() -> tuple[ThreadingHTTPServer, str]:
    _Hostile.payloads = _Payloads()
    server = _QuietServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@benchmark("hub-probe")
def hub_probe(workdir: Path) -> list[Row]:
    server, base = _serve()
    port = server.server_address[1]
    rows: list[Row] = []
    results: dict[str, Any] = {}
    try:
        for name, kind, target, policy, parallel in CASES:
            url = target.format(port=port) if target.startswith("http") else base + target
            proc = subprocess.run(
                [sys.executable, "-m", "bench.hub.probe", "child", url, kind, policy, str(parallel), base],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if proc.returncode != 0:
                (workdir / "child.log").write_text(proc.stderr)
                raise RuntimeError(f"hub-probe case {name!r} failed; see {workdir / 'child.log'}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            results[name] = result
            honest = name.startswith("honest")
            growth = result["growth_kib"] / 1024
            per_probe = growth / parallel
            outcome = "ok" if result["ok"] else ",".join(result["reasons"])
            expected = result["ok"] if honest else not result["ok"]
            bounded = per_probe < GROWTH_TARGET_MIB and result["latency_s"] < 2 * TIMEOUT + 0.5
            limit = f"< {GROWTH_TARGET_MIB:.0f} MiB/probe, < {2 * TIMEOUT + 0.5:g} s"
            target = f"{'ok' if honest else 'refused'}, {limit}"
            measured = f"+{growth:.1f} MiB peak, {result['latency_s'] * 1000:.0f} ms"
            rows.append(
                Row("hub-probe", f"{name}: {outcome}", measured, target, verdict(expected and bounded))
            )
        baseline = min(r["baseline_kib"] for r in results.values()) / 1024
        rows.append(
            Row(
                "hub-probe",
                "child resident before each case (imports, one warm probe)",
                f"{baseline:.1f} MiB",
            )
        )
    finally:
        server.shutdown()
        server.server_close()
    (workdir / "results.json").write_text(json.dumps(results, indent=2))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("child")
    run.add_argument("url")
    run.add_argument("kind", choices=["health", "config"])
    run.add_argument("policy", choices=["strict", "dev"])
    run.add_argument("parallel", type=int)
    run.add_argument("warm")
    args = parser.parse_args()
    print(json.dumps(child(args.url, args.kind, args.policy, args.parallel, args.warm)))


if __name__ == "__main__":
    main()
