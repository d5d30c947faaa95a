"""A scoring API for component tests: one stdlib HTTP server whose behaviour is chosen by the path.

Run as ``python scorer_app.py --port P [--certfile F --keyfile K [--client-ca CA]]``.  It is a real
process on 127.0.0.1 speaking real HTTP(S), so the agent's client, timeouts and TLS are exercised
for real.  Behaviours (all ``POST``):

    /mean/scoring            per series: score = mean of its values; metric = its labels
    /count/scoring           one result {meta: count}: score = number of series received
    /static/scoring          fixed {app, device} results (like upstream's static scorer)
    /status/<code>/scoring   answer with that HTTP status
    /sleep/<secs>/scoring    wait, then behave like /mean
    /nonjson/scoring         an HTML page
    /nan/scoring             a NaN score
    /outofrange/scoring      scores 250, -300 and 42.5
    /huge/scoring            a valid response of about 20 MiB
    /flaky/<n>/scoring?key=K the first n requests with key K get 503, later ones /mean
    /auth/<key>/scoring      401 unless the headers registered with PUT /_expect/<key> are present
    /fixed/<key>/scoring     answers the JSON registered with PUT /_respond/<key>
    /echo/scoring            401 with every request header echoed in the body
    /leak/scoring            500 whose body holds a secret-looking string (as an internal service's might)

Hostile peers (what an adversarial or broken endpoint does to the agent):

    /drip/scoring                 200 with a 100 kB Content-Length, then one byte per second
    /bomb/<mib>/scoring           a gzip body of ~1 MB per GiB that inflates to <mib> MiB of spaces
    /many/<n>/scoring             n valid results
    /retryafter/<secs>/scoring?key=K   the first request with key K gets 429 with Retry-After
    /echoalt/scoring              401 echoing the Authorization value upper-cased and percent-encoded
    GET /hostile/drip/api/v1/query_range        a Prometheus that drips, like /drip
    GET /hostile/pad/<mib>/api/v1/query_range   a valid matrix padded with <mib> MiB of whitespace
    GET /hostile/bomb/<mib>/api/v1/query_range  a gzip bomb, like /bomb
    GET /hostile/inject/api/v1/query_range      a 400 whose error text holds a newline and ANSI escapes
    GET /hostile/leak/api/v1/query_range        a 400 whose error text holds a secret-looking string

``GET /prom/<key>/api/v1/query_range`` plays a Prometheus that checks the headers registered for
``<key>`` and answers one fixed series.  Every request is recorded; ``GET /_requests?prefix=/auth/x``
returns them (path, headers, series labels, ``params``) so tests can check what the agent really sent.
``GET /healthz`` answers ``ok``.
"""

from __future__ import annotations

import argparse
import functools
import json
import ssl
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

LEAKED_SECRET = "AccessKeyId=ASIAFAKEKEY0123456789 SecretAccessKey=leaked/Secret+Value"
"""What the ``leak`` behaviours answer: a body an agent must never copy into a condition."""

LOCK = threading.Lock()
REQUESTS: list[dict[str, Any]] = []
EXPECT: dict[str, dict[str, str]] = {}
RESPOND: dict[str, Any] = {}
FLAKY: dict[str, int] = {}


