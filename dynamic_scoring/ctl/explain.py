"""``dynamic-scoring explain SCORER --cluster C``: one cycle of a DynamicScorer, every stage shown.

The summary is the hub's (``resolve``, with each field's origin as ``resolve`` noted it while picking
the value, ``Resolution.origins``), read from the hub by name or from a file; the cycle is the agent's
(``dynamic_scoring.ctl.explain_cycle``); the comparison is with the AddOnPlacementScore on the hub now,
in the cluster's namespace, where the agent writes it.  Nothing is written anywhere.  A file in
``configSyncMode: Full`` without a ``status.lastSyncedConfig`` gets its ``/config`` fetched with the
hub's own ``fetch_config``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import httpx
import yaml

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import DynamicScorer, SpecProblem, parse_scorer
from dynamic_scoring.addon.registry.probe import fetch_config
from dynamic_scoring.agent.items.stabilization import ItemState, Stabilizer
from dynamic_scoring.agent.kube.secrets import KubeSecretReader
from dynamic_scoring.agent.own_token import OwnToken
from dynamic_scoring.agent.ports import CONDITION_TYPE, SecretReader
from dynamic_scoring.ctl.explain_cycle import PREVIEW, FileTokens, Trace, run_cycle
from dynamic_scoring.ctl.hub import default_kubeconfig, hub_api, kubeconfig_option, unreachable
from dynamic_scoring.ctl.margin import band_of, units_per_point
from dynamic_scoring.ctl.output import ExitCode, emit_json, fail, output_option
from dynamic_scoring.ctl.record import query_range_endpoint
from dynamic_scoring.kube.api import KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, DYNAMIC_SCORERS
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.outbound.addresses import AGENT_ALLOW_CIDRS_ENV, AddressPolicy

DEFAULT_NAMESPACE = "dynamic-scoring"
AGENT_NAMESPACE = "open-cluster-management-agent-addon"


def _token_files(values: tuple[str, ...]) -> dict[tuple[str, str], Path]:
    out: dict[tuple[str, str], Path] = {}
    for value in values:
        ref, sep, path = value.partition("=")
        name, slash, key = ref.partition("/")
        if not sep or not slash or not name or not key or not path:
            raise click.BadParameter(f"{value!r}: expected SECRET/KEY=PATH", param_hint="--token-file")
        if not Path(path).is_file():
            raise click.BadParameter(f"{path}: no such file", param_hint="--token-file")
        out[(name, key)] = Path(path)
    return out


def _from_file(path: Path, name: str) -> dict[str, Any]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError) as exc:
        fail(f"{path}: cannot read a YAML document: {exc}", code=ExitCode.USAGE)
    scorers = [d for d in documents if d.get("kind") == "DynamicScorer"]
    named = [d for d in scorers if (d.get("metadata") or {}).get("name") == name]
    if named:
        return named[0]
    shown = ", ".join(str((d.get("metadata") or {}).get("name")) for d in scorers) or "none"
    fail(f"{path}: no DynamicScorer named {name!r} (found: {shown})", code=ExitCode.USAGE)


_CONFIG_HINT = "configSyncMode Full needs a valid /config: fix the scorer, or use configSyncMode None"


def _with_config(obj: dict[str, Any], scorer: DynamicScorer) -> dict[str, Any]:
    """A Full-mode scorer without a synced /config gets one, fetched as the hub's controller does."""
    if scorer.spec.config_sync_mode != "Full" or scorer.status.last_synced_config is not None:
        return obj
    if not scorer.spec.config_url:
        return obj
    with httpx.Client(follow_redirects=False) as client:
        result = fetch_config(client, scorer.spec.config_url)
    if result.config is None:
        code = (
            ExitCode.UNREACHABLE if result.result.reason in ("Unreachable", "Timeout") else ExitCode.FINDINGS
        )
        fail(f"/config of {scorer.name}: {result.result.message}", code=code, hint=_CONFIG_HINT)
    status = dict(obj.get("status") or {})
    status["lastSyncedConfig"] = result.config.model_dump(by_alias=True, exclude_none=True)
    return {**obj, "status": status}


def _current_aps(api: KubeAPI, cluster: str, name: str) -> tuple[dict[str, Any] | None, str]:
    """The object on the hub (None when there is none), or why it could not be read.

    A failed read does not end the command: the cycle has run and is shown; the exit code says 3.
    """
    try:
        return api.request("GET", ADDON_PLACEMENT_SCORES.path(cluster, name)), ""
    except NotFound:
        return None, ""
    except KubeError as exc:
        return None, f"could not read AddOnPlacementScore {cluster}/{name}: {exc}"


