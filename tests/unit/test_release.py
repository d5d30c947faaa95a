"""The release workflow and its checks (e2e/release.py), read and run without a registry.

Pushing cannot happen here, so what can drift silently is checked: the workflow's trigger,
platforms, pinned actions and build inputs, and the checks that refuse a tag whose version does
not match pyproject.toml or the chart, or a repository the workflow's token cannot push to.
"""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.constants import DEFAULT_IMAGE_REPOSITORY
from e2e import release

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github/workflows/release.yaml"


def workflow() -> dict[Any, Any]:
    return dict(yaml.safe_load(WORKFLOW.read_text()))


def steps(job: str = "release") -> list[dict[str, Any]]:
    return list(workflow()["jobs"][job]["steps"])


def step_using(action: str, job: str = "release") -> dict[str, Any]:
    (found,) = [s for s in steps(job) if s.get("uses", "").startswith(f"{action}@")]
    return found


def fake_repo(tmp_path: Path, project: str, chart: str, app: str, member: str | None = None) -> Path:
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{project}"\n')
    for name in release.MEMBERS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text(
            f'[project]\nname = "x-{name}"\nversion = "{member or project}"\n'
            f'dependencies = ["dynamic-scoring=={member or project}", "click>=8.1"]\n'
        )
    shutil.copytree(REPO / "charts/dynamic-scoring", tmp_path / "charts/dynamic-scoring")
    (tmp_path / "CHANGELOG.md").write_text(f"# Changelog\n\n## {project}\n\nWhat changed.\n")
    meta = tmp_path / "charts/dynamic-scoring/Chart.yaml"
    text = re.sub(r"(?m)^version: .*$", f"version: {chart}", meta.read_text())
    meta.write_text(re.sub(r"(?m)^appVersion: .*$", f'appVersion: "{app}"', text))
    return tmp_path


def test_the_workflow_runs_on_version_tags_only() -> None:
    # PyYAML reads the key `on` as the boolean True.
    assert workflow()[True] == {"push": {"tags": ["v*"]}}


def test_every_action_is_pinned_to_a_commit() -> None:
    uses = [s["uses"] for job in workflow()["jobs"] for s in steps(job) if "uses" in s]
    assert len(workflow()["jobs"]) == 4 and uses
    assert [u for u in uses if not re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u)] == []


def test_the_image_is_built_for_both_architectures_from_the_containerfile_and_wheelhouse() -> None:
    assert set(workflow()["env"]["PLATFORMS"].split(",")) == {"linux/amd64", "linux/arm64"}
    build = step_using("docker/build-push-action")["with"]
    assert build["file"] == "Containerfile" and build["context"] == "."
    assert build["push"] is True
    assert (REPO / build["file"]).is_file()
    runs = [s.get("run", "") for s in steps()]
    wheelhouse = [i for i, r in enumerate(runs) if "e2e.image wheelhouse" in r]
    assert wheelhouse and "--arch amd64" in runs[wheelhouse[0]] and "--arch arm64" in runs[wheelhouse[0]]
    assert wheelhouse[0] < steps().index(step_using("docker/build-push-action"))


def test_the_check_runs_before_anything_is_pushed() -> None:
    names = [s.get("id") or s.get("uses", "").split("@")[0] for s in steps()]
    assert names.index("release") < names.index("docker/login-action") < names.index("image")
    assert "e2e.release check" in steps()[names.index("release")]["run"]


def test_each_job_may_write_what_it_publishes_and_nothing_else() -> None:
    jobs = workflow()["jobs"]
    assert workflow()["permissions"] == {"contents": "read"}
    assert jobs["release"]["permissions"] == {"contents": "read", "packages": "write"}
    assert jobs["python"]["permissions"] == {"contents": "read"}
    assert jobs["github-release"]["permissions"] == {"contents": "write"}
    # trusted publishing: the OIDC token only where it is exchanged, and no password anywhere
    assert jobs["pypi"]["permissions"] == {"id-token": "write"}
    assert jobs["pypi"]["environment"]["name"] == "pypi"
    assert "password" not in step_using("pypa/gh-action-pypi-publish", "pypi")["with"]


