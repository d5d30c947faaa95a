"""The release workflow's checks, in Python so that unit tests run them (.github/workflows/release.yaml).

A release is a `v<version>` tag.  Before anything is pushed the workflow asks this module whether
the tag, pyproject's version and the chart's version and appVersion all agree: a chart whose
appVersion is not the pushed image's tag would install an image that does not exist.  It also
derives, from the one image repository the workflow is given, the registry to log in to and the
OCI repository the chart goes to, and, for a fork publishing elsewhere, rewrites the chart's
default `image.repository` so the pushed chart installs the pushed image.

    python -m e2e.release check --tag v0.1.0 --image-repository ghcr.io/me/dynamic-scoring --owner me
    python -m e2e.release set-chart-repository ghcr.io/me/dynamic-scoring
    python -m e2e.release notes --version 0.1.0

`check` prints `key=value` lines for `$GITHUB_OUTPUT` and exits 1 naming every mismatch, including a
CHANGELOG.md without a section for the version; `notes` prints that section, the GitHub release's
notes.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "dynamic-scoring"
# The registry the workflow's GITHUB_TOKEN can push to, and only under the repository owner's name.
GHCR = "ghcr.io"
_REFERENCE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+$")
_VALUES_REPOSITORY = re.compile(r"(?m)^(  repository: ).*$")


class ReleaseError(RuntimeError):
    """The tag, versions or repository do not allow a release; the message lists every reason."""


@dataclass(frozen=True)
class Release:
    """What one release pushes, and where."""

    version: str
    image: str
    registry: str
    chart_repository: str

    def outputs(self) -> str:
        """`key=value` lines, the format of `$GITHUB_OUTPUT`."""
        return "".join(
            f"{k}={v}\n"
            for k, v in (
                ("version", self.version),
                ("image", self.image),
                ("registry", self.registry),
                ("chart_repository", self.chart_repository),
            )
        )


def project_version(repo: Path = REPO) -> str:
    """pyproject.toml's version: the tag without its `v`, and the image tag."""
    return str(tomllib.loads((repo / "pyproject.toml").read_text())["project"]["version"])


MEMBERS = ("addon", "agent")
"""The distributions beside the root one; each is released with the same version and pins the root's."""


def member_problems(declared: str, repo: Path = REPO) -> list[str]:
    """Every way the hub's and the agent's distributions disagree with the root's version.

    A release publishes one version of all three; a member left at the old version, or pinning an
    older `dynamic-scoring`, would install a hub or agent against shared code it was not built with.
    """
    problems = []
    for member in MEMBERS:
        project = tomllib.loads((repo / member / "pyproject.toml").read_text())["project"]
        if project["version"] != declared:
            problems.append(
                f"{member}/pyproject.toml's version is {project['version']}, pyproject.toml's is {declared}"
            )
        pins = [d for d in project.get("dependencies", []) if d.split("=")[0].strip() == "dynamic-scoring"]
        if pins != [f"dynamic-scoring=={declared}"]:
            problems.append(f"{member}/pyproject.toml must depend on dynamic-scoring=={declared}, not {pins}")
    return problems


def chart_versions(chart: Path = CHART) -> tuple[str, str]:
    """(version, appVersion) of the chart; appVersion is the image tag the chart installs by default."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    return str(meta["version"]), str(meta["appVersion"])


def check_repository(image_repository: str, owner: str) -> None:
    """Refuse a repository no push could reach, before any image is built."""
    if not _REFERENCE.match(image_repository):
        raise ReleaseError(
            f"image repository {image_repository!r} is not a lowercase `registry/namespace/name` reference"
        )
    host, _, path = image_repository.partition("/")
    if host == GHCR and path.split("/")[0] != owner.lower():
        raise ReleaseError(
            f"{image_repository} is not under ghcr.io/{owner.lower()}/, the only namespace this "
            "repository's GITHUB_TOKEN may push to; set the repository variable IMAGE_REPOSITORY to "
            f"ghcr.io/{owner.lower()}/dynamic-scoring (docs/release.md)"
        )


DEVELOPMENT = re.compile(r"-dev\.\d+$")
"""A checkout between releases says ``<next>-dev.<n>``: PEP 440 reads it as ``<next>.dev<n>``, SemVer (the
chart) as a pre-release of ``<next>``, and it is a valid image tag, so one string serves all three."""


def version_problems(declared: str, repo: Path = REPO) -> list[str]:
    """Every way the member distributions and the chart disagree with pyproject.toml's ``declared``."""
    problems = member_problems(declared, repo)
    chart_version, app_version = chart_versions(repo / "charts" / "dynamic-scoring")
    if chart_version != declared:
        problems.append(f"Chart.yaml version is {chart_version}, pyproject.toml's is {declared}")
    if app_version != declared:
        problems.append(f"Chart.yaml appVersion is {app_version}, pyproject.toml's is {declared}")
    return problems


