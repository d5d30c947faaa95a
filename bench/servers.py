"""Processes the agent benchmarks talk to: a Prometheus replay server and a trivial scorer.

``python -m bench.servers replay --port P --file F`` answers every GET with the bytes of ``F`` (a
recorded ``query_range`` response); ``python -m bench.servers scorer --port P`` reads each POST body
completely and answers one fixed result.  Both are deliberately minimal so that the measured time
is the agent's and the transport's, not the servers' logic.
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWER = json.dumps({"results": [{"metric": {"meta": "bench"}, "score": 42}]}).encode()


def serve(kind: str, port: int, payload: bytes) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(payload if kind == "replay" else b"ok")

        def do_POST(self) -> None:
            remaining = int(self.headers.get("Content-Length", "0"))
            while remaining:
                chunk = self.rfile.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                remaining -= len(chunk)
            self._reply(ANSWER)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["replay", "scorer"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", type=Path)
    args = parser.parse_args()
    serve(args.kind, args.port, args.file.read_bytes() if args.file else b"")


if __name__ == "__main__":
    main()