def test_the_python_distributions_are_checked_then_published_after_the_image_and_chart() -> None:
    runs = [s.get("run", "") for s in steps("python")]
    order = [
        next(i for i, r in enumerate(runs) if needle in r)
        for needle in ("e2e.release check", "python -m build", "twine check --strict")
    ]
    assert order == sorted(order)
    upload = steps("python").index(step_using("actions/upload-artifact", "python"))
    assert order[-1] < upload
    jobs = workflow()["jobs"]
    for job in ("github-release", "pypi"):
        assert set(jobs[job]["needs"]) == {"release", "python"}
        fetched = step_using("actions/download-artifact", job)["with"]
        assert fetched["name"] == step_using("actions/upload-artifact", "python")["with"]["name"]
    assert jobs["pypi"]["if"] == "vars.PYPI_PUBLISH == 'true'"
    [create] = [s["run"] for s in steps("github-release") if "gh release create" in s.get("run", "")]
    assert "e2e.release notes" in create and "--verify-tag" in create and "dist/python/*" in create


def test_release_notes_are_the_versions_changelog_section(tmp_path: Path) -> None:
    (tmp_path / "CHANGELOG.md").write_text(
        "# Changelog\n\n## Unreleased\n\n- next\n\n## 0.2.0\n\n- two\n- more\n\n## 0.1.0\n\n- one\n"
    )
    assert release.notes("0.2.0", tmp_path) == "- two\n- more\n"
    assert release.notes("0.1.0", tmp_path) == "- one\n"
    with pytest.raises(release.ReleaseError, match=re.escape("no section '## 0.3.0'")):
        release.notes("0.3.0", tmp_path)


def test_the_checkout_tells_the_truth_about_its_release() -> None:
    """Between releases the version is ``<next>-dev.<n>``; a release's own version has its section."""
    assert release.checkout_problems() == []
    version = release.project_version()
    if not release.DEVELOPMENT.search(version):
        assert release.notes(version) != ""


def test_unreleased_entries_under_a_release_version_are_refused(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path, "0.1.0", "0.1.0", "0.1.0")
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## Unreleased\n\n- next\n\n## 0.1.0\n\n- one\n")
    (problem,) = release.checkout_problems(repo)
    assert "Unreleased entries but the version is 0.1.0" in problem and "0.2.0-dev.0" in problem
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## Unreleased\n\n## 0.1.0\n\n- one\n")
    assert release.checkout_problems(repo) == []  # an empty Unreleased heading says nothing


def test_a_development_version_is_never_released(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path, "0.2.0-dev.0", "0.2.0-dev.0", "0.2.0-dev.0")
    assert release.checkout_problems(repo) == []  # a consistent checkout between releases
    with pytest.raises(release.ReleaseError, match=re.escape("0.2.0-dev.0 is a development version")):
        release.check("v0.2.0-dev.0", DEFAULT_IMAGE_REPOSITORY, "dynamic-scoring", repo)


def test_a_release_without_a_changelog_section_is_refused(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path, "0.2.0", "0.2.0", "0.2.0")
    (repo / "CHANGELOG.md").write_text("# Changelog\n\n## 0.1.0\n\n- one\n")
    with pytest.raises(release.ReleaseError, match=re.escape("no section '## 0.2.0'")):
        release.check("v0.2.0", DEFAULT_IMAGE_REPOSITORY, "dynamic-scoring", tmp_path)


def test_the_current_versions_agree() -> None:
    assert release.version_problems(release.project_version()) == []


def test_a_release_tag_makes_the_release_of_its_version(tmp_path: Path) -> None:
    version = "0.2.0"
    repo = fake_repo(tmp_path, version, version, version)
    made = release.check(f"v{version}", DEFAULT_IMAGE_REPOSITORY, "dynamic-scoring", repo)
    assert made.image == f"{DEFAULT_IMAGE_REPOSITORY}:{version}"
    assert made.registry == "ghcr.io"
    assert made.chart_repository == "oci://ghcr.io/dynamic-scoring/charts"
    assert f"version={version}\n" in made.outputs()


