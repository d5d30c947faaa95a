"""kube-rbac-proxy on loopback in front of an upstream HTTP server, for tests of bearer-token access.

Why: on OpenShift the agent reads Prometheus through the Thanos querier, which sits behind
kube-rbac-proxy: the agent presents its own ServiceAccount token, the proxy authenticates it with a
TokenReview and authorizes it with a SubjectAccessReview against the kube-apiserver, and only then
forwards the request.  This module starts the real proxy (component ``kube-rbac-proxy`` of
``e2e/build-tools.sh``, v0.19.1) as a process on 127.0.0.1 in front of a real Prometheus, so a test
can check the agent's token handling against it instead of against a mock.

What the proxy does here:

* It serves HTTPS on ``127.0.0.1:<free port>`` with a certificate for ``127.0.0.1`` and ``localhost``
  signed by a CA of its own (``RbacProxy.ca_pem``, also written to ``RbacProxy.ca_path``).
* ``--kubeconfig`` names the apiserver it asks; that identity must be allowed to create
  ``tokenreviews`` and ``subjectaccessreviews`` (a cluster's admin kubeconfig is).
* ``--auth-token-audiences`` (only when ``audiences`` are given): the TokenReview asks for those
  audiences, so a token requested for another audience is refused (401).  Without it the
  apiserver's own audiences apply (a TokenRequest without ``audiences`` gets those).
* ``--config-file``: ``{"authorization": {"resourceAttributes": {...}}}``.  With resourceAttributes
  every request is a resource request with those attributes; without them it would be a
  non-resource request for the URL path.  The keys are ``namespace``, ``apiGroup``, ``apiVersion``,
  ``resource``, ``subresource`` and ``name``.  **There is no verb key**: the verb is the HTTP method's
  (GET ``get``, POST ``create``, PUT ``update``, PATCH ``patch``, DELETE ``delete``, else ``*``), and the
  config parser ignores unknown keys, so ``authorization_config`` refuses ``verb`` rather than let a
  test believe it set one.  A client that POSTs ``/api/v1/query`` needs ``create`` on the resource.
* No ``--allow-paths``/``--ignore-paths``: every path is proxied, and every path is checked.

What a client gets back (``http.Error`` in ``pkg/filters/auth.go``; ``text/plain; charset=utf-8``,
the body ends with a newline; observed against kube-apiserver v1.34.10):

* no ``Authorization`` header, a malformed or unknown token, or a token for another audience:
  **401** ``Unauthorized``;
* a valid token whose identity lacks the permission: **403**
  ``Forbidden (user=system:serviceaccount:<ns>:<sa>, verb=get, resource=namespaces, subresource=)``;
* a SubjectAccessReview that fails (apiserver unreachable): **500**
  ``Authorization error (user=..., verb=..., resource=..., subresource=)``.

Decisions are cached inside the proxy (fixed in v0.19.1, no flags): TokenReviews for 2 minutes,
allowed SubjectAccessReviews for 5 minutes and **denied ones for 30 seconds**.  A test that grants
RBAC after a 403 must poll for up to 30 s (or use another identity) before it sees 200, and a
revoked permission keeps working for up to 5 minutes.
"""

from __future__ import annotations

import functools
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from e2e.pki import CertificateAuthority
from e2e.procs import Proc, StartupError, free_port, tail, wait_until
from e2e.tools import component_dirs

COMPONENT = "kube-rbac-proxy"
RESOURCE_ATTRIBUTE_KEYS = ("namespace", "apiGroup", "apiVersion", "resource", "subresource", "name")
"""The fields of kube-rbac-proxy's ``authz.ResourceAttributes`` (v0.19.1); there is no verb."""


def proxy_binary() -> Path:
    """The kube-rbac-proxy binary from the tools cache, built first if missing (~3 min cold)."""
    return component_dirs(COMPONENT)[COMPONENT] / "bin" / COMPONENT


def authorization_config(resource_attributes: Mapping[str, str]) -> dict[str, object]:
    """The ``--config-file`` document that authorizes every request with these resource attributes.

    Raises:
        ValueError: a key kube-rbac-proxy does not know (it would ignore it silently), in
            particular ``verb``, which the proxy takes from the HTTP method.
    """
    unknown = sorted(set(resource_attributes) - set(RESOURCE_ATTRIBUTE_KEYS))
    if unknown:
        why = (
            "; the verb is the HTTP method's (GET: get, POST: create), not configurable"
            if "verb" in unknown
            else ""
        )
        raise ValueError(
            f"kube-rbac-proxy's resourceAttributes have no {', '.join(unknown)} "
            f"(known: {', '.join(RESOURCE_ATTRIBUTE_KEYS)}){why}"
        )
    return {"authorization": {"resourceAttributes": dict(resource_attributes)}}