def unreleased(repo: Path = REPO) -> str:
    """The entries of CHANGELOG.md's ``## Unreleased`` section ("" when it has none or is absent)."""
    try:
        return notes("Unreleased", repo)
    except ReleaseError:
        return ""


def checkout_problems(repo: Path = REPO) -> list[str]:
    """What makes a checkout lie about its release.

    Versions that disagree, or entries under ``## Unreleased`` while the version is a release's (the
    checkout would call itself that release).
    """
    declared = project_version(repo)
    problems = version_problems(declared, repo)
    if unreleased(repo) and not DEVELOPMENT.search(declared):
        problems.append(
            f"CHANGELOG.md has Unreleased entries but the version is {declared}, a release's: set "
            f"the next version with -dev.0 (e.g. {_next(declared)}-dev.0) everywhere docs/release.md lists"
        )
    return problems


def _next(version: str) -> str:
    major, minor, *_ = (int(p) for p in re.findall(r"\d+", version)[:3])
    return f"{major}.{minor + 1}.0"


def check(tag: str, image_repository: str, owner: str, repo: Path = REPO) -> Release:
    """The release a tag makes, or ReleaseError naming every disagreement."""
    tag = tag.removeprefix("refs/tags/")
    problems = []
    if not tag.startswith("v"):
        problems.append(f"tag {tag!r} is not of the form v<version>")
    version = tag.removeprefix("v")
    declared = project_version(repo)
    if version != declared:
        problems.append(f"tag {tag} says {version} but pyproject.toml's version is {declared}")
    if DEVELOPMENT.search(declared):
        release = DEVELOPMENT.sub("", declared)
        problems.append(
            f"{declared} is a development version, never released: set {release} everywhere "
            f"docs/release.md lists and move the Unreleased entries under '## {release}'"
        )
    problems += version_problems(declared, repo)
    try:
        check_repository(image_repository, owner)
    except ReleaseError as err:
        problems.append(str(err))
    try:
        notes(declared, repo)
    except ReleaseError as err:
        problems.append(str(err))
    if problems:
        raise ReleaseError("; ".join(problems))
    namespace = image_repository.rpartition("/")[0]
    return Release(
        version=version,
        image=f"{image_repository}:{version}",
        registry=image_repository.partition("/")[0],
        chart_repository=f"oci://{namespace}/charts",
    )


def notes(version: str, repo: Path = REPO) -> str:
    """The CHANGELOG.md section of ``version`` (``## <version>`` to the next ``## ``), without its heading.

    A release without its own section would publish notes that say nothing, so its absence, or an
    empty section, is an error.
    """
    path = repo / "CHANGELOG.md"
    if not path.is_file():
        raise ReleaseError(f"{path.name} is missing: add a section '## {version}'")
    match = re.search(
        rf"(?ms)^## {re.escape(version)}[ \t]*(?:\(.*?\))?[ \t]*\n(.*?)(?=^## |\Z)", path.read_text()
    )
    if match is None or not match.group(1).strip():
        raise ReleaseError(f"{path.name} has no section '## {version}' saying what the release changes")
    return match.group(1).strip() + "\n"


def set_chart_repository(image_repository: str, chart: Path = CHART) -> bool:
    """Point the chart's default `image.repository` at `image_repository`; True when it changed.

    Only the line's value changes (comments stay), and the result is read back so a values.yaml
    whose layout this does not know fails the release instead of shipping the old default.
    """
    path = chart / "values.yaml"
    text = path.read_text()
    new, count = _VALUES_REPOSITORY.subn(lambda m: m.group(1) + image_repository, text)
    if count != 1:
        raise ReleaseError(f"{path} must have exactly one `  repository:` line under `image:`, found {count}")
    if yaml.safe_load(new)["image"]["repository"] != image_repository:
        raise ReleaseError(f"rewriting {path} did not set image.repository to {image_repository}")
    path.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    """Command line for the workflow; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m e2e.release", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    chk = sub.add_parser("check", help="check a tag against the versions; print the release's outputs")
    chk.add_argument("--tag", required=True, help="the pushed tag, e.g. v0.1.0 or refs/tags/v0.1.0")
    chk.add_argument("--image-repository", required=True)
    chk.add_argument("--owner", required=True, help="the GitHub repository owner (github.repository_owner)")
    setrepo = sub.add_parser("set-chart-repository", help="rewrite the chart's default image.repository")
    setrepo.add_argument("image_repository")
    notes_cmd = sub.add_parser("notes", help="print the CHANGELOG.md section of a version")
    notes_cmd.add_argument("--version", required=True, help="e.g. 0.1.0 (no leading v)")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            sys.stdout.write(check(args.tag, args.image_repository, args.owner).outputs())
        elif args.command == "notes":
            sys.stdout.write(notes(args.version))
        else:
            changed = set_chart_repository(args.image_repository)
            print(
                f"chart image.repository: {args.image_repository} ({'changed' if changed else 'unchanged'})"
            )
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