def mean_results(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for series in data:
        values = [float(v[1]) for v in series.get("values", [])]
        metric = {k: v for k, v in series.get("metric", {}).items() if k != "__name__"}
        results.append({"metric": metric, "score": sum(values) / len(values) if values else 0.0})
    return results


@functools.lru_cache(maxsize=4)
def gzip_bomb(mib: int) -> bytes:
    """A gzip stream of ``mib`` MiB of spaces (about 1 MB per GiB), built without holding the output."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1024 * 1024)
    parts = [packer.compress(block) for _ in range(mib)]
    parts.append(packer.flush())
    return b"".join(parts)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def _drip(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(300):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass  # the agent hung up, as it should
        self.close_connection = True

    def _bomb(self, mib: int) -> None:
        body = gzip_bomb(mib)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            self.close_connection = True

    def _hostile_prometheus(self, parts: list[str]) -> None:
        kind = parts[1]
        if kind == "drip":
            self._drip()
        elif kind == "bomb":
            self._bomb(int(parts[2]))
        elif kind == "pad":
            pad = b" " * (int(parts[2]) * 1024 * 1024 // 2)
            series = json.dumps([{"metric": {"pod": "padded"}, "values": [[1700000000, "1"]]}]).encode()
            result = b"[" + pad + series[1:-1] + pad + b"]"
            self._send(200, b'{"status":"success","data":{"resultType":"matrix","result":' + result + b"}}")
        elif kind == "inject":
            error = "parse error\n2026-01-01 00:00:00 CRITICAL agent.worker forged line \x1b[31mred\x1b[0m"
            self._json(400, {"status": "error", "errorType": "bad_data", "error": error})
        elif kind == "leak":
            self._json(400, {"status": "error", "errorType": "bad_data", "error": f"near {LEAKED_SECRET}"})
        else:
            self._send(404, b"no such behaviour", "text/plain")

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/healthz":
            self._send(200, b"ok", "text/plain")
        elif url.path.startswith("/hostile/"):
            self._hostile_prometheus(url.path.strip("/").split("/"))
        elif url.path.startswith("/prom/"):
            self._prometheus(url.path, url.query)
        elif url.path == "/_requests":
            prefix = parse_qs(url.query).get("prefix", [""])[0]
            with LOCK:
                found = [r for r in REQUESTS if r["path"].startswith(prefix)]
            self._json(200, found)
        else:
            self._send(404, b"not found", "text/plain")

    def _prometheus(self, path: str, query: str) -> None:
        key = path.split("/")[2]
        with LOCK:
            REQUESTS.append(
                {"path": path, "query": query, "headers": {k.lower(): v for k, v in self.headers.items()}}
            )
            wanted = dict(EXPECT.get(key, {}))
        if wanted and not all(self.headers.get(k) == v for k, v in wanted.items()):
            self._json(401, {"status": "error", "errorType": "unauthorized", "error": "bad credentials"})
            return
        series = [{"metric": {"pod": "from-fake-source"}, "values": [[1700000000, "2"], [1700000060, "4"]]}]
        self._json(200, {"status": "success", "data": {"resultType": "matrix", "result": series}})

    def do_PUT(self) -> None:
        parts = urlsplit(self.path).path.strip("/").split("/")
        payload = json.loads(self._body())
        with LOCK:
            if parts[0] == "_expect":
                EXPECT[parts[1]] = payload
            elif parts[0] == "_respond":
                RESPOND[parts[1]] = payload
        self._json(200, {"ok": True})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        raw = self._body()
        record: dict[str, Any] = {
            "path": url.path,
            "query": url.query,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "length": len(raw),
            "received": time.time(),
        }
        data: Any = None
        try:
            document = json.loads(raw)
            record["params"] = document.get("params") if isinstance(document, dict) else None
            data = document["data"]
            record["data_is_list"] = isinstance(data, list)
            record["series"] = [s.get("metric", {}) for s in data] if isinstance(data, list) else None
        except (ValueError, KeyError, TypeError):
            record["data_is_list"] = False
        with LOCK:
            REQUESTS.append(record)
        series: list[dict[str, Any]] = data if isinstance(data, list) else []
        parts = url.path.strip("/").split("/")
        kind = parts[0]
        if kind in ("mean", "scoring"):
            self._json(200, {"results": mean_results(series)})
        elif kind == "count":
            self._json(200, {"results": [{"metric": {"meta": "count"}, "score": len(series)}]})
        elif kind == "static":
            rows = [
                ("app01", "all", 80),
                ("app02", "all", 80),
                ("app01", "3g.48gb", 60),
                ("app02", "3g.48gb", 55),
            ]
            self._json(
                200, {"results": [{"metric": {"app": a, "device": d}, "score": s} for a, d, s in rows]}
            )
        elif kind == "status":
            self._json(int(parts[1]), {"detail": f"status {parts[1]} as asked"})
        elif kind == "leak":
            self._json(500, {"detail": f"internal: {LEAKED_SECRET}"})
        elif kind == "sleep":
            time.sleep(float(parts[1]))
            self._json(200, {"results": mean_results(series)})
        elif kind == "nonjson":
            self._send(200, b"<html><body>surprise</body></html>", "text/html")
        elif kind == "nan":
            self._send(200, b'{"results":[{"metric":{"pod":"a"},"score":NaN}]}')
        elif kind == "outofrange":
            rows2 = [("high", 250.0), ("low", -300.0), ("mid", 42.5)]
            self._json(200, {"results": [{"metric": {"pod": p}, "score": s} for p, s in rows2]})
        elif kind == "huge":
            item = b'{"metric":{"pod":"' + b"x" * 200 + b'"},"score":1},'
            count = (20 * 1024 * 1024) // len(item)
            self._send(200, b'{"results":[' + item * count + b'{"score":1}]}')
        elif kind == "flaky":
            key = parse_qs(url.query).get("key", [""])[0]
            with LOCK:
                seen = FLAKY.get(key, 0)
                FLAKY[key] = seen + 1
            if seen < int(parts[1]):
                self._json(503, {"detail": "try again"})
            else:
                self._json(200, {"results": mean_results(series)})
        elif kind == "auth":
            with LOCK:
                wanted = dict(EXPECT.get(parts[1], {}))
            ok = bool(wanted) and all(self.headers.get(k) == v for k, v in wanted.items())
            if ok:
                self._json(
                    200, {"results": mean_results(series) or [{"metric": {"meta": "auth"}, "score": 1}]}
                )
            else:
                self._json(401, {"detail": "unauthorised"})
        elif kind == "echo":
            self._json(
                401, {"authorization": self.headers.get("Authorization"), "all": dict(self.headers.items())}
            )
        elif kind == "drip":
            self._drip()
        elif kind == "bomb":
            self._bomb(int(parts[1]))
        elif kind == "many":
            rows3 = [{"metric": {"pod": f"pod-{i}"}, "score": i % 100} for i in range(int(parts[1]))]
            self._json(200, {"results": rows3})
        elif kind == "retryafter":
            key = parse_qs(url.query).get("key", [""])[0]
            with LOCK:
                seen = FLAKY.get(key, 0)
                FLAKY[key] = seen + 1
            if seen == 0:
                body = b'{"detail": "slow down"}'
                self.send_response(429)
                self.send_header("Retry-After", parts[1])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self._json(200, {"results": mean_results(series)})
        elif kind == "echoalt":
            value = self.headers.get("Authorization", "")
            token = value.split(" ", 1)[-1]
            echoes = [value.upper(), token.lower(), urllib.parse.quote(token, safe=""), value.swapcase()]
            self._send(401, ("denied: " + " | ".join(echoes)).encode(), "text/plain")
        elif kind == "fixed":
            with LOCK:
                payload = RESPOND.get(parts[1], {"results": []})
            self._json(200, payload)
        else:
            self._send(404, b"no such behaviour", "text/plain")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    parser.add_argument("--client-ca")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.certfile:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.certfile, args.keyfile)
        if args.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(args.client_ca)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
