"""`make image`: build the project's image with podman, from a host-built wheelhouse.

Why the build is split in two (the Containerfile's header says the same):

* **Wheels are built and downloaded on the host** (`wheelhouse`), for each target architecture,
  and the Containerfile installs them with `pip --no-index`.  Inside a build container pip has
  neither the host's TLS trust nor, at an air-gapped site, any index at all; the host has both
  or neither, and an air-gapped site copies `dist/wheelhouse/` in.  `requirements.txt` pins
  exactly the downloaded versions, so what the image holds is what the wheelhouse holds.
* **The base image is pulled when it can be** (`PYTHON_IMAGE`, the official slim image), and
  otherwise built from Debian packages with `mmdebstrap` and imported into podman's storage.
  Both are Debian bookworm with Python 3.11, so the Containerfile is the same for both.

Podman runs daemonless as root here.  Two facts of this machine kind are handled by `podman()`:
`crun` cannot run in its cgroup setup, so `runc` is named when it is installed, and podman's
default rlimits exceed what the sandbox allows, so explicit `--ulimit`s are passed to `build`
and `run` (both overridable through the environment).

Warm builds are cheap: the dependency wheelhouse is reused while pyproject.toml is unchanged,
the project wheel while its sources are unchanged, podman reuses its cached layers, and the OCI
archive is rewritten only when the image ID changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

import click

REPO = Path(__file__).resolve().parent.parent
DIST = REPO / "dist"
WHEELHOUSE = DIST / "wheelhouse"
PYTHON_IMAGE = "docker.io/library/python:3.11-slim-bookworm"
# What the fallback base holds: Python 3.11 with venv (its ensurepip wheels build the venv) and
# the CA bundle.  Documentation, man pages and translations are left out (path-exclude), and
# apt's package lists removed: an image has no use for them.
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
BASE_SUITE = "bookworm"
BASE_MIRROR = os.environ.get("DS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
# The project's three distributions, one import name: the shared rooms with the CLI and the scorer
# library (the repository's root), the hub manager (addon/) and the agent (agent/).
DISTRIBUTIONS = (".", "addon", "agent")
# Sources that make up the project wheels; a change to any of them rebuilds them.
WHEEL_SOURCES = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "dynamic_scoring",
    "addon",
    "agent",
    "templates",
)
# What the dependency wheelhouse is resolved from; a change to any of them downloads it again.
REQUIREMENT_SOURCES = tuple(REPO / d / "pyproject.toml" for d in DISTRIBUTIONS)
EXTRAS = "agent,hub"
ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}


class ImageError(click.ClickException):
    """A build step failed; the message says which and what to do next."""


def say(message: str) -> None:
    """Progress on stderr, so that stdout carries only results."""
    click.echo(f"[image {time.strftime('%H:%M:%S')}] {message}", err=True)


def project_version() -> str:
    """The version from pyproject.toml: the image tag and the OCI archive's name."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    return str(data["project"]["version"])


def default_tag() -> str:
    """`<DEFAULT_IMAGE_REPOSITORY>:<version>`: the reference the manifests and the chart use."""
    from dynamic_scoring.addon.constants import DEFAULT_IMAGE_REPOSITORY

    return f"{DEFAULT_IMAGE_REPOSITORY}:{project_version()}"


def host_arch() -> str:
    """The host's architecture in OCI terms (amd64, arm64)."""
    machine = platform.machine()
    for oci, uname in ARCHES.items():
        if machine in (oci, uname):
            return oci
    raise ImageError(f"unsupported host architecture {machine!r}; supported: {', '.join(ARCHES)}")


# ---------------------------------------------------------------------------------- podman
def podman_global() -> list[str]:
    """`podman` plus the global flags this machine needs (runtime)."""
    runtime = os.environ.get("DS_PODMAN_RUNTIME", "runc" if shutil.which("runc") else "")
    return ["podman", *(["--runtime", runtime] if runtime else [])]


