"""URL paths of the objects the agent touches, built from names it did not choose.

Names come from the ConfigMap (Secret names, score names) and from flags; before they become part
of a path every segment is percent-encoded, `/` included, so a name can only ever name one object
in the namespace the path says.  `.` and `..` are encoded as well: urllib3 removes dot segments
from a URL before sending it, which would turn `secrets/..` into the collection above it.
"""

from __future__ import annotations

from urllib.parse import quote


def segment(name: str) -> str:
    """One path segment: percent-encoded, with the dot segments `.` and `..` spelled as `%2E`."""
    quoted = quote(name, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def namespaced(prefix: str, namespace: str, resource: str, name: str = "", subresource: str = "") -> str:
    """`<prefix>/namespaces/<ns>/<resource>[/<name>[/<subresource>]]` with every name encoded."""
    path = f"{prefix}/namespaces/{segment(namespace)}/{resource}"
    if name:
        path += f"/{segment(name)}"
        if subresource:
            path += f"/{subresource}"
    return path
