"""The recording file of ``dynamic-scoring record`` and ``replay``: one JSON document, versioned.

A recording keeps Prometheus' own ``query_range`` answer untouched (``response``) beside what is
needed to serve it again: the query text it answers, the window it was asked for, and when and
where it was captured.  One JSON document (not JSON lines) because a file is small, written once,
and read whole by ``replay``; ``version`` lets a later format be told apart instead of misread::

    {
      "format": "dynamic-scoring/recording",
      "version": 1,
      "recordings": [
        {"query": "sum(rate(x[5m]))", "start": 1700000000, "end": 1700003600, "step": 60,
         "capturedAt": "2026-11-22T06:40:00Z", "prometheus": "http://127.0.0.1:9090/api/v1/query_range",
         "response": {"status": "success", "data": {"resultType": "matrix", "result": [...]}}}
      ]
    }

``prometheus`` is stored with any user information and query string removed
(``dynamic_scoring.outbound.urls.redact_url``), so a URL carrying credentials does not end up in a file
people share.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dynamic_scoring.contract.validation import describe_validation

FORMAT: Final = "dynamic-scoring/recording"
VERSION: Final = 1


class RecordingError(ValueError):
    """A recording file cannot be used; the message names the file and the problem."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class Sample(_Model):
    """One series of a matrix: its labels and ``[timestamp, "value"]`` pairs, as Prometheus writes them."""

    metric: dict[str, str] = Field(default_factory=dict)
    values: list[tuple[float, str]] = Field(default_factory=list)


class Recording(_Model):
    """One captured ``query_range`` exchange."""

    query: str = Field(min_length=1)
    start: int
    end: int
    step: int = Field(ge=1)
    captured_at: datetime = Field(alias="capturedAt")
    prometheus: str = ""
    response: dict[str, Any]

    @model_validator(mode="after")
    def _matrix(self) -> Recording:
        data = self.response.get("data")
        if self.response.get("status") != "success" or not isinstance(data, dict):
            raise ValueError("response is not a successful Prometheus answer")
        if data.get("resultType") != "matrix":
            raise ValueError(f"response resultType is {data.get('resultType')!r}, expected 'matrix'")
        if not isinstance(data.get("result"), list):
            raise ValueError("response data.result is not a list")
        return self

    def series(self) -> list[Sample]:
        """The matrix, validated: labels are strings, each value a timestamp and a string."""
        return [Sample.model_validate(s) for s in self.response["data"]["result"]]


class RecordingFile(_Model):
    """The whole document."""

    format: Literal["dynamic-scoring/recording"] = FORMAT
    version: Literal[1] = VERSION
    recordings: list[Recording] = Field(default_factory=list)

    def dumps(self) -> str:
        """The file's text: indented JSON with the wire names."""
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


def load(path: Path) -> RecordingFile:
    """Read and check one recording file.

    Raises:
        RecordingError: unreadable, not JSON, another format or version, or a malformed recording;
            the message names the file and, for a schema problem, the field.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise RecordingError(f'{path}: not a recording (expected "format": "{FORMAT}")')
    if document.get("version") != VERSION:
        raise RecordingError(
            f"{path}: recording version {document.get('version')!r} is not supported "
            f"(this tool reads {VERSION})"
        )
    try:
        loaded = RecordingFile.model_validate(document)
        for recording in loaded.recordings:
            recording.series()
    except ValidationError as exc:
        raise RecordingError(f"{path}: {describe_validation(exc, limit=1)}") from exc
    return loaded


__all__ = ["FORMAT", "VERSION", "Recording", "RecordingError", "RecordingFile", "Sample", "load"]