def ulimits() -> list[str]:
    """`--ulimit` flags for `build` and `run`; podman's defaults fail setrlimit in this sandbox."""
    raw = os.environ.get("DS_PODMAN_ULIMITS", "nofile=1024:1024 nproc=4096:4096")
    return [flag for value in raw.split() for flag in ("--ulimit", value)]


def podman(*args: str, capture: bool = True, check: bool = True, timeout: float = 1800) -> str:
    """Run podman; its stdout when captured.  A failure raises ImageError with podman's stderr."""
    argv = [*podman_global(), *args]
    proc = subprocess.run(
        argv,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or "").strip().splitlines()[-5:] if capture else []
        raise ImageError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {' / '.join(detail)}")
    return proc.stdout or ""


def image_exists(ref: str) -> bool:
    """True when `ref` is in podman's local storage."""
    return subprocess.run([*podman_global(), "image", "exists", ref], check=False).returncode == 0


def image_id(ref: str) -> str:
    """The local image's ID."""
    return podman("image", "inspect", "--format", "{{.Id}}", ref).strip()


def image_size(ref: str) -> int:
    """The local image's uncompressed size in bytes."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", ref).strip())


def ensure_packages(commands: dict[str, str]) -> None:
    """Install Debian packages for missing commands ({command: package}), as `make deps` does."""
    missing = sorted({pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None})
    if not missing:
        return
    if os.geteuid() != 0:
        raise ImageError(f"missing {', '.join(missing)}; install them (apt-get install {' '.join(missing)})")
    say(f"installing Debian packages {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", *missing]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ImageError(f"apt-get install {' '.join(missing)} failed: {done.stderr.strip()[-400:]}")


def ensure_podman() -> None:
    """Install podman and runc (and skopeo, which checks the archive) from Debian, when missing."""
    ensure_packages({"podman": "podman", "runc": "runc", "skopeo": "skopeo"})


# ------------------------------------------------------------------------------ wheelhouse
def _tree_hash(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            digest.update(f.relative_to(REPO).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def _pip(*args: str) -> None:
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise ImageError(f"`pip {' '.join(args[:2])}` failed: {proc.stderr.strip()[-800:]}")


def project_wheel(out: Path = WHEELHOUSE / "project") -> Path:
    """The project's wheels (one per distribution), rebuilt only when one of their sources changed.

    Returns the root distribution's wheel; the hub's and the agent's lie beside it, where
    `dependency_wheelhouse` and the Containerfile find them.
    """
    stamp = out / ".sources.sha256"
    digest = _tree_hash(REPO / p for p in WHEEL_SOURCES)
    wheels = sorted(out.glob("dynamic_scoring*.whl"))
    if len(wheels) == len(DISTRIBUTIONS) and stamp.is_file() and stamp.read_text() == digest:
        return next(w for w in wheels if w.name.startswith("dynamic_scoring-"))
    say("building the project wheels")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), *(str(REPO / d) for d in DISTRIBUTIONS))
    (wheel,) = out.glob("dynamic_scoring-*.whl")
    stamp.write_text(digest)
    return wheel


def platform_tags(arch: str) -> list[str]:
    """The pip `--platform` values for a glibc (Debian bookworm, glibc 2.36) Linux of `arch`."""
    uname = ARCHES[arch]
    return [f"manylinux_2_{minor}_{uname}" for minor in range(36, 16, -1)] + [f"manylinux2014_{uname}", "any"]


_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-")
OWN_WHEELS = ("dynamic_scoring", "dynamic_scoring_addon", "dynamic_scoring_agent")
"""The project's own wheels' names, which the dependency wheelhouse leaves out."""


def pins(directory: Path) -> list[str]:
    """`name==version` for every wheel in `directory` except the project's own."""
    found = []
    for wheel in sorted(directory.glob("*.whl")):
        m = _WHEEL_NAME.match(wheel.name)
        if m and m["name"] not in OWN_WHEELS:
            found.append(f"{m['name'].replace('_', '-')}=={m['version']}")
    return found