def proxy_argv(
    binary: Path,
    *,
    port: int,
    upstream: str,
    kubeconfig: Path,
    config_file: Path,
    cert_file: Path,
    key_file: Path,
    audiences: Sequence[str] = (),
) -> list[str]:
    """The command line of one kube-rbac-proxy listening on ``127.0.0.1:port``."""
    scheme = urllib.parse.urlsplit(upstream).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"upstream must be an http:// or https:// URL, not {upstream!r}")
    argv = [
        str(binary),
        f"--secure-listen-address=127.0.0.1:{port}",
        f"--upstream={upstream}",
        f"--kubeconfig={kubeconfig}",
        f"--config-file={config_file}",
        f"--tls-cert-file={cert_file}",
        f"--tls-private-key-file={key_file}",
        "--v=2",  # logs each refusal with the apiserver's reason
    ]
    if audiences:
        argv.append(f"--auth-token-audiences={','.join(audiences)}")
    return argv


@dataclass
class RbacProxy:
    """A running kube-rbac-proxy on loopback; ``stop()`` (or leaving a ``with`` block) ends it."""

    url: str
    """``https://127.0.0.1:<port>``, without a trailing slash: the address clients call."""
    ca_pem: bytes
    """The CA that signed the proxy's serving certificate, for the client to trust."""
    ca_path: Path
    """The same CA as a file."""
    proc: Proc
    """The process (its log is ``proc.log_path``)."""

    @property
    def log_path(self) -> Path:
        """The proxy's log file (stdout and stderr)."""
        return self.proc.log_path

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting the proxy's CA (and verifying 127.0.0.1 against its IP SAN)."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def stop(self) -> None:
        """Terminate the process (SIGTERM, SIGKILL after 10 s) and wait for it."""
        self.proc.stop()

    def __enter__(self) -> RbacProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _answers_unauthorized(url: str, context: ssl.SSLContext) -> bool:
    """True once the proxy serves: a request without a token gets its 401 (no apiserver call)."""
    try:
        with urllib.request.urlopen(f"{url}/", context=context, timeout=2):
            return False  # cannot happen: every path needs a token
    except urllib.error.HTTPError as err:
        return err.code == 401


def start_rbac_proxy(
    *,
    upstream: str,
    kubeconfig: Path,
    workdir: Path,
    resource_attributes: Mapping[str, str],
    audiences: Sequence[str] = (),
    binary: Path | None = None,
    timeout: float = 30.0,
) -> RbacProxy:
    """Start kube-rbac-proxy on 127.0.0.1 in front of ``upstream`` and wait until it serves HTTPS.

    Args:
        upstream: the URL requests go to once allowed, e.g. a Prometheus' ``http://127.0.0.1:PORT``.
        kubeconfig: the apiserver to send TokenReviews and SubjectAccessReviews to, and the identity
            to send them as (it needs ``create`` on both).
        workdir: a directory of its own (created): config, PKI (``pki/``) and ``kube-rbac-proxy.log``.
        resource_attributes: what every request is authorized as, e.g. ``{"apiVersion": "v1",
            "resource": "namespaces"}`` (the verb comes from the HTTP method; see the module doc).
        audiences: token audiences to require (``--auth-token-audiences``); none by default.
        binary: the kube-rbac-proxy executable; the tools cache's by default (built when missing).
        timeout: seconds to wait for it to serve.

    Raises:
        StartupError: it exited or did not serve within ``timeout``; the message quotes its log.
        ValueError: an unknown resource attribute (see ``authorization_config``) or a bad upstream.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "kube-rbac-proxy.yaml"
    config.write_text(json.dumps(authorization_config(resource_attributes), indent=2))  # JSON is YAML
    ca = CertificateAuthority(workdir / "pki", "kube-rbac-proxy-ca")
    serving = ca.issue("serving", common_name="kube-rbac-proxy", server_hosts=("127.0.0.1", "localhost"))
    exe = binary or proxy_binary()
    log = workdir / "kube-rbac-proxy.log"
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    for attempt in range(3):  # a free port can be taken between choosing and binding
        port = free_port()
        argv = proxy_argv(
            exe,
            port=port,
            upstream=upstream,
            kubeconfig=kubeconfig,
            config_file=config,
            cert_file=serving.cert_path,
            key_file=serving.key_path,
            audiences=audiences,
        )
        proc = Proc(COMPONENT, argv, log, cwd=workdir).start()
        url = f"https://127.0.0.1:{port}"
        try:
            wait_until(
                functools.partial(_answers_unauthorized, url, context),
                timeout=timeout,
                what=f"kube-rbac-proxy to serve {url}",
                proc=proc,
            )
        except StartupError:
            proc.stop()
            if attempt == 2 or "address already in use" not in tail(log):
                raise
            continue
        return RbacProxy(url=url, ca_pem=ca.cert_pem, ca_path=ca.cert_path, proc=proc)
    raise AssertionError("unreachable")  # the loop returns or raises


__all__ = [
    "RESOURCE_ATTRIBUTE_KEYS",
    "RbacProxy",
    "authorization_config",
    "proxy_argv",
    "proxy_binary",
    "start_rbac_proxy",
]
