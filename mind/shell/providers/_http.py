"""The HTTP half shared by the adapters: one POST, status and content-type checks,
SSE or JSON body, transport errors mapped to failure kinds.

Each adapter supplies a pure :class:`StreamParser` (events in, stream events
out) and a pure body builder; this module does the I/O around them.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import Future
from typing import Any, Protocol

import anyio
import httpx
import msgspec

from mind.conversation import ModelRequest, ReasoningDelta, StreamDone, StreamEvent, TextDelta
from mind.errors import ProviderError
from mind.shell.base_url import endpoint_url, split_userinfo
from mind.shell.providers.failures import (
    MAX_DETAIL_CHARS,
    error_from_http,
    error_from_payload,
    error_from_transport,
    is_error_payload,
    protocol_error,
)
from mind.shell.providers.output_budget import OutputBudget
from mind.shell.providers.server_json import load_json
from mind.shell.providers.sse import SSEDecoder, SSEEvent
from mind.shell.redact import (
    StreamMask,
    redact,
    redact_fields,
    redact_round,
    redact_url,
    url_secrets,
)


class StreamParser(Protocol):
    """Turns one provider response into stream events; pure and single-use."""

    @property
    def done(self) -> bool:
        """True once a terminal event was handled (StreamDone already returned)."""
        ...

    def feed_event(self, event: SSEEvent) -> list[StreamEvent]:
        """Handle one SSE event; the list ends with StreamDone on a terminal event.

        Raises:
            ProviderError: the stream carries an error.
        """
        ...

    def finish(self, *, transport_cut: bool) -> StreamDone:
        """Handle EOF (clean close, or a transport error when ``transport_cut``).

        Raises:
            ProviderError: ``stream_cut`` when the stream ended before its end.
        """
        ...

    def parse_json(self, body: Any) -> list[StreamEvent]:
        """Handle a non-streaming JSON body; the list ends with StreamDone.

        Raises:
            ProviderError: the body is an error or malformed.
        """
        ...


def body_limit(max_output_bytes: int) -> int:
    """The most bytes (or characters) of one SSE event or one JSON body read
    for a round allowed ``max_output_bytes`` of output.

    Larger than the output cap because the output arrives JSON-escaped and
    framed (a ``"`` is two bytes, a non-ASCII character up to six), and
    a final event may repeat the whole answer; still proportional to it, so
    memory stays bounded (docs/design/providers.md §1).
    """
    return 4 * max_output_bytes + 64 * 1024


async def read_bounded(resp: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
    """The response body, at most ``limit`` bytes.

    Args:
        cut: return the first ``limit`` bytes of a longer body instead of
            raising (an error body: its head is enough to classify it).

    Raises:
        ProviderError: ``output_limit`` when the body is longer and not
            ``cut`` (the rest is never read: the caller's context closes it).
    """
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            if cut:
                parts.append(chunk[: len(chunk) - (size - limit)])
                break
            raise ProviderError(
                "output_limit",
                detail=f"the response body is longer than {limit} bytes (max_output_mib)",
            )
        parts.append(chunk)
    return b"".join(parts)


_tls_lock = threading.Lock()
_tls: Future[ssl.SSLContext] | None = None


def _tls_context() -> Future[ssl.SSLContext]:
    """One default TLS context per process, being built in a daemon worker
    thread from the first call on: loading the CA bundle costs ~50 ms, which
    then overlaps the session's start instead of delaying the first request
    (benchmarks/cli_start.py). ``.result()`` waits for it and re-raises what
    building it raised (e.g. an unreadable ``SSL_CERT_FILE``)."""
    global _tls
    with _tls_lock:
        if _tls is None:
            answer: Future[ssl.SSLContext] = Future()

            def build() -> None:
                try:
                    answer.set_result(httpx.create_ssl_context())
                except BaseException as exc:  # handed to whoever waits for it
                    answer.set_exception(exc)

            threading.Thread(target=build, name="mind-tls-context", daemon=True).start()
            _tls = answer
        return _tls


def content_type_of(headers: httpx.Headers) -> str:
    """Return the bare lower-case media type of a response ("" if absent)."""
    value: str = headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


class HttpProvider:
    """Base of the HTTP adapters: one ``stream`` call = one HTTP request.

    Subclasses set ``name`` and implement ``_url``, ``_headers``, ``_body``
    and ``_parser``. No retries here: the runtime retries with
    :mod:`mind.effects.retry`.

    ``timeout_s`` is the stream idle timeout (``stream_idle_timeout``): the
    longest wait for any byte while connecting and waiting for the response
    headers (httpx's timeouts), and then the longest wait for a real SSE
    event in the body. Keep-alives — SSE comments (``: ping``,
    OpenRouter's ``: OPENROUTER PROCESSING``) and ``event: ping`` — do not
    reset it: a few of them while the model thinks are legitimate, but
    ``timeout_s`` of nothing else is a hung server that would otherwise hold
    ``exec`` for ever (docs/design/providers.md §3). Going past it is a transient ``network``
    failure whose detail names the setting (docs/design/providers.md §3: a server that
    accepts and never answers must not hold a turn).

    A base URL's userinfo (``http://user:pass@host``) is never part of the
    request URL: the API key is sent as usual, and only when there is none
    the userinfo goes as Basic auth (docs/design/providers.md §3).

    Attributes:
        name: the provider kind.
        base_url: the server root without userinfo (query kept).
        label: human label, ``"<kind> <model> @ <base_url>"`` with the URL's
            secrets masked (:func:`~mind.shell.redact.redact_url`, then
            :func:`~mind.shell.redact.redact`: the banner shows this).
    """

    name: str = ""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        bare, userinfo = split_userinfo(base_url)
        self.base_url = bare.rstrip("/")
        self._api_key = api_key
        self.secrets: tuple[str, ...] = tuple(s for s in (api_key, *url_secrets(base_url)) if s)
        """What :func:`~mind.shell.redact.redact` masks in this provider's
        errors: the API key and the base URL's userinfo / query secrets."""
        self._basic_auth = httpx.BasicAuth(*userinfo) if userinfo and not api_key else None
        self._timeout_s = timeout_s
        self._client = client
        self._owns_client = client is None
        if client is None:
            _tls_context()  # starts building it: ready by the first request
        shown = redact_url(base_url.rstrip("/"))
        self.label = redact(f"{self.name} {model} @ {shown}", self.secrets)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label}>"

    # ---- to implement ------------------------------------------------------

    def _url(self) -> str:
        raise NotImplementedError

    def _endpoint(self, path: str, *, drop_suffix: str = "") -> str:
        """``path`` on the base URL, query kept (:func:`endpoint_url`)."""
        return endpoint_url(self.base_url, path, drop_suffix=drop_suffix)

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _parser(self, budget: OutputBudget) -> StreamParser:
        raise NotImplementedError

    # ---- shared ------------------------------------------------------------

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self._timeout_s), verify=_tls_context().result()
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send ``request`` and yield its stream events; StreamDone comes last.

        Every :class:`ProviderError` leaving here has its ``detail`` passed
        through :func:`~mind.shell.redact.redact` with :attr:`secrets`: the
        one gate between provider text and stderr, the journal and events
        (``docs/design/secrets.md``), whichever path below made the error.

        Args:
            request: the frozen model request (reused unchanged on retries).

        Yields:
            TextDelta / ReasoningDelta / ToolCallStarted, then one StreamDone.

        Raises:
            ProviderError: ``network`` (no response: connect/read errors,
                timeouts; no byte before the headers, or no real SSE event
                after them, for ``timeout_s`` — keep-alives do not count),
                any kind from the status/body (docs/design/providers.md §3),
                an in-stream error (rules 9, 20, 21), ``stream_cut`` when the
                body ends or breaks before its end (rule 19), ``server`` for a
                malformed JSON body, ``protocol`` for a 200 answer that is
                not the configured API (an HTML page, JSON of another shape,
                another API's event stream; a hint names the likely API),
                ``output_limit`` past ``request.max_output_bytes`` of text,
                reasoning and tool arguments (or a body or event too large
                to hold that much, :func:`body_limit`).
        """
        # A server that echoes the key into the answer must not get it
        # journaled or shown: text, reasoning and arguments are masked.
        text, reasoning = StreamMask(self.secrets), StreamMask(self.secrets)
        try:
            if not self.secrets:
                async for ev in self._stream(request):
                    yield ev
                return
            async for ev in self._stream(request):
                if isinstance(ev, TextDelta):
                    if shown := text.feed(ev.text):
                        yield TextDelta(text=shown)
                elif isinstance(ev, ReasoningDelta):
                    if shown := reasoning.feed(ev.text):
                        yield ReasoningDelta(text=shown)
                elif isinstance(ev, StreamDone):
                    if rest := text.flush():
                        yield TextDelta(text=rest)
                    if rest := reasoning.flush():
                        yield ReasoningDelta(text=rest)
                    yield self._masked(ev)
                else:  # a ToolCallStarted: its id and name too
                    yield redact_fields(ev, self.secrets)
        except ProviderError as exc:
            # The text held back is part of what arrived before the failure.
            if rest := text.flush():
                yield TextDelta(text=rest)
            if rest := reasoning.flush():
                yield ReasoningDelta(text=rest)
            raise ProviderError(
                exc.kind,
                detail=redact(exc.detail, self.secrets),
                status=exc.status,
                retry_after_s=exc.retry_after_s,
                context_window=exc.context_window,
                request_tokens=exc.request_tokens,
            ) from None

    def _masked(self, done: StreamDone) -> StreamDone:
        """``done`` with :attr:`secrets` masked in every string it holds
        (:func:`~mind.shell.redact.redact_round`: known secrets only, the
        answer's own URLs and code stay as the model wrote them)."""
        return redact_round(done, self.secrets)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # msgspec, not httpx's json= (the stdlib encoder): one encoder for every
        # body, several times faster on a long history.
        body = msgspec.json.encode(self._body(request))
        parser = self._parser(OutputBudget(request.max_output_bytes))
        limit = body_limit(request.max_output_bytes)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream, application/json",
            **self._headers(),
        }
        client = self._get_client()
        body_started = False
        try:
            async with client.stream(
                "POST", self._url(), content=body, headers=headers, auth=self._basic_auth
            ) as resp:
                if not 200 <= resp.status_code < 300:
                    raw = await read_bounded(resp, limit, cut=True)
                    raise error_from_http(
                        resp.status_code, raw, resp.headers, api_key=self._api_key, url=self._url()
                    )
                ctype = content_type_of(resp.headers)
                body_started = True
                if ctype in ("", "text/event-stream"):
                    async for ev in self._sse(resp, parser, limit):
                        yield ev
                elif ctype == "application/json" or ctype.endswith("+json"):
                    raw = await read_bounded(resp, limit)
                    try:
                        payload = load_json(raw)
                    except ValueError as exc:
                        raise ProviderError(
                            "server", detail=f"malformed JSON body: {exc}", status=resp.status_code
                        ) from None
                    for ev in parser.parse_json(payload):
                        yield ev
                else:
                    raw = await read_bounded(resp, limit, cut=True)
                    raise self._unexpected_body(ctype, raw)
        except httpx.DecodingError as exc:
            raise ProviderError("server", detail=f"undecodable body: {exc}") from None
        except httpx.TimeoutException:
            raise self._idle_error(body_started) from None
        except httpx.TransportError as exc:
            raise error_from_transport(exc, url=self._url(), body_started=body_started) from None

    def _unexpected_body(self, ctype: str, raw: bytes) -> ProviderError:
        """A 200 body that is neither SSE nor JSON: an error payload sent with
        the wrong content type is classified; anything else (an HTML page, a
        proxy's text) is a deterministic ``protocol`` mismatch, not retried."""
        try:
            payload = load_json(raw)
        except ValueError:
            payload = None
        if is_error_payload(payload):
            return error_event(payload, api_key=self._api_key, url=self._url())
        head = raw[:MAX_DETAIL_CHARS].lstrip()[:15].lower()
        page = ctype in ("text/html", "application/xhtml+xml") or head.startswith(
            (b"<!doctype html", b"<html")
        )
        what = "an HTML page" if page else f"content-type {ctype!r}"
        return protocol_error(self.name, f"{what}, not an event stream")

    def _idle_error(self, body_started: bool) -> ProviderError:
        where = "in the middle of the stream" if body_started else "before answering"
        return ProviderError(
            "network",
            detail=f"the model sent nothing for {self._timeout_s:g} s {where} "
            "(stream_idle_timeout)",
        )

    async def _sse(
        self, resp: httpx.Response, parser: StreamParser, max_event_chars: int
    ) -> AsyncIterator[StreamEvent]:
        decoder = SSEDecoder(max_event_chars=max_event_chars)
        cut = False
        chunks = resp.aiter_bytes()
        # The idle deadline moves only on a real event (class docstring).
        deadline = time.monotonic() + self._timeout_s
        try:
            while True:
                with anyio.move_on_after(max(0.0, deadline - time.monotonic())) as scope:
                    chunk = await anext(chunks, None)
                if scope.cancelled_caught:
                    raise self._idle_error(True)
                if chunk is None:
                    break
                for sse in decoder.feed(chunk):
                    if sse.event != "ping":
                        deadline = time.monotonic() + self._timeout_s
                    for ev in parser.feed_event(sse):
                        yield ev
                    if parser.done:
                        return
        except httpx.ReadTimeout:
            # Idle, not cut: a network failure naming the setting (retried
            # within the turn's bounds), never a "stream ended" finish.
            raise self._idle_error(True) from None
        except (httpx.ReadError, httpx.RemoteProtocolError):
            # The body broke mid-way: whatever was decoded stays; the parser
            # decides whether the stream had already reached a clean end.
            cut = True
        if not cut:
            for sse in decoder.finish():
                for ev in parser.feed_event(sse):
                    yield ev
                if parser.done:
                    return
        yield parser.finish(transport_cut=cut)


def error_event(payload: Any, *, api_key: str | None, url: str | None = None) -> ProviderError:
    """An in-stream error (HTTP status 200) as a ProviderError; ``url`` for hints."""
    return error_from_payload(payload, status=None, api_key=api_key, url=url)