def _diff(trace: Trace, current: dict[str, Any] | None, expired: bool) -> list[dict[str, Any]]:
    now_scores = {
        s.get("name"): s.get("value") for s in ((current or {}).get("status") or {}).get("scores") or []
    }
    would = dict(trace.published)
    held = _stabilized(trace, now_scores, expired)
    rows = []
    for name in sorted(set(now_scores) | set(would)):
        before, after = now_scores.get(name), would.get(name)
        row: dict[str, Any] = {"name": name, "hub": before}
        state = held.get(name)
        if state is not None and state.published != state.raw:
            after = state.published
            row["raw"] = state.raw
            row["stabilization"] = state.explain()
        change = (
            "new" if before is None else "gone" if after is None else "same" if before == after else "changed"
        )
        rows.append({**row, "wouldWrite": after, "change": change})
    return rows


def _stabilized(trace: Trace, hub: dict[Any, Any], expired: bool) -> dict[str, ItemState]:
    """What the agent's stabilization makes of this cycle's values, starting from the hub's.

    One cycle has no history, so this is what an agent that starts now would do: the hub's
    values are where its windows start (a rise is held, a fall within a zero window is not).
    Nothing is held against expired scores, as in the agent.
    """
    if trace.plan is None or trace.outcome != "Scored" or not trace.plan.stabilization.active or expired:
        return {}
    stabilizer = Stabilizer(trace.plan.stabilization)
    stabilizer.reset(0.0, [(str(n), int(v)) for n, v in hub.items() if isinstance(v, int)])
    return stabilizer.apply(0.0, trace.published)


def _document(
    trace: Trace,
    origins: Mapping[str, str],
    notes: list[str],
    current: dict[str, Any] | None,
    read_hub: bool,
) -> dict[str, Any]:
    summary = trace.summary.model_dump(by_alias=True, exclude_none=True)
    fields = [
        {"field": k, "value": v, "from": origins.get(k, "spec")}
        for k, v in summary.items()
        if v not in ("", None, [], {}, 0) or k in origins
    ]
    doc: dict[str, Any] = {
        "scorer": trace.summary.name,
        "cluster": trace.cluster,
        "summary": {"fields": fields, "notes": notes},
        "fetch": {
            "window": trace.window,
            "queries": [
                {
                    "source": q.source,
                    "index": q.index,
                    "query": q.query,
                    "endpoint": q.endpoint,
                    "series": q.series,
                    "bytes": q.bytes,
                    "seconds": round(q.seconds, 4),
                    "answered": q.answered,
                }
                for q in trace.queries
            ],
        },
    }
    if trace.response is not None:
        doc["score"] = {
            "endpoint": trace.summary.scoring_endpoint,
            "results": len(trace.response.results),
            "seconds": round(trace.score_seconds, 4),
            "answer": [{"metric": dict(r.metric), "score": r.score} for r in trace.response.results],
        }
        doc["items"] = {
            "perResult": [
                {
                    "index": i.index,
                    "metric": i.metric,
                    "raw": i.raw,
                    "normalised": i.normalised,
                    "clamped": i.clamped,
                    "value": i.value,
                    "names": i.names,
                    **({"problem": i.problem} if i.problem else {}),
                }
                for i in trace.items
            ],
            "collisions": trace.collisions,
            "rejected": trace.rejected,
            "clamped": trace.clamped,
        }
        band = trace.summary.score_normalization
        if band is not None:
            # What a Placement's margin of N points is in the scorer's own units (``why`` says it too).
            doc["items"]["unitsPerPoint"] = units_per_point(band_of(band))
    hub_until = ((current or {}).get("status") or {}).get("validUntil")
    parsed_until = parse_time(hub_until) if isinstance(hub_until, str) else None
    expired = parsed_until is not None and parsed_until <= datetime.now(UTC)
    if trace.skipped_sources:
        doc["fetch"]["skippedSources"] = [
            {"reason": f.reason, "message": f.message, "hint": f.hint} for f in trace.skipped_sources
        ]
    if trace.no_data_default is not None:
        doc["noData"] = {"missingDataScore": trace.no_data_default, "scorerCalled": False}
        if trace.outcome == "Masked":  # nothing was queried either
            doc["noData"]["masked"] = True
    if trace.plan is not None and trace.outcome is not None:
        doc["addOnPlacementScore"] = {
            "namespace": trace.cluster,
            "name": trace.plan.aps_name,
            "publish": trace.plan.publish,
            "validUntil": trace.valid_until.isoformat() if trace.valid_until else None,
            "hubRead": read_hub,
            "hubValidUntil": hub_until,
            "hubExpired": expired,
            "items": _diff(trace, current, expired)
            if read_hub
            else [{"name": n, "wouldWrite": v} for n, v in trace.published],
        }
    elif trace.plan is not None and trace.failure is not None:
        # A failed cycle writes only the condition: the scores on the hub stay until validUntil.
        hub_scores = ((current or {}).get("status") or {}).get("scores") or []
        doc["addOnPlacementScore"] = {
            "namespace": trace.cluster,
            "name": trace.plan.aps_name,
            "publish": trace.plan.publish,
            "conditionOnly": {"type": CONDITION_TYPE, "status": "False", "reason": trace.failure.reason},
            "hubRead": read_hub,
            "hubValidUntil": hub_until,
            "hubExpired": expired,
            "items": [{"name": i.get("name"), "hub": i.get("value"), "change": "kept"} for i in hub_scores],
        }
    if trace.failure is not None:
        f = trace.failure
        doc["failed"] = {"stage": f.stage, "reason": f.reason, "message": f.message, "hint": f.hint}
    return doc


