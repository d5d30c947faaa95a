"""The one name for a decoded JSON object (a Kubernetes object, a patch, a summary).

Kubernetes objects reach us as plain dicts from the API and leave as plain dicts; typing them as
``JSON`` rather than ``dict[str, Any]`` says what they are.  Every module imports it from here.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JSON: TypeAlias = dict[str, Any]

__all__ = ["JSON"]
