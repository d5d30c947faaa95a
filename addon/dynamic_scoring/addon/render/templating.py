"""Loading `templates/` and turning a template into Kubernetes objects.

Every value enters a template through `tojson`, and JSON is YAML: a cluster name, an image or a
proxy URL can therefore never change the document's structure, whatever characters it holds.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import yaml

from dynamic_scoring.addon.errors import TemplatesUnavailableError
from dynamic_scoring.kube.jsontypes import JSON

# libyaml's parser when PyYAML was built with it: parsing dominates rendering (a full pass renders
# every cluster), and the C loader is about ten times faster than the pure-Python one.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _templates_dir() -> Path:
    """Where the agent templates are: inside the package in a wheel, beside it in a source checkout.

    The wheel carries ``templates/`` as ``dynamic_scoring/addon/templates`` (pyproject's force-include), so a
    plain ``pip install`` renders the same manifests as the repository does; an editable install or a test run
    from the checkout reads the repository's ``templates/`` directly, so edits show without a rebuild.
    """
    packaged = Path(__file__).resolve().parents[1] / "templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[4] / "templates"


TEMPLATES_DIR = _templates_dir()


@functools.lru_cache(maxsize=8)
def environment(templates_dir: Path = TEMPLATES_DIR) -> jinja2.Environment:
    """One Jinja environment per directory, cached: a full pass renders thousands of clusters.

    `auto_reload` is off: the templates are part of the release and do not change under a
    running process, and with it on every render stats each template file (at 3,500 clusters a
    sixth of the manager's time went to those stat calls).  An edited template shows at the
    next start.
    """
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        auto_reload=False,
        undefined=jinja2.StrictUndefined,  # a missing value is a bug, never an empty string
        autoescape=False,
        keep_trailing_newline=True,
    )


def render_objects(template: str, values: dict[str, Any], templates_dir: Path = TEMPLATES_DIR) -> list[JSON]:
    """Render one template file and parse its YAML documents; empty documents are dropped.

    Raises:
        TemplatesUnavailableError: the template is not installed (an incomplete image or wheel).
        jinja2.TemplateError, yaml.YAMLError: the template itself is broken (a packaging bug).
    """
    try:
        loaded = environment(templates_dir).get_template(template)
    except jinja2.TemplateNotFound as exc:
        raise TemplatesUnavailableError(
            f"the agent template {template!r} is not installed in {templates_dir}: this installation "
            "of the manager is incomplete (its image or wheel must carry dynamic_scoring/addon/templates); "
            "reinstall it from a release image or rebuild it with `make image`"
        ) from exc
    text = loaded.render(**values)
    objects = []
    for doc in yaml.load_all(text, Loader=_Loader):  # a safe loader, C or Python
        if doc is None:
            continue
        if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
            raise ValueError(f"{template}: every document must be an object with apiVersion and kind")
        objects.append(doc)
    return objects