def dependency_wheelhouse(arch: str, project: Path) -> Path:
    """Every dependency of `project[agent,hub]` as a wheel for `arch`, with a pinned requirements.txt.

    Reused while pyproject.toml is unchanged; binary wheels only (`--only-binary :all:`), so no
    compiler runs and the same command serves a foreign architecture.
    """
    out = WHEELHOUSE / f"linux-{arch}"
    stamp = out / ".pyproject.sha256"
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in REQUIREMENT_SOURCES) + arch.encode()).hexdigest()
    if stamp.is_file() and stamp.read_text() == digest and (out / "requirements.txt").is_file():
        return out
    say(f"downloading dependency wheels for linux/{arch}")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tags = [flag for tag in platform_tags(arch) for flag in ("--platform", tag)]
    _pip(
        "download",
        "--quiet",
        "--only-binary",
        ":all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        *tags,
        "--dest",
        str(out),
        "--find-links",
        str(project.parent),  # the hub's and the agent's wheels, which the extras name
        f"{project}[{EXTRAS}]",
    )
    for own in out.glob("dynamic_scoring*.whl"):
        own.unlink()
    (out / "requirements.txt").write_text(
        "# Generated by `python -m e2e.image wheelhouse`: exactly the wheels beside this file.\n"
        + "".join(f"{p}\n" for p in pins(out))
    )
    stamp.write_text(digest)
    return out


def wheelhouse(arches: Sequence[str]) -> None:
    """The project wheel plus each architecture's dependency wheels, under dist/wheelhouse."""
    project = project_wheel()
    for arch in arches:
        dependency_wheelhouse(arch, project)


# ------------------------------------------------------------------------------ base image
def base_tag() -> str:
    """The fallback base's tag, keyed by its recipe so that a changed recipe builds a new one."""
    recipe = json.dumps([BASE_SUITE, BASE_PACKAGES, BASE_EXCLUDES]).encode()
    return f"localhost/dynamic-scoring-base:{BASE_SUITE}-{hashlib.sha256(recipe).hexdigest()[:10]}"