@pytest.mark.parametrize(
    ("tag", "project", "chart", "app", "complaint"),
    [
        ("v0.2.0", "0.1.0", "0.1.0", "0.1.0", "pyproject.toml's version is 0.1.0"),
        ("0.1.0", "0.1.0", "0.1.0", "0.1.0", "not of the form v<version>"),
        ("v0.2.0", "0.2.0", "0.1.0", "0.2.0", "Chart.yaml version is 0.1.0"),
        ("v0.2.0", "0.2.0", "0.2.0", "0.1.0", "Chart.yaml appVersion is 0.1.0"),
    ],
)
def test_a_mismatch_stops_the_release(
    tmp_path: Path, tag: str, project: str, chart: str, app: str, complaint: str
) -> None:
    repo = fake_repo(tmp_path, project, chart, app)
    with pytest.raises(release.ReleaseError, match=re.escape(complaint)):
        release.check(tag, DEFAULT_IMAGE_REPOSITORY, "dynamic-scoring", repo)


def test_refs_tags_prefix_is_accepted(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path, "1.2.3", "1.2.3", "1.2.3")
    assert release.check("refs/tags/v1.2.3", "ghcr.io/me/dynamic-scoring", "Me", repo).version == "1.2.3"


@pytest.mark.parametrize(
    ("repository", "owner", "complaint"),
    [
        ("ghcr.io/dynamic-scoring/dynamic-scoring", "a-fork", "ghcr.io/a-fork/dynamic-scoring"),
        ("ghcr.io/Me/dynamic-scoring", "Me", "lowercase"),
        ("dynamic-scoring", "me", "lowercase `registry/namespace/name`"),
    ],
)
def test_a_repository_the_token_cannot_push_to_is_refused(
    repository: str, owner: str, complaint: str
) -> None:
    with pytest.raises(release.ReleaseError, match=re.escape(complaint)):
        release.check_repository(repository, owner)


def test_another_registry_is_left_to_its_own_credentials() -> None:
    release.check_repository("registry.example.com:5000/team/dynamic-scoring", "whoever")


def test_set_chart_repository_changes_only_the_default_repository(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(REPO / "charts/dynamic-scoring", chart)
    before = (chart / "values.yaml").read_text()
    assert release.set_chart_repository(DEFAULT_IMAGE_REPOSITORY, chart) is False
    assert (chart / "values.yaml").read_text() == before
    assert release.set_chart_repository("ghcr.io/me/dynamic-scoring", chart) is True
    after = (chart / "values.yaml").read_text()
    assert yaml.safe_load(after)["image"] == {
        **yaml.safe_load(before)["image"],
        "repository": "ghcr.io/me/dynamic-scoring",
    }
    assert after.replace("ghcr.io/me/dynamic-scoring", DEFAULT_IMAGE_REPOSITORY) == before


def test_set_chart_repository_refuses_a_layout_it_does_not_know(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text("image: {repository: x, tag: ''}\n")
    with pytest.raises(release.ReleaseError, match="exactly one"):
        release.set_chart_repository("ghcr.io/me/dynamic-scoring", tmp_path)


def test_the_command_line_prints_outputs_and_fails_on_a_mismatch(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    version = "0.2.0"
    monkeypatch.setattr(
        release, "check", functools.partial(release.check, repo=fake_repo(tmp_path, *[version] * 3))
    )
    args = ["check", "--image-repository", DEFAULT_IMAGE_REPOSITORY, "--owner", "dynamic-scoring"]
    assert release.main([*args, "--tag", f"v{version}"]) == 0
    assert f"image={DEFAULT_IMAGE_REPOSITORY}:{version}\n" in capsys.readouterr().out
    assert release.main([*args, "--tag", "v999.0.0"]) == 1
    assert "999.0.0" in capsys.readouterr().err


def test_a_member_distribution_left_behind_stops_the_release(tmp_path: Path) -> None:
    """The hub's and the agent's distributions ship the root's version and pin the root exactly."""
    repo = fake_repo(tmp_path, "0.2.0", "0.2.0", "0.2.0", member="0.1.0")
    with pytest.raises(release.ReleaseError) as caught:
        release.check("v0.2.0", DEFAULT_IMAGE_REPOSITORY, "dynamic-scoring", repo)
    assert "addon/pyproject.toml's version is 0.1.0" in str(caught.value)
    assert "agent/pyproject.toml must depend on dynamic-scoring==0.2.0" in str(caught.value)
