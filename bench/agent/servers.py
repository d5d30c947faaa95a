"""Processes the agent benchmarks talk to: a Prometheus replay server and a trivial scorer.

``python -m bench.agent.servers replay --port P --file F`` answers every GET with the bytes of ``F`` (a
recorded ``query_range`` response); ``python -m bench.agent.servers scorer --port P`` reads each POST body
completely and answers one fixed result.  Both are deliberately minimal so that the measured time
is the agent's and the transport's, not the servers' logic.

Hostile peers for ``bench.agent.hostile`` answer every POST (``many``: ``--count`` results; ``bomb``: a
gzip body inflating to ``--mib`` MiB) or every GET (``pad``: one series padded with ``--mib`` MiB of
whitespace inside ``data.result``).
"""

from __future__ import annotations

import argparse
import json
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWER = json.dumps({"results": [{"metric": {"meta": "bench"}, "score": 42}]}).encode()


def hostile_payload(kind: str, count: int, mib: int) -> tuple[bytes, dict[str, str]]:
    """The fixed answer of a hostile server and its extra headers."""
    if kind == "many":
        rows = [{"metric": {"pod": f"pod-{i:06d}"}, "score": i % 100} for i in range(count)]
        return json.dumps({"results": rows}).encode(), {}
    if kind == "bomb":
        packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        block = b" " * (1024 * 1024)
        body = b"".join([packer.compress(block) for _ in range(mib)] + [packer.flush()])
        return body, {"Content-Encoding": "gzip"}
    pad = b" " * (mib * 1024 * 1024 // 2)
    series = b'{"metric":{"pod":"padded"},"values":[[1700000000,"1"]]}'
    result = b"[" + pad + series + pad + b"]"
    return b'{"status":"success","data":{"resultType":"matrix","result":' + result + b"}}", {}


def serve(kind: str, port: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, body: bytes) -> None:
            self.send_response(200)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(payload if kind in ("replay", "pad") else b"ok")

        def do_POST(self) -> None:
            remaining = int(self.headers.get("Content-Length", "0"))
            while remaining:
                chunk = self.rfile.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                remaining -= len(chunk)
            self._reply(payload if kind in ("many", "bomb") else ANSWER)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["replay", "scorer", "many", "bomb", "pad"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", type=Path)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--mib", type=int, default=1024)
    args = parser.parse_args()
    if args.kind in ("many", "bomb", "pad"):
        body, extra = hostile_payload(args.kind, args.count, args.mib)
        serve(args.kind, args.port, body, extra)
    else:
        serve(args.kind, args.port, args.file.read_bytes() if args.file else b"")


if __name__ == "__main__":
    main()
