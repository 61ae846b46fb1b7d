"""JSON over HTTP on httpx's public API: one ``httpx.AsyncClient`` per endpoint, one TLS context
per CA bundle for the process, faults mapped to evalkit errors (README "HTTP").

- 408, 409, 429, 5xx, connection errors and timeouts -> ``TransientError`` (retried by the policy)
- 401, 403, 404 -> ``ProviderRefused`` (no retry can fix them: the run aborts)
- a redirect, a body over ``max_response_mb``, other 4xx, a malformed JSON body -> ``ProviderError``
  (this item fails)

httpx does the wire: connections, URL encoding, the proxy (``proxy:``, else the environment's
HTTPS_PROXY, HTTP_PROXY, ALL_PROXY unless NO_PROXY exempts the endpoint, CIDR ranges included:
chosen per client in ``evalkit.proxies``, as curl chooses it, and named in connection errors). A
direct endpoint's client gets a transport of one-connection lanes (``lanes.py``: httpx's pool
costs more CPU than the request on a fast endpoint); through a proxy, httpx's own pool.
evalkit keeps on top: the whole-call ``timeout_s`` (an asyncio timeout around sending and reading
the body, so a server trickling a byte at a time cannot hold a call), the size bound counted on
the raw bytes and on every decoded Content-Encoding layer as they are read (``decoding``: a gzip
bomb, nested or not, stops at the limit), redirects never followed (no
credential ever goes to another host), Retry-After holding off every call to the endpoint.

Error texts never carry the API key or a proxy's credentials: any secret the client knows is
masked in them, and the key in every string of a decoded answer (an endpoint may echo the key in
``model`` or in the content), so no report, cache entry or stored run can carry it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalkit.config import ProviderConfig
from evalkit.errors import InputError, ProviderError, ProviderRefused
from evalkit.providers.decoding import DECODED, BoundedDecoder, TooLarge, Undecodable
from evalkit.providers.retry import RetryPolicy, TransientError, is_retryable_status, parse_retry_after
from evalkit.proxies import Proxy, environment_proxy
from evalkit.urls import Endpoint, redacted, userinfo_secrets

if TYPE_CHECKING:
    import httpx

REFUSED_STATUS = frozenset({401, 403, 404})
# Shorter keys are placeholders that local servers accept ("EMPTY", "x"), not secrets: masking
# them in answers would rewrite the answers themselves. Error texts mask every key.
MIN_MASKED_IN_ANSWERS = 8
MB = 1024 * 1024
DEFAULT_MAX_RESPONSE_MB = 32


class JsonClient:
    """POSTs JSON to one endpoint through one ``httpx.AsyncClient`` (up to ``max_connections``
    keep-alive connections); ``name`` and ``key_env`` are for messages only. ``trust_env=False``
    is for evalkit's own loopback servers: no proxy, no environment."""

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        max_connections: int = 8,
        key_env: str | None = None,
        secrets: tuple[str, ...] = (),
        hints: Mapping[int, str] | None = None,
        retry: RetryPolicy | None = None,
        proxy: str | None = None,
        ca_bundle: Path | None = None,
        max_response_mb: float = DEFAULT_MAX_RESPONSE_MB,
        trust_env: bool = True,
    ) -> None:
        self.name = name
        self.key_env = key_env
        self._hints = dict(hints or {})
        self._retry = retry or RetryPolicy(max_retries=0)
        check_url(base_url, name)
        if proxy is not None:
            check_url(proxy, f"{name}: proxy", userinfo=True)
        # the one proxy every call of this client goes through (its URL is the endpoint's): the
        # configured one, else the environment's unless NO_PROXY exempts the host (evalkit.proxies)
        self._proxy = Proxy(proxy) if proxy is not None else _environment_proxy(name, base_url) if trust_env else None
        through = self._proxy.url if self._proxy is not None else None
        self._secrets = tuple(s for s in (*secrets, *userinfo_secrets(through)) if s)
        self._answer_secrets = [s for s in secrets if s and len(s) >= MIN_MASKED_IN_ANSWERS]
        self._base_url = base_url
        # a value's surrounding whitespace is not part of it (RFC 9110 5.5): a pasted newline goes
        self._headers = {"Content-Type": "application/json", "Accept-Encoding": ", ".join(DECODED)} | {
            k: v.strip() for k, v in (headers or {}).items()
        }
        self._timeout_s = timeout_s
        self._max_connections = max(1, max_connections)
        self._max_bytes = int(max_response_mb * MB)
        self._max_response_mb = max_response_mb
        self._ca_bundle = ca_bundle
        self._client: httpx.AsyncClient | None = None
        self._urls: dict[str, httpx.URL] = {}
        self._resume_at = 0.0  # time.monotonic() before which no request is sent (Retry-After)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            from evalkit.providers.lanes import LaneTransport

            verify: ssl.SSLContext | Literal[False] = tls_context(self._ca_bundle) if self._https else False
            limits = httpx.Limits(
                max_connections=self._max_connections, max_keepalive_connections=self._max_connections
            )
            proxy = self._proxy.url if self._proxy is not None else None
            self._client = httpx.AsyncClient(
                headers=self._headers,
                # connecting (TCP and TLS) times out inside httpx before the whole call does: a
                # handshake cancelled from outside would leave its socket to the garbage collector
                timeout=httpx.Timeout(self._timeout_s, connect=min(self._timeout_s / 2, 10.0)),
                limits=limits,
                verify=verify,
                proxy=proxy,
                trust_env=False,  # the environment's proxy is chosen above, its CAs in tls_context
                follow_redirects=False,
                # through a proxy httpx's own pool serves; direct, one-connection lanes
                transport=None if proxy else LaneTransport(verify, self._max_connections),
            )
        return self._client

    @property
    def _https(self) -> bool:
        # building a TLS context reads the CA bundle (~19 ms): only an https endpoint (or a proxy
        # or environment that might need one) pays it
        return self._base_url.lower().startswith("https:") or self._proxy is not None

    def _url(self, path: str) -> httpx.URL:
        """The base URL joined with ``path`` ("" is the base URL itself), its query kept."""
        url = self._urls.get(path)
        if url is None:
            import httpx

            base, mark, query = self._base_url.partition("?")
            joined = f"{base.rstrip('/')}/{path.lstrip('/')}" if path else base
            url = self._urls[path] = httpx.URL(joined + mark + query)
        return url

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    async def call(self, path: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        """``post`` under the client's retry policy; the client's limits bound how many are in flight."""
        return await self._retry.run(lambda: self.post(path, payload))

    async def call_raw(self, method: str, content: bytes | None) -> tuple[Any, float]:
        """``send`` to the base URL itself under the client's retry policy: any JSON answer."""
        return await self._retry.run(lambda: self.send(method, "", content))

    async def get_json(self, path: str) -> dict[str, Any]:
        """The JSON object answered to GET ``path`` (a provider's batch status), under the retry policy."""
        decoded, _ = await self._retry.run(lambda: self.send("GET", path, None))
        if not isinstance(decoded, dict):
            raise ProviderError(
                f"{self.name}: expected a JSON object in the response body, got {type(decoded).__name__}"
            )
        return decoded

    async def post_bytes(self, path: str, content: bytes) -> dict[str, Any]:
        """``content`` (JSON already encoded: a batch of many requests) POSTed under the retry policy."""
        decoded, _ = await self._retry.run(lambda: self.send("POST", path, content))
        if not isinstance(decoded, dict):
            raise ProviderError(
                f"{self.name}: expected a JSON object in the response body, got {type(decoded).__name__}"
            )
        return decoded

    def masked(self, decoded: Any) -> Any:
        """A decoded answer with the key masked wherever it sits (as ``send`` masks its answers)."""
        if self._answer_secrets and isinstance(decoded, dict | list | str):
            return mask_strings({"": decoded}, self._answer_secrets)[""]
        return decoded

    async def upload(self, path: str, fields: Mapping[str, str], filename: str, data: bytes) -> dict[str, Any]:
        """``data`` POSTed as the file of a multipart/form-data body with ``fields`` (OpenAI's
        ``/files``); httpx encodes the body, the client sends it under its retry policy."""
        import httpx

        encoded = httpx.Request("POST", self._url(path), data=dict(fields), files={"file": (filename, data)})
        body = encoded.read()
        headers = {"Content-Type": encoded.headers["Content-Type"]}
        decoded, _ = await self._retry.run(lambda: self.send("POST", path, body, headers))
        if not isinstance(decoded, dict):
            raise ProviderError(
                f"{self.name}: expected a JSON object in the response body, got {type(decoded).__name__}"
            )
        return decoded

    async def get_bytes(self, path: str, max_mb: float) -> bytes:
        """The raw body answered to GET ``path`` (a batch's JSONL results), up to ``max_mb``; an
        absolute URL must be on the client's own origin (the key is never sent elsewhere)."""
        own, there = self._url(""), self._url_of(path) if "://" in path else None
        if there is not None and (own.host, own.scheme, own.port) != (there.host, there.scheme, there.port):
            raise ProviderError(f"{self.name}: results at another host ({redacted(path)[:120]}) are not fetched")
        saved, self._max_bytes, self._max_response_mb = (
            (self._max_bytes, self._max_response_mb),
            int(max_mb * MB),
            max_mb,
        )
        try:
            return await self._retry.run(lambda: self._fetch(path))
        finally:
            self._max_bytes, self._max_response_mb = saved

    def _url_of(self, absolute: str) -> httpx.URL:
        import httpx

        return httpx.URL(absolute)

    async def _fetch(self, path: str) -> bytes:
        import httpx

        client = self._http()
        url = self._url_of(path) if "://" in path else self._url(path)
        try:
            async with asyncio.timeout(self._timeout_s * 4):  # a results file is larger than one answer
                status, answered, body = await self._exchange(
                    client, url, None, time.monotonic() + self._timeout_s * 4, method="GET"
                )
        except (httpx.TimeoutException, TimeoutError):
            raise TransientError(f"{self.name}: timed out reading {url.path}") from None
        except (httpx.NetworkError, httpx.ProtocolError, httpx.ProxyError) as exc:
            raise TransientError(
                f"{self.name}: connection error ({type(exc).__name__}: {self.mask(str(exc))})"
            ) from None
        if status >= 400:
            self._raise_status(status, answered, body)
        return body

    async def post(self, path: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        """The decoded JSON object answered to ``payload`` (posted to the base URL joined with
        ``path``; ``""`` is the base URL itself) and the call's latency in ms."""
        decoded, latency_ms = await self.send("POST", path, json.dumps(payload).encode())
        if not isinstance(decoded, dict):
            raise ProviderError(
                f"{self.name}: expected a JSON object in the response body, got {type(decoded).__name__}"
            )
        return decoded, latency_ms

    async def send(
        self, method: str, path: str, content: bytes | None, headers: Mapping[str, str] | None = None
    ) -> tuple[Any, float]:
        """The decoded JSON answered to ``content`` sent with ``method`` (to the base URL joined
        with ``path``) and the call's latency in ms; ``headers`` add to the client's."""
        import httpx

        client = self._http()
        url = self._url(path)
        # the endpoint asked every caller to wait (429 or 503 with Retry-After), maybe again
        while (pause := self._resume_at - time.monotonic()) > 0:
            await asyncio.sleep(pause)
        started = time.perf_counter()
        try:
            # timeout_s bounds the whole call, reading and decoding the body included: httpx's
            # timeouts bound each read, so a server trickling its answer would hold the call
            async with asyncio.timeout(self._timeout_s):
                deadline = time.monotonic() + self._timeout_s
                status, answered, body = await self._exchange(
                    client, url, content, deadline, method=method, headers=headers
                )
        except (httpx.TimeoutException, TimeoutError):
            raise TransientError(f"{self.name}: timed out after {self._timeout_s:g} s") from None
        except (httpx.NetworkError, httpx.ProtocolError, httpx.ProxyError) as exc:
            through = f" through the proxy {self._proxy}" if self._proxy is not None else ""
            raise TransientError(
                f"{self.name}: connection error{through} ({type(exc).__name__}: {self.mask(str(exc))})"
            ) from None
        latency_ms = (time.perf_counter() - started) * 1000.0
        if status >= 400:
            self._raise_status(status, answered, body)
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json can read
            raise ProviderError(f"{self.name}: malformed JSON in the response body (HTTP {status})") from None
        secrets = self._answer_secrets
        if secrets and isinstance(decoded, dict | list | str):  # masked wherever it sits in the answer
            return mask_strings({"": decoded}, secrets)[""], latency_ms
        return decoded, latency_ms

    async def _exchange(
        self,
        client: httpx.AsyncClient,
        url: httpx.URL,
        content: bytes | None,
        deadline: float,
        *,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, Any, bytes]:
        """Status, headers and the decoded body, read in chunks and no further than the limit."""
        async with client.stream(method, url, content=content, headers=headers) as response:
            status = response.status_code
            if 300 <= status < 400:
                location = self.mask(redacted(response.headers.get("location", "")))[:200] or "no Location header"
                raise ProviderError(
                    f"{self.name}: HTTP {status} redirect to {location}; an API endpoint does not redirect "
                    "(redirects are not followed): fix the URL in evalkit.yaml"
                )
            return status, response.headers, await self._read(response, deadline)

    async def _read(self, response: httpx.Response, deadline: float) -> bytes:
        """The body, its Content-Encoding layers decoded in bounded steps (see ``decoding``): the
        raw bytes and every layer count against max_response_mb, and decoding stops at the call's
        deadline even when the bytes arrive faster than the event loop would notice the timeout."""
        try:
            decoder = BoundedDecoder(response.headers.get("content-encoding", ""), self._max_bytes)
            async for chunk in response.aiter_raw():
                decoder.feed(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError
        except TooLarge:
            raise ProviderError(
                f"{self.name}: the response is larger than max_response_mb ({self._max_response_mb:g} MB), "
                "read no further; raise max_response_mb in evalkit.yaml if it is expected"
            ) from None
        except Undecodable as exc:
            raise ProviderError(
                f"{self.name}: malformed JSON in the response body (HTTP {response.status_code}): "
                f"cannot decode it ({exc})"
            ) from None
        return decoder.body()

    def _raise_status(self, status: int, headers: Any, body: bytes) -> None:
        detail = self.mask(_error_detail(body))
        text = f"{self.name}: HTTP {status}{': ' + detail if detail else ''}"
        if is_retryable_status(status):
            retry_after = parse_retry_after(headers.get("retry-after"))
            if retry_after and status in (429, 503):  # the endpoint's limit, not this call's: every call waits
                self._resume_at = max(self._resume_at, time.monotonic() + retry_after)
            raise TransientError(text, retry_after)
        if status in REFUSED_STATUS:
            if status in self._hints:
                hint = self._hints[status]
            elif status == 404:
                hint = "check the model alias and base_url"
            elif self.key_env:
                hint = f"check the API key in ${self.key_env}"
            else:
                hint = "the endpoint needs credentials: set api_key_env for this instance"
            raise ProviderRefused(f"{text}; {hint}")
        raise ProviderError(text)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def check_url(url: str, what: str, *, userinfo: bool = False) -> None:
    """An endpoint URL evalkit can call, or an InputError naming it (never its password).
    ``userinfo``: a user:password@ is allowed (a proxy's credentials)."""
    try:
        Endpoint.parse(url, userinfo=userinfo)
    except ValueError as exc:
        raise InputError(f"{what} {redacted(url)!r} is not a usable URL ({exc}); fix it in evalkit.yaml") from None


async def get_status(url: str, timeout_s: float = 5.0) -> int | None:
    """The HTTP status answered to GET ``url`` (evalkit's own loopback server: no proxy); None
    when nothing answers."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False, verify=False) as client:
        try:
            response = await client.get(url)
        except (httpx.TimeoutException, httpx.NetworkError, httpx.ProtocolError):
            return None
    return int(response.status_code)


def provider_client(
    config: ProviderConfig,
    base_url: str,
    headers: Mapping[str, str],
    key: str | None,
    secrets: tuple[str, ...] = (),
) -> JsonClient:
    """The JSON client of one provider instance: its limits, timeouts, retries, proxy and secrets
    (the key, and ``secrets``: values of the environment its headers hold). The local adapter's
    server is evalkit's own on loopback: never through a proxy."""
    return JsonClient(
        f"provider '{config.id}'",
        base_url,
        headers={**headers, **config.headers},
        timeout_s=config.timeout_s,
        max_connections=config.max_concurrency,
        key_env=config.api_key_env,
        secrets=((key,) if key else ()) + secrets,
        retry=RetryPolicy(max_retries=config.max_retries, backoff_s=config.retry_backoff_s),
        proxy=config.proxy,
        ca_bundle=config.ca_bundle,
        max_response_mb=config.max_response_mb,
        trust_env=config.adapter != "local",
    )


def tls_context(ca_bundle: Path | None = None) -> ssl.SSLContext:
    """The verifying TLS context for ``ca_bundle`` (else SSL_CERT_FILE / SSL_CERT_DIR when set,
    else certifi's bundle), built once per process: building one reads the bundle (~19 ms).
    httpx reads SSL_CERT_FILE only when it builds the context itself, so it is read here."""
    if ca_bundle is not None:
        return _context(str(ca_bundle), None)
    cert_file = os.environ.get("SSL_CERT_FILE") or None
    cert_dir = os.environ.get("SSL_CERT_DIR") or None
    if cert_file and not os.path.isfile(cert_file):
        cert_file = None
    if cert_dir and not os.path.isdir(cert_dir):
        cert_dir = None
    if cert_file or cert_dir:
        return _context(cert_file, cert_dir)
    import certifi

    return _context(certifi.where(), None)


@functools.cache
def _context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as exc:
        raise InputError(
            f"cannot read the CA bundle {cafile or capath} ({exc}); check ca_bundle / SSL_CERT_FILE"
        ) from None


def _environment_proxy(name: str, base_url: str) -> Proxy | None:
    try:
        return environment_proxy(base_url)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def check_proxy(config: ProviderConfig, base_url: str) -> None:
    """InputError now, before any call, when the environment's proxy for the instance's endpoint
    is one httpx cannot use (a provider's own ``proxy:`` is checked with the config)."""
    if config.proxy is None and config.adapter != "local":
        _environment_proxy(f"provider '{config.id}'", base_url)


def _error_detail(body: bytes) -> str:
    """The error message an API put in its body, clipped; '' when there is none."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return body.decode("utf-8", "replace").strip()[:200]
    return body_error(decoded) if isinstance(decoded, dict) else ""


def mask_strings(body: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """``body`` (freshly decoded JSON, changed in place) with every secret in its strings, keys
    included, replaced by ***. Iterative: a body nested as deep as json reads stays readable."""

    def masked(text: str) -> str:
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    stack: list[dict[str, Any] | list[Any]] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(masked(k) != k for k in node):
                entries = [(masked(k), v) for k, v in node.items()]
                node.clear()
                node.update(entries)
            pairs: list[tuple[Any, Any]] = list(node.items())
        else:
            pairs = list(enumerate(node))
        for where, value in pairs:
            if isinstance(value, str):
                node[where] = masked(value)
            elif isinstance(value, dict | list):
                stack.append(value)
    return body


def body_error(body: Mapping[str, Any]) -> str:
    """The error message in a decoded JSON body, clipped; '' when there is none. OpenAI and
    Anthropic: {"error": {"message": ...}}; others {"error": ...}, {"message": ...}, or FastAPI's
    {"detail": ...} (a string, or a list of {"msg": ...}). Some gateways send it with a 200."""
    error = body.get("error", body.get("message", body.get("detail")))
    if isinstance(error, dict):
        error = error.get("message")
    elif isinstance(error, list):
        error = "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in error)
    return error[:200] if isinstance(error, str) else ""
