"""The scorer library: a base install without the hub's and agent's dependencies, and decoding speed.

``scorer-install`` makes a fresh venv, installs the checkout with no extras (what a scorer image
does), and checks there that the heavy dependencies are absent and that a scorer passes the
conformance check.  It downloads from the package index unless pip's cache has everything: about
85 s on the shared 2-core machine.  ``scorer-decode`` times the agent's design load, 10,000 series
x 60 points, through the library's request decoding and through its HTTP server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import venv
from pathlib import Path

from bench import Row, benchmark

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("kubernetes", "jinja2", "prometheus_client", "click", "msgspec", "yaml", "cryptography")

PROBE = """
import importlib.util, json, sys
from dynamic_scoring.scorer import ScorerApp, result
from dynamic_scoring.scorer.testing import check_app
score = lambda r: [result(s.mean(), pod=s.label("pod")) for s in r.with_points()]
app = ScorerApp(score, name="x", query="up")
report = check_app(app, large=False)
print(json.dumps({
    "present": [m for m in %r if importlib.util.find_spec(m)],
    "ok": report.ok,
    "project": sorted(m for m in sys.modules if m.split(".")[:2] in (
        ["dynamic_scoring", "addon"], ["dynamic_scoring", "agent"], ["dynamic_scoring", "ctl"], ["e2e"])),
}))
"""


@benchmark("scorer-install")
def scorer_install(workdir: Path) -> list[Row]:
    """``pip install <checkout>`` with no extras into a fresh venv, then a scorer in it."""
    env_dir = workdir / "scorer-venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    started = time.monotonic()
    subprocess.run([python, "-m", "pip", "install", "-q", str(REPO)], check=True, timeout=900)
    seconds = time.monotonic() - started
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], check=True, capture_output=True)
    count = len(json.loads(listed.stdout))
    probe = subprocess.run([python, "-c", PROBE % (HEAVY,)], check=True, capture_output=True, cwd=workdir)
    found = json.loads(probe.stdout)
    clean = not found["present"] and not found["project"]
    return [
        Row("scorer-install", "pip install, no extras", f"{seconds:.0f} s"),
        Row("scorer-install", "distributions installed", str(count)),
        Row(
            "scorer-install",
            "hub/agent packages present",
            ", ".join(found["present"] + found["project"]) or "none",
            "none",
            "ok" if clean else "MISSED",
        ),
        Row(
            "scorer-install", "a scorer conforms", str(found["ok"]), "True", "ok" if found["ok"] else "MISSED"
        ),
    ]


@benchmark("scorer-decode")
def scorer_decode(workdir: Path) -> list[Row]:
    """10,000 series x 60 points: decoding alone, and one scoring request over loopback HTTP."""
    import httpx

    from dynamic_scoring.scorer import ScorerApp, ScorerServer, parse_request, result
    from dynamic_scoring.scorer.conformance import matrix_body

    body = matrix_body(10_000, 60)
    started = time.monotonic()
    request = parse_request(body)
    decode = time.monotonic() - started
    app = ScorerApp(
        lambda r: [result(s.mean(), pod=s.label("pod")) for s in r.with_points()], name="x", query="up"
    )
    server = ScorerServer(app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    try:
        started = time.monotonic()
        response = httpx.post(f"{server.base_url}/scoring", content=body, timeout=120)
        served = time.monotonic() - started
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert response.status_code == 200 and len(request.series) == 10_000
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    return [
        Row("scorer-decode", "body", f"{len(body) / 1e6:.1f} MB"),
        Row("scorer-decode", "parse_request", f"{decode:.2f} s"),
        Row("scorer-decode", "POST through ScorerServer (mean per series)", f"{served:.2f} s"),
        Row("scorer-decode", "load average while measured", load),
    ]


if __name__ == "__main__":
    sys.exit("run as: python -m bench scorer-install scorer-decode")
