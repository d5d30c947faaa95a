"""explain's arguments and its Secret reader, without any process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dynamic_scoring.agent.errors import SecretNotFound
from dynamic_scoring.agent.ports import SecretContents
from dynamic_scoring.ctl.explain_cycle import FileTokens
from dynamic_scoring.ctl.main import main
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION


def invoke(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {"KUBECONFIG": str(tmp_path / "none")}
    result = CliRunner().invoke(main, ["explain", *args], env=env)
    return result.exit_code, result.output


def test_token_files_need_secret_key_and_an_existing_path(tmp_path: Path) -> None:
    scorer = tmp_path / "s.yaml"
    scorer.write_text("kind: DynamicScorer\nmetadata: {name: s}\nspec: {}\n")
    code, out = invoke(tmp_path, "s", "--cluster", "c", "--file", str(scorer), "--token-file", "tok=/x")
    assert code == 2 and "expected SECRET/KEY=PATH" in out
    code, out = invoke(tmp_path, "s", "--cluster", "c", "--file", str(scorer), "--token-file", "t/k=/no/such")
    assert code == 2 and "/no/such: no such file" in out


def test_a_file_without_the_named_scorer_lists_what_it_holds(tmp_path: Path) -> None:
    scorer = tmp_path / "s.yaml"
    scorer.write_text(
        yaml.safe_dump_all(
            [
                {"kind": "DynamicScorer", "metadata": {"name": "a"}},
                {"kind": "ConfigMap", "metadata": {"name": "b"}},
            ]
        )
    )
    code, out = invoke(tmp_path, "b", "--cluster", "c", "--file", str(scorer))
    assert code == 2 and "no DynamicScorer named 'b' (found: a)" in out


def test_a_bad_prometheus_url_is_refused(tmp_path: Path) -> None:
    scorer = tmp_path / "s.yaml"
    scorer.write_text("kind: DynamicScorer\nmetadata: {name: s}\nspec: {}\n")
    code, out = invoke(tmp_path, "s", "--cluster", "c", "--file", str(scorer), "--prometheus", "prom:9090")
    assert code == 2 and "--prometheus" in out and "not an http or https URL" in out


def test_by_name_without_a_kubeconfig_exits_3_with_a_hint(tmp_path: Path) -> None:
    code, out = invoke(tmp_path, "s", "--cluster", "c")
    assert code == 3 and "does not exist" in out and "--kubeconfig" in out


def test_file_tokens_serve_files_then_the_fallback_and_name_what_is_missing(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_bytes(b"abc\n")

    class Cluster:
        async def get(self, name: str) -> SecretContents:
            return SecretContents("ns", name, {"y": f"{name}/y".encode()})

    given = asyncio.run(FileTokens({("s", "k"): token}).get("s"))
    # The caller's own file, but the URLs are the scorer author's: bound to what the caller lists.
    assert given.value("k") == b"abc" and not given.operator_supplied and not given.annotations
    bound = asyncio.run(FileTokens({("s", "k"): token}, allowed_hosts="prom.example.com").get("s"))
    assert bound.annotations == {ALLOWED_HOSTS_ANNOTATION: "prom.example.com"}
    from_cluster = asyncio.run(FileTokens({}, Cluster()).get("x"))
    assert from_cluster.value("y") == b"x/y" and not from_cluster.operator_supplied
    with pytest.raises(SecretNotFound, match="'x' is referenced but was not given"):
        asyncio.run(FileTokens({("s", "k"): token}).get("x"))