def _print_text(doc: dict[str, Any]) -> None:
    echo = click.echo
    echo(f"explain {doc['scorer']} on cluster {doc['cluster']} (one cycle, nothing written)")
    echo("\n1. summary (field, value, from)")
    shown = [
        (f["field"], f["value"] if isinstance(f["value"], str) else json.dumps(f["value"]), f["from"])
        for f in doc["summary"]["fields"]
    ]
    width = min(70, max((len(v) for _, v, _ in shown), default=0))
    for name, value, origin in shown:
        cut = value if len(value) <= width else value[: width - 1] + "…"
        echo(f"   {name:<24} {cut:<{width}}  {origin}")
    for note in doc["summary"]["notes"]:
        echo(f"   note: {note}")
    fetch = doc["fetch"]
    if fetch["queries"]:
        w = fetch["window"]
        echo(f"\n2. fetch: window {w.get('start')}..{w.get('end')} step {w.get('step')}s")
        for q in fetch["queries"]:
            source = f"[{q['source']}] " if q["source"] else ""
            echo(f"   {source}query #{q['index'] + 1}: {q['query']}")
            if q["answered"]:
                echo(f"      {q['endpoint']}: {q['series']} series, {q['bytes']} bytes, {q['seconds']:.3f}s")
            else:
                echo(f"      {q['endpoint']}: failed (below)")
    elif doc.get("noData", {}).get("masked"):
        echo("\n2. fetch: nothing queried: the hub masked this scorer on this cluster (maskPolicy: Score)")
    elif "failed" not in doc or doc["failed"]["stage"] != "summary":
        echo('\n2. fetch: no source (sourceType None): the scorer gets {"data": []}')
    for skipped in fetch.get("skippedSources", []):
        head = "   scored without it (onSourceError: ScoreWithAvailable)"
        echo(f"{head}: {skipped['reason']}: {skipped['message']}")
    if "score" in doc:
        s = doc["score"]
        echo(f"\n3. score: POST {s['endpoint']}: {s['results']} result(s) in {s['seconds']:.3f}s")
        for r in s["answer"][:PREVIEW]:
            echo(f"   {json.dumps(r)}")
        if s["results"] > PREVIEW:
            echo(f"   ... {s['results'] - PREVIEW} more (-o json shows all)")
        items = doc["items"]
        echo("\n4. items: raw -> normalised -> clamped -> rounded, and the name(s)")
        if "unitsPerPoint" in items:
            per = items["unitsPerPoint"]
            echo(
                f"   one published point is {per:.3g} of the scorer's units (AddOn 10 + Steady 1's"
                f" 10-point margin: {10 * per:.3g})"
            )
        for i in items["perResult"]:
            norm = "-" if i["normalised"] is None else f"{i['normalised']:g}"
            clamped = "-" if i["clamped"] is None else f"{i['clamped']:g}"
            value = "-" if i["value"] is None else str(i["value"])
            names = ", ".join(i["names"])
            echo(f"   #{i['index']:<4} {i['raw']:>10g} -> {norm:>10} -> {clamped:>8} -> {value:>4}  {names}")
            if "problem" in i:
                echo(f"         rejected: {i['problem']}")
        for name, results in items["collisions"].items():
            why = "the agent fails the cycle: ItemNameCollision"
            echo(f"   collision: {name!r} from results {results} ({why})")
        for line in items["rejected"]:
            echo(f"   rejected: {line}")
        if items["clamped"]:
            echo(f"   {items['clamped']} score(s) clamped to [-100, 100]")
    if "noData" in doc:
        score = doc["noData"]["missingDataScore"]
        why = "masked" if doc["noData"].get("masked") else "the source returned no series"
        echo(f"\n3. score: not called: {why}, missingDataScore {score} is written")
    if "addOnPlacementScore" in doc:
        a = doc["addOnPlacementScore"]
        where = f"\n5. AddOnPlacementScore {a['namespace']}/{a['name']}"
        if not a["publish"]:
            echo(f"{where}: would NOT write (scoreDestination None)")
        elif "conditionOnly" in a:
            c = a["conditionOnly"]
            echo(f"{where}: would write only the condition {c['type']}=False ({c['reason']})")
            if a["hubRead"]:
                state = ", expired: Placement ignores them" if a["hubExpired"] else ", until then"
                echo(f"   the scores on the hub stay as they are (validUntil {a['hubValidUntil']}{state})")
        else:
            echo(f"{where}: would write, validUntil {a['validUntil']}")
        if "conditionOnly" in a:
            for row in a["items"]:
                echo(f"   {row['name']:<50} hub {row['hub']!s:>5}  kept")
        elif a["hubRead"]:
            state = " (expired: Placement ignores these scores)" if a["hubExpired"] else ""
            echo(f"   on the hub now: validUntil {a['hubValidUntil'] or '(no object)'}{state}")
            for row in a["items"]:
                hub = "-" if row["hub"] is None else row["hub"]
                new = "-" if row["wouldWrite"] is None else row["wouldWrite"]
                echo(f"   {row['name']:<50} hub {hub!s:>5}  would write {new!s:>5}  {row['change']}")
                if "stabilization" in row:
                    echo(f"   {'':<50} (raw {row['raw']}: {row['stabilization']}, by stabilization)")
        else:
            echo(f"   (hub not read: {doc.get('hubError') or 'no kubeconfig'})")
            for row in a["items"]:
                echo(f"   {row['name']:<50} would write {row['wouldWrite']}")
    if "failed" in doc:
        f = doc["failed"]
        echo(f"\nFAILED at {f['stage']}: {f['reason']}: {f['message']}")
        if f["hint"]:
            echo(f"what to do: {f['hint']}")


