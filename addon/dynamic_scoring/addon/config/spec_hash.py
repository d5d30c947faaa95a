"""The config spec hash, byte for byte as addon-framework computes it.

OCM compares these hashes between the CMA status, the MCA status and the work annotation to decide
whether a config change has rolled out, so the value must match what a Go addon would write for
the same object, or OCM's `Progressing` condition would never reach `Completed` after a mixed
upgrade.  Go's `encoding/json` sorts map keys, writes no spaces, keeps non-ASCII as UTF-8 and
escapes five characters that Python leaves alone.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Keys Go drops before hashing: everything that is not configuration.
_NON_CONFIG_KEYS = frozenset({"apiVersion", "kind", "metadata", "status"})

# encoding/json's HTML-safe escaping, plus the two JavaScript line terminators.
_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json(value: Any) -> str:
    """`value` encoded as Go's `json.Marshal` encodes a `map[string]interface{}` of the same data.

    Floats are the one divergence (Go writes `1e-07` as `1e-7`); they are refused rather than
    hashed differently, since no config this addon supports contains one.
    """
    _refuse_floats(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).translate(_GO_ESCAPES)


def _refuse_floats(value: Any) -> None:
    if isinstance(value, float):
        raise ValueError(f"cannot reproduce Go's encoding of the float {value!r}")
    if isinstance(value, dict):
        for item in value.values():
            _refuse_floats(item)
    elif isinstance(value, list):
        for item in value:
            _refuse_floats(item)


def spec_hash(obj: dict[str, Any]) -> str:
    """SHA-256 hex digest of the config object without apiVersion, kind, metadata and status.

    `obj` must be the object as the API server returns it (defaults applied), because that is what
    the framework hashes; an ADC read back after creation gains `agentInstallNamespace`.
    """
    config = {k: v for k, v in obj.items() if k not in _NON_CONFIG_KEYS}
    return hashlib.sha256(go_json(config).encode("utf-8")).hexdigest()