def build_base(tag: str) -> None:
    """Debian bookworm minbase with Python 3.11, from Debian packages, imported into podman."""
    ensure_packages({"mmdebstrap": "mmdebstrap"})
    DIST.mkdir(exist_ok=True)
    tarball = DIST / "base-rootfs.tar"
    say(f"building the base from Debian {BASE_SUITE} packages with mmdebstrap (about a minute)")
    excludes = [f"--dpkgopt=path-exclude={p}" for p in BASE_EXCLUDES]
    argv = [
        "mmdebstrap",
        "--quiet",
        "--variant=minbase",
        f"--include={','.join(BASE_PACKAGES)}",
        *excludes,
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*',
        BASE_SUITE,
        str(tarball),
        BASE_MIRROR,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise ImageError(
            f"mmdebstrap failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}; "
            f"check that {BASE_MIRROR} is reachable (DS_DEBIAN_MIRROR names another mirror)"
        )
    try:
        podman(
            "import",
            "--change",
            "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--change",
            "ENV=LANG=C.UTF-8",
            "--change",
            'CMD=["/bin/sh"]',
            str(tarball),
            tag,
        )
    finally:
        tarball.unlink(missing_ok=True)


def resolve_base(python_image: str, refresh: bool) -> str:
    """The base to build on: `python_image` when present or pullable, else the Debian-built one."""
    if image_exists(python_image):
        return python_image
    say(f"pulling {python_image}")
    pulled = subprocess.run(
        [*podman_global(), "pull", "--quiet", python_image],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if pulled.returncode == 0:
        return python_image
    reason = (pulled.stderr.strip().splitlines() or ["no reason given"])[-1]
    say(f"cannot pull {python_image} ({reason[:160]}); using a base built from Debian packages")
    tag = base_tag()
    if refresh or not image_exists(tag):
        build_base(tag)
    return tag


# ---------------------------------------------------------------------------------- build
def archive_path(version: str) -> Path:
    """Where the OCI archive of one version goes."""
    return DIST / f"dynamic-scoring-{version}.oci.tar"


def write_archive(tag: str, path: Path) -> bool:
    """`podman save --format oci-archive`, skipped when the archive already holds this image."""
    stamp = path.with_name(path.name + ".id")
    current = image_id(tag)
    if path.is_file() and stamp.is_file() and stamp.read_text() == current:
        return False
    say(f"writing {path.relative_to(REPO)}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    podman("save", "--format", "oci-archive", "--output", str(tmp), tag)
    tmp.replace(path)
    stamp.write_text(current)
    return True


def build(
    tag: str,
    python_image: str | None = None,
    refresh_base: bool = False,
    *,
    quiet: bool = False,
    containerfile: Path = REPO / "Containerfile",
    context: Path = REPO,
) -> str:
    """Wheelhouse, base, `podman build`; returns the image ID.  `quiet` keeps podman's step log out."""
    ensure_podman()
    wheelhouse([host_arch()])
    base = resolve_base(python_image or os.environ.get("PYTHON_IMAGE", PYTHON_IMAGE), refresh_base)
    say(f"podman build {tag} (base {base})")
    podman(
        "build",
        *ulimits(),
        *(["--quiet"] if quiet else []),
        "--layers",
        "--build-arg",
        f"PYTHON_IMAGE={base}",
        # podman 4.3 derives it too, but warns that it is missing; buildx sets it per --platform
        "--build-arg",
        f"TARGETARCH={host_arch()}",
        "--file",
        str(containerfile),
        "--tag",
        tag,
        str(context),
        capture=quiet,
    )
    return image_id(tag)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


@click.group()
def cli() -> None:
    """Build the project's image (`make image`); docs/image.md says what each step does."""


@cli.command("build")
@click.option(
    "--tag", default=None, help="Image reference to tag  [default: <DEFAULT_IMAGE_REPOSITORY>:<version>]"
)
@click.option(
    "--python-image",
    default=lambda: os.environ.get("PYTHON_IMAGE", PYTHON_IMAGE),
    show_default=PYTHON_IMAGE,
    help="Base image; when it cannot be pulled, a Debian-built base is used instead (env PYTHON_IMAGE).",
)
@click.option(
    "--refresh-base", is_flag=True, help="Rebuild the Debian-built base (to take security updates)."
)
@click.option(
    "--archive/--no-archive", default=True, show_default=True, help="Write the OCI archive under dist/."
)
def build_cmd(tag: str | None, python_image: str, refresh_base: bool, archive: bool) -> None:
    """Build the image into podman's local storage and write dist/dynamic-scoring-<version>.oci.tar."""
    started = time.monotonic()
    tag = tag or default_tag()
    build(tag, python_image, refresh_base)
    wrote = ""
    if archive:
        path = archive_path(project_version())
        write_archive(tag, path)
        wrote = f", archive {path.relative_to(REPO)} ({_mb(path.stat().st_size)})"
    elapsed = time.monotonic() - started
    click.echo(f"built {tag}: {_mb(image_size(tag))}{wrote}, in {elapsed:.1f} s")


@cli.command("wheelhouse")
@click.option(
    "--arch",
    "arches",
    multiple=True,
    type=click.Choice(sorted(ARCHES)),
    help="Target architecture (repeatable)  [default: the host's]",
)
def wheelhouse_cmd(arches: tuple[str, ...]) -> None:
    """Write dist/wheelhouse: the project wheel and each architecture's dependency wheels."""
    wheelhouse(arches or [host_arch()])
    click.echo(str(WHEELHOUSE))


@cli.command("tag")
def tag_cmd() -> None:
    """Print the reference `build` tags by default."""
    click.echo(default_tag())


def main() -> None:
    """Entry point for `python -m e2e.image`."""
    cli()


if __name__ == "__main__":
    main()