@click.command()
@click.argument("scorer")
@click.option("--cluster", required=True, help="Managed cluster whose cycle to run (fills ${cluster}).")
@click.option(
    "-n", "--namespace", default=DEFAULT_NAMESPACE, show_default=True, help="DynamicScorer namespace."
)
@click.option(
    "--file",
    "file_",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the DynamicScorer from this YAML file instead of the hub.",
)
@click.option("--prometheus", help="Prometheus URL to query instead of the summary's (e.g. a port-forward).")
@click.option(
    "--token-file",
    "token_files",
    multiple=True,
    metavar="SECRET/KEY=PATH",
    help="Serve key KEY of Secret SECRET from a file; repeat per referenced Secret.",
)
@click.option(
    "--token-allowed-hosts",
    default="",
    metavar="ENTRIES",
    help="Where --token-file values may be sent: entries as in the allowed-hosts annotation "
    "(host, host:port, https://host, host/path-prefix). Without it they are sent nowhere "
    "(SecretNotBound): the inspected scorer's author chose its URLs.",
)
@click.option(
    "--agent-token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The token to send where the source asks for the agent's own ServiceAccount token "
    "(agentServiceAccountToken), e.g. the output of `oc -n open-cluster-management-agent-addon create "
    "token dynamic-scoring-agent`. Sent only to --token-allowed-hosts, as the agent sends it only to "
    "AgentTokenDestinations.",
)
@click.option(
    "--cluster-kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Managed cluster kubeconfig: read referenced Secrets not given by --token-file.",
)
@click.option(
    "--secret-namespace", default=AGENT_NAMESPACE, show_default=True, help="Where the agent's Secrets live."
)
@click.option(
    "--ca-file",
    "ca_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Extra CA bundle to trust (TLS is always verified).",
)
@click.option(
    "--allow-cidr",
    "allow_cidrs",
    multiple=True,
    metavar="CIDR",
    help="A network the cycle may call although the agent's address policy refuses it (loopback, "
    "link-local, metadata, reserved), e.g. 127.0.0.0/8 for a --prometheus port-forward; repeatable. "
    f"Added to env {AGENT_ALLOW_CIDRS_ENV}. Default: the agent's policy, nothing more.",
)
@kubeconfig_option
@output_option
def explain(
    scorer: str,
    cluster: str,
    namespace: str,
    file_: Path | None,
    prometheus: str | None,
    token_files: tuple[str, ...],
    token_allowed_hosts: str,
    agent_token_file: Path | None,
    cluster_kubeconfig: Path | None,
    secret_namespace: str,
    ca_files: tuple[Path, ...],
    allow_cidrs: tuple[str, ...],
    kubeconfig: Path | None,
    output: str,
) -> None:
    """Run one cycle of DynamicScorer SCORER for --cluster, show every stage, write nothing.

    Exit 1 when a stage fails (the agent's error and what to do are shown), 3 when the hub,
    Prometheus or the scorer cannot be reached.
    """
    files = _token_files(token_files)
    own_token = None
    if agent_token_file is not None:
        try:
            # the operator's own token on their machine: an http source they list is theirs to allow
            own_token = OwnToken(agent_token_file, token_allowed_hosts, clear_text=True)
        except ValueError as exc:
            fail(
                f"--agent-token-file needs --token-allowed-hosts: {exc}",
                code=ExitCode.USAGE,
                hint="list the source's host:port; the inspected scorer's author chose its URLs",
            )
    # The same address policy as the agent: the URLs are a scorer author's, and this runs with the
    # operator's network position (their laptop's loopback and cloud metadata included).
    try:
        policy = AddressPolicy.parse([*allow_cidrs, os.environ.get(AGENT_ALLOW_CIDRS_ENV, "")])
    except ValueError as exc:
        fail(f"--allow-cidr: {exc}", code=ExitCode.USAGE)
    endpoint = None
    if prometheus:
        try:
            endpoint = query_range_endpoint(prometheus)
        except ValueError as exc:
            fail(f"--prometheus: {exc}", code=ExitCode.USAGE)
    api: KubeAPI | None = None
    if file_ is None or kubeconfig is not None or default_kubeconfig().is_file():
        api = hub_api(kubeconfig)
    if file_ is not None:
        obj = _from_file(file_, scorer)
    else:
        assert api is not None
        try:
            obj = api.request("GET", DYNAMIC_SCORERS.path(namespace, scorer))
        except NotFound:
            fail(
                f"DynamicScorer {namespace}/{scorer} not found on the hub",
                code=ExitCode.FINDINGS,
                hint="check the name and -n; `kubectl get dscorer -A` lists them",
            )
        except KubeError as exc:
            unreachable(exc, f"read DynamicScorer {namespace}/{scorer}")
    parsed = parse_scorer(obj)
    if isinstance(parsed, SpecProblem):
        fail(f"DynamicScorer {scorer}: {parsed.message}", code=ExitCode.FINDINGS)
    obj = _with_config(obj, parsed)
    parsed = parse_scorer(obj)
    assert not isinstance(parsed, SpecProblem)
    resolution = resolve(parsed)
    if resolution.summary is None:
        why = resolution.message or resolution.pending or "no summary"
        fail(
            f"DynamicScorer {scorer} resolves to no summary: {why}",
            code=ExitCode.FINDINGS,
            hint="the hub does not distribute it either; fix the named field",
        )
    fallback: SecretReader | None = None
    if cluster_kubeconfig is not None:
        try:
            fallback = KubeSecretReader(KubeAPI(cluster_kubeconfig, timeout=15), secret_namespace)
        except Exception as exc:  # the kubernetes loader raises many unrelated types for a bad file
            fail(
                f"--cluster-kubeconfig {cluster_kubeconfig} is not usable: {type(exc).__name__}: {exc}",
                code=ExitCode.USAGE,
            )
    trace = asyncio.run(
        run_cycle(
            resolution.summary,
            cluster,
            FileTokens(files, fallback, allowed_hosts=token_allowed_hosts),
            prometheus=endpoint,
            extra_ca_files=ca_files,
            policy=policy,
            own_token=own_token,
        )
    )
    current, hub_error = None, ""
    if api is not None and trace.plan is not None:
        current, hub_error = _current_aps(api, cluster, trace.plan.aps_name)
    doc = _document(
        trace, resolution.origins, list(resolution.notes), current, api is not None and not hub_error
    )
    if hub_error:
        doc["hubError"] = hub_error
    if output == "json":
        emit_json(doc)
    else:
        _print_text(doc)
    if trace.failure is not None:
        raise SystemExit(int(ExitCode.UNREACHABLE if trace.failure.unreachable else ExitCode.FINDINGS))
    if hub_error:
        if output == "json":  # the document above already carries hubError: one document only
            raise SystemExit(int(ExitCode.UNREACHABLE))
        fail(
            hub_error, hint="check that the hub is up and the kubeconfig's user may read AddOnPlacementScores"
        )


__all__ = ["explain"]
