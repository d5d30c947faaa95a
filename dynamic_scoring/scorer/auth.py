"""Optional bearer-token checking for the scoring path.

The token comes from a file (a mounted Secret, re-read when it changes, so a rotated Secret takes
effect without a restart) or from an environment variable; never from a command-line argument,
which any local user can read in ``ps``.  It is compared in constant time and never appears in a
log line, an error body or ``repr``.
"""

from __future__ import annotations

import hmac
import os
import threading
from pathlib import Path


class TokenError(ValueError):
    """The configured token cannot be used (missing file, empty, not printable ASCII)."""


def _clean(raw: str, where: str) -> str:
    token = raw.strip()
    if not token:
        raise TokenError(f"the token in {where} is empty")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise TokenError(f"the token in {where} must be printable ASCII without spaces")
    return token


class BearerToken:
    """The token a request's ``Authorization: Bearer ...`` must carry."""

    def __init__(self, *, file: str | os.PathLike[str] | None = None, env: str | None = None) -> None:
        if (file is None) == (env is None):
            raise TokenError("give exactly one of file and env")
        self._file = Path(file) if file is not None else None
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        if env is not None:
            if env not in os.environ:
                raise TokenError(f"environment variable {env} is not set")
            self._token = _clean(os.environ[env], f"${env}")
        else:
            self._token = self._read()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BearerToken:
        """A token read from ``path`` (and re-read when the file changes)."""
        return cls(file=path)

    @classmethod
    def from_env(cls, name: str) -> BearerToken:
        """A token read once from the environment variable ``name``."""
        return cls(env=name)

    def _read(self) -> str:
        assert self._file is not None
        try:
            stat = self._file.stat()
            token = _clean(self._file.read_text(encoding="ascii", errors="replace"), str(self._file))
        except OSError as exc:
            raise TokenError(f"cannot read the token file {self._file}: {exc.strerror}") from None
        self._stamp = (stat.st_mtime_ns, stat.st_size)
        return token

    def _current(self) -> str:
        if self._file is None:
            return self._token
        with self._lock:
            try:
                stat = self._file.stat()
                if (stat.st_mtime_ns, stat.st_size) != self._stamp:
                    self._token = self._read()
            except (OSError, TokenError):
                pass  # keep the last good token: a Secret being rewritten is briefly absent
            return self._token

    def current(self) -> str:
        """The token in effect now: what an in-process check of the app (``check_app``) must send."""
        return self._current()

    def allows(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value carries the token (constant-time comparison)."""
        if not authorization:
            return False
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(presented.strip().encode(), self._current().encode())

    def __repr__(self) -> str:
        where = f"file={self._file}" if self._file is not None else "env"
        return f"BearerToken({where}, token=<redacted>)"


__all__ = ["BearerToken", "TokenError"]
