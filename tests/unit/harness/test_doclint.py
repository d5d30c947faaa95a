"""The documentation check: fences and relative links, on small Markdown files written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import doclint

FENCE = "```"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _messages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *paths: Path) -> list[str]:
    monkeypatch.setattr(doclint, "ROOT", tmp_path)
    return [f"{p.line}: {p.message}" for p in doclint.check(paths)]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Measured: `python -m bench placement-stability`", "measured-python--m-bench-placement-stability"),
        ("Numbers (this 2-core machine)", "numbers-this-2-core-machine"),
        ("Two OCM releases: v1.3.1 (default) and v1.2.1", "two-ocm-releases-v131-default-and-v121"),
        ("Scorer parameters, missing data, formats", "scorer-parameters-missing-data-formats"),
        ("snake_case stays", "snake_case-stays"),
    ],
)
def test_headings_slug_as_github_does(heading: str, anchor: str) -> None:
    assert doclint.slug(heading) == anchor


def test_repeated_headings_and_html_ids_are_anchors() -> None:
    found = doclint.anchors('# A\n\n## Setup\n\n## Setup\n\n<a id="custom"></a>\n')
    assert {"a", "setup", "setup-1", "custom"} <= found


def test_a_clean_document_has_no_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _write(tmp_path, "docs/other.md", "# Other\n\n## Deep part\n")
    _write(tmp_path, "samples/x.yaml", "a: 1\n")
    doc = _write(
        tmp_path,
        "README.md",
        f"# Top\n\n{FENCE}bash\nmake test\n{FENCE}\n\n"
        "[other](docs/other.md#deep-part), [self](#top), [file](samples/x.yaml), "
        "[dir](docs/), [web](https://example.com/#nothing-checked)\n\n"
        "| a | b |\n|---|---|\n| [in a table](docs/other.md) | x |\n",
    )
    assert _messages(monkeypatch, tmp_path, doc) == []


def test_a_stray_fence_is_found_where_it_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The shape that turned half a README into one code block: a closing fence twice.
    doc = _write(
        tmp_path,
        "README.md",
        f"# T\n\n{FENCE}yaml\na: 1\n{FENCE}\n{FENCE}\n\n## Next\n\ntext\n\n{FENCE}bash\nls\n{FENCE}\n",
    )
    messages = _messages(monkeypatch, tmp_path, doc)
    assert any(m.startswith("6: a fenced block without a language") for m in messages), messages
    inner = "12: a fence with a language inside the block opened at line 6"
    assert any(m.startswith(inner) for m in messages), messages


def test_an_unclosed_fence_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    doc = _write(tmp_path, "a.md", f"# T\n\n{FENCE}python\nprint(1)\n\nmore text\n")
    assert _messages(monkeypatch, tmp_path, doc) == ["3: the fence ``` opened here is never closed"]


def test_broken_links_and_anchors_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _write(tmp_path, "docs/other.md", "# Other\n")
    doc = _write(
        tmp_path,
        "README.md",
        "# T\n\n[gone](docs/gone.md) and\n[bad anchor](docs/other.md#nope) and [here](#missing)\n",
    )
    assert _messages(monkeypatch, tmp_path, doc) == [
        "3: link to 'docs/gone.md': docs/gone.md does not exist",
        "3: link to 'docs/other.md#nope': no heading or anchor 'nope' in other.md",
        "3: link to '#missing': no heading or anchor 'missing' in README.md",
    ]


def test_main_exits_1_on_problems_and_0_when_clean(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doclint, "ROOT", tmp_path)
    bad = _write(tmp_path, "bad.md", "[x](nothere.md)\n")
    good = _write(tmp_path, "good.md", "# Fine\n")
    assert doclint.main([str(bad)]) == 1
    assert "bad.md:1: link to 'nothere.md'" in capsys.readouterr().out
    assert doclint.main([str(good)]) == 0
