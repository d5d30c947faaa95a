"""Bearer tokens: from a file (re-read on change) or the environment, compared whole, never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dynamic_scoring.scorer import BearerToken, TokenError


def test_file_token_is_checked_whole_and_follows_rotation(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    token = BearerToken.from_file(path)
    assert token.allows("Bearer s3cret") and token.allows("bearer s3cret")
    for wrong in (None, "", "Bearer", "Bearer s3cre", "Bearer s3cret-", "Basic s3cret", "s3cret"):
        assert not token.allows(wrong), wrong
    path.write_text("rotated")
    os.utime(path, ns=(1, 1))  # a different stamp even within the clock's resolution
    assert token.allows("Bearer rotated") and not token.allows("Bearer s3cret")
    path.unlink()  # a Secret being rewritten is briefly absent: the last good token stays
    assert token.allows("Bearer rotated")
    assert "rotated" not in repr(token) and "redacted" in repr(token)


def test_env_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCORER_TOKEN", " abc ")
    assert BearerToken.from_env("SCORER_TOKEN").allows("Bearer abc")
    monkeypatch.delenv("SCORER_TOKEN")
    with pytest.raises(TokenError, match="SCORER_TOKEN is not set"):
        BearerToken.from_env("SCORER_TOKEN")


@pytest.mark.parametrize(("content", "message"), [("  \n", "empty"), ("a b", "printable ASCII")])
def test_unusable_tokens_are_refused_at_start(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "token"
    path.write_text(content)
    with pytest.raises(TokenError, match=message):
        BearerToken.from_file(path)
    with pytest.raises(TokenError, match="cannot read"):
        BearerToken.from_file(tmp_path / "missing")
