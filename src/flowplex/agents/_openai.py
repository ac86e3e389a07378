"""``OpenAIStreamSource``: a streamed chat completion from any OpenAI-compatible server.

OpenAI, vLLM, Ollama and llama.cpp's server all speak the same protocol: ``POST
{base_url}/chat/completions`` with ``"stream": true`` answers with server-sent events whose
``data:`` lines hold JSON chunks (``choices[0].delta.content``) and end with ``data: [DONE]``.
The HTTP exchange runs on a worker thread (httpx), so the source never blocks the graph.

Nothing the server sends is trusted: the body is read in pieces and decoded here (identity,
gzip or deflate, with a bound on the decoded size, so a 4 MB gzip bomb cannot become 4 GB), an
error body is read only as far as it is shown, the events are parsed by httpx-sse from that
bounded body (a line without end cannot grow for ever), every event must have the shape of a chat chunk, and
an answer counts as complete only when ``[DONE]`` (or a ``finish_reason``) says so.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
import time
import traceback
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from .._log import LogLevel
from ..kernels import Context, Contract, Kernel, kernel
from ..transport import AgentType
from ._common import Identity, Stamper, draining, option_error, read_identity
from ._packets import chunk_packet, end_packet

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

__all__ = ["OpenAIStreamSource", "StreamFailure"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
RETRY_STATUS: Final = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth another attempt (rate limits, overload, gateway trouble)."""
_MAX_RETRY_AFTER_S: Final = 30.0
_MAX_ERROR_BODY: Final = 2000
"""Bytes of an error body read (and shown, cut to ``_MAX_SHOWN`` characters): the rest is never read."""
_MAX_SHOWN: Final = 300
"""The most characters of anything the server (or the network library) says that a message
shows: an error body, an exception's text (h11 quotes a whole 100 KB chunk header)."""
DEFAULT_MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
DEFAULT_MAX_DURATION_S: Final = 600.0
_PIECE: Final = 64 * 1024
"""The most one step of decompression produces: a bomb is stopped at the bound, not after."""
_MAX_PACKETS_PER_CALL: Final = 64
_ACCEPT_ENCODING: Final = "gzip, deflate"
"""Only what :class:`_Body` decodes with a bound (httpx would also offer br/zstd when installed)."""


class StreamFailure(Exception):
    """The stream could not be completed; ``retry`` says whether another attempt may help."""

    def __init__(self, message: str, *, retry: bool, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class _Redactor:
    """Keeps the credentials a URL may carry out of everything shown: messages, packets, logs.

    ``base_url`` may hold a user and password (``http://user:pass@host``: httpx sends them as
    Basic auth) or a key in its query string (``?api_key=...``); neither belongs in a warning or
    an answer packet. ``shown`` is the URL with them replaced by ``***``; :meth:`scrub` does the
    same to any text (an exception from the network library may quote the URL).
    """

    shown: str
    """The URL fit to show."""
    secrets: tuple[tuple[str, str], ...] = ()
    """``(raw, replacement)`` pairs, longest first."""

    def scrub(self, text: str) -> str:
        """``text`` with every secret of the URL replaced."""
        for raw, replacement in self.secrets:
            text = text.replace(raw, replacement)
        return text


_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@")


def redact_url(url: str) -> _Redactor:
    """A :class:`_Redactor` for ``url``: its user and password, every query value and the
    fragment become ``***`` (the names of the query parameters stay, to say what was given).

    Plain string work, so that a URL httpx refuses is redacted too.

    >>> redact_url("http://me:pw@host:8000/v1?api_key=sk-1&api-version=2").shown
    'http://***@host:8000/v1?api_key=***&api-version=***'
    >>> redact_url("https://api.openai.com/v1").shown
    'https://api.openai.com/v1'
    """
    from urllib.parse import quote

    secrets: list[tuple[str, str]] = []
    shown = url
    m = _USERINFO.match(url)
    if m:
        info = m.group(2)
        shown = m.group(1) + "***@" + url[m.end():]
        # as given, and as httpx prints it (percent-encoded)
        secrets += [(f"{info}@", "***@"), (f"{quote(info, safe=':')}@", "***@")]
    rest, hash_mark, fragment = shown.partition("#")
    path, question_mark, query = rest.partition("?")
    if question_mark:
        items = []
        for item in query.split("&"):
            name, equals, value = item.partition("=")
            if equals and value:
                items.append(f"{name}=***")
                secrets.append((item, f"{name}=***"))
            elif item and not equals:  # a bare token (`?sk-123`): replaced where it follows ? or &
                items.append("***")
                secrets += [(f"?{item}", "?***"), (f"&{item}", "&***")]
            else:
                items.append(item)
        path += "?" + "&".join(items)
    if hash_mark:
        path += "#***"
        if fragment:
            secrets.append((f"#{fragment}", "#***"))
    secrets.sort(key=lambda pair: -len(pair[0]))
    return _Redactor(path, tuple(pair for pair in secrets if pair[0]))


def _shown(text: str) -> str:
    """Text from the server or the network library, fit for a one-line message: on one line,
    at most ``_MAX_SHOWN`` characters."""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= _MAX_SHOWN else one_line[: _MAX_SHOWN - 3] + "..."


@dataclass(frozen=True, slots=True)
class _Request:
    url: str
    shown_url: str
    """``url`` with its credentials redacted: the one every message uses."""
    headers: dict[str, str]
    body: dict[str, object]
    timeout_s: float
    connect_timeout_s: float
    retries: int
    backoff_s: float
    max_response_bytes: int


@final
@kernel("OpenAIStreamSource")
class OpenAIStreamSource(Kernel):
    """Streams one chat completion from an OpenAI-compatible endpoint as an agent.

    Each content delta becomes a text chunk as it arrives; the end of the answer (or the
    failure) becomes an ``end`` packet. Connection errors, timeouts and HTTP 408/429/5xx are
    retried (``retries`` times, exponential backoff, ``Retry-After`` honoured up to 30 s) as long
    as no text has been streamed yet; other HTTP errors end the stream at once. A redirect, a
    body that is not an event stream, an event that is not a chat chunk, a body that does not
    decode, and a stream that ends without ``[DONE]`` (the answer is truncated) are errors too:
    the stream always ends, and it ends ``ok`` only with a complete answer. Failures are
    reported in the stream (ERROR, with the server's message cut to one line of at most 300
    characters) and logged; with
    ``fail_on_error`` they fail the graph instead.

    Ports: no inputs → output 0 (Str chunks).

    Options:
        model: The model name. Required.
        prompt: The user message. Required.
        system: An optional system message.
        base_url: Default ``https://api.openai.com/v1`` (vLLM/llama.cpp: ``http://host:8000/v1``,
            Ollama: ``http://localhost:11434/v1``). A user and password in it
            (``http://user:pass@host/v1``) go to the server as Basic auth, a query string
            (``?api_key=...``) goes with the request; both are shown as ``***`` in every
            message, packet and log line.
        api_key_env: Environment variable holding the API key (default ``OPENAI_API_KEY``);
            when it is unset no ``Authorization`` header is sent (local servers need none).
        max_tokens, temperature: Passed on when set.
        timeout_s: Longest wait for any read, i.e. between two chunks (default 60).
        max_duration_s: Longest the whole answer may take, retries included (default 600):
            keep-alive pings or a server that sends a byte a second defeat ``timeout_s``; this
            does not. At the deadline the stream ends with an error at once.
        max_response_bytes: Most bytes of one response, after decompression (default 16 MiB,
            ample for any chat answer): a larger (or endless) body ends the stream with an
            error instead of filling memory.
        connect_timeout_s: Longest wait to connect (default 10).
        retries: Further attempts after a retryable failure (default 2).
        retry_backoff_s: First backoff; doubles per attempt (default 0.5).
        name, stream_id, agent_type: The agent's identity (default agent type ``assistant``).
        fail_on_error: Raise instead of reporting in the stream (default false).
        display: Name of a registered display; when its host sets ``draining``, the request is
            abandoned and the source finishes.

    Lifecycle: ``open`` validates options and starts the HTTP worker thread; ``process`` emits
    what arrived and yields; ``close`` tells the worker to stop (it notices within one read
    timeout) and waits for it at most 0.2 s.
    """

    @staticmethod
    def get_contract(c: Contract) -> None:
        c.output_set_any(0)

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, str, bool]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._who = Identity("", None, AgentType.ASSISTANT)
        self._stamp = Stamper()
        self._fail = False
        self._display = ""
        self._deadline = float("inf")
        self._max_duration_s = DEFAULT_MAX_DURATION_S
        self._url = ""
        """The endpoint as shown (credentials redacted)."""
        self._redactor = _Redactor("")
        self.attempts = 0
        """HTTP attempts made (tests read it)."""

    def open(self, cc: Context) -> None:
        model = cc.option_str("model", "")
        prompt = cc.option_str("prompt", "")
        if not model:
            raise option_error(cc, "model", "missing; name the model to ask (e.g. gpt-4o-mini, llama3)")
        if not prompt:
            raise option_error(cc, "prompt", "missing; give the user message to send")
        base = cc.option_str("base_url", DEFAULT_BASE_URL).rstrip("/")
        redactor = redact_url(base)
        if not base.startswith(("http://", "https://")):
            raise option_error(cc, "base_url", f"expected an http:// or https:// URL, got {redactor.shown!r}")
        import httpx

        try:
            parsed = httpx.URL(base)
            # The endpoint goes after the path, before a query string the base URL may carry.
            url = str(parsed.copy_with(path=parsed.path.rstrip("/") + "/chat/completions"))
        except (httpx.InvalidURL, ValueError) as exc:
            problem = f"{redactor.shown!r} is not a valid URL: {redactor.scrub(_shown(str(exc)))}"
            raise option_error(cc, "base_url", problem) from None
        redactor = redact_url(url)
        messages: list[dict[str, str]] = []
        system = cc.option_str("system", "")
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        body: dict[str, object] = {"model": model, "messages": messages, "stream": True}
        if cc.has_option("max_tokens"):
            body["max_tokens"] = cc.option_int("max_tokens", 0)
        if cc.has_option("temperature"):
            body["temperature"] = cc.option_float("temperature", 1.0)
        headers = {"Accept": "text/event-stream", "Accept-Encoding": _ACCEPT_ENCODING}
        key_env = cc.option_str("api_key_env", "OPENAI_API_KEY")
        key = os.environ.get(key_env, "") if key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        timeout_s = cc.option_float("timeout_s", 60.0)
        connect_s = cc.option_float("connect_timeout_s", 10.0)
        retries = cc.option_int("retries", 2)
        if timeout_s <= 0 or connect_s <= 0:
            raise option_error(cc, "timeout_s", "timeouts must be positive seconds")
        if retries < 0:
            raise option_error(cc, "retries", f"must be >= 0, got {retries}")
        max_duration_s = cc.option_float("max_duration_s", DEFAULT_MAX_DURATION_S)
        if not max_duration_s > 0:
            raise option_error(cc, "max_duration_s", f"must be positive seconds, got {max_duration_s}")
        max_bytes = cc.option_int("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
        if max_bytes < 1024:
            raise option_error(cc, "max_response_bytes", f"must be at least 1024, got {max_bytes}")
        request = _Request(
            url=url, shown_url=redactor.shown, headers=headers, body=body, timeout_s=timeout_s,
            connect_timeout_s=connect_s, retries=retries, backoff_s=max(0.0, cc.option_float("retry_backoff_s", 0.5)),
            max_response_bytes=max_bytes,
        )
        self._url = request.shown_url
        self._redactor = redactor
        self._max_duration_s = max_duration_s
        self._deadline = time.monotonic() + max_duration_s
        self._who = read_identity(cc, cc.node_name, AgentType.ASSISTANT)
        self._fail = cc.option_bool("fail_on_error", False)
        self._display = cc.option_str("display", "")
        self._stamp = Stamper()
        self._stop.clear()
        if not key and base == DEFAULT_BASE_URL:
            log.warning("openai.open.no-key node=%r env=%s: the request will most likely be refused",
                        cc.node_name, key_env)
        self._thread = threading.Thread(target=self._work, args=(request,), name=f"flowplex-openai-{cc.node_name}",
                                        daemon=True)
        self._thread.start()

    def process(self, cc: Context) -> None:
        if draining(self._display):
            self._stop.set()
            self._end(cc, "stopped", ok=True)
            return
        for _ in range(_MAX_PACKETS_PER_CALL):
            try:
                kind, text, ok = self._queue.get_nowait()
            except queue.Empty:
                break
            if kind == "text":
                cc.emit(0, chunk_packet(text, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                        agent_type=self._who.agent_type, name=self._who.name))
                continue
            self._end(cc, text, ok=ok)
            return
        else:
            cc.source_yield(0.0)  # more is queued: the next turn takes it
            return
        # The graph's side of the deadline: a worker stuck in a read does not hold the stream.
        if time.monotonic() >= self._deadline:
            self._stop.set()
            self._end(cc, f"POST {self._url}: no complete answer within max_duration_s={self._max_duration_s:g} s",
                      ok=False)
            return
        thread = self._thread
        if thread is not None and not thread.is_alive() and self._queue.empty():
            self._end(cc, f"POST {self._url}: the request ended without a result (a flowplex bug; please report it)",
                      ok=False)
            return
        cc.source_yield(0.02)

    def _end(self, cc: Context, text: str, *, ok: bool) -> None:
        """The end packet (after logging a failure, or raising it with ``fail_on_error``)."""
        text = self._redactor.scrub(text)  # the messages use the shown URL; this guards the rest
        if not ok:
            cc.log(LogLevel.WARN, text)
            if self._fail:
                raise RuntimeError(text)
        cc.emit(0, end_packet(text, ts=self._stamp.next(), stream_id=self._who.stream_id,
                              agent_type=self._who.agent_type, name=self._who.name, ok=ok))
        self._thread = None
        cc.source_done()

    def close(self, cc: Context) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            # A worker blocked in a read notices the stop within one read timeout; the graph does
            # not wait for that (the thread is a daemon and only ever talks to this kernel's queue).
            thread.join(timeout=0.2)

    # -- the worker thread ----------------------------------------------------------------------

    def _work(self, req: _Request) -> None:
        """The worker thread: whatever happens in it, exactly one end goes into the queue."""
        try:
            self._attempts(req)
        except Exception as exc:  # MemoryError, a bug, anything: the stream must still end
            what = "out of memory" if isinstance(exc, MemoryError) else f"{type(exc).__name__}: {_shown(str(exc))}"
            what = self._redactor.scrub(what)
            # The traceback is wanted (this is a bug), but scrubbed: exception texts may quote the URL.
            trace = self._redactor.scrub("".join(traceback.format_exception(exc)))
            log.warning("openai.worker.failed url=%s error=%s\n%s", req.shown_url, what, trace)
            self._queue.put(("end", f"POST {req.shown_url}: {what}", False))

    def _attempts(self, req: _Request) -> None:
        import httpx

        streamed = False
        last: StreamFailure | None = None
        attempt = 0
        for attempt in range(1, req.retries + 2):
            if self._stop.is_set():
                return
            self.attempts = attempt
            try:
                with httpx.Client(timeout=httpx.Timeout(req.timeout_s, connect=req.connect_timeout_s)) as client:
                    note = "done"
                    for kind, text in self._stream(client, req):
                        if kind == "finish":
                            note = text
                            continue
                        streamed = True
                        self._queue.put(("text", text, True))
                        if self._stop.is_set():
                            return
                self._queue.put(("end", note, True))
                return
            except StreamFailure as exc:
                last = exc
            except httpx.TimeoutException as exc:
                last = StreamFailure(f"{_what_timed_out(exc, req)} ({type(exc).__name__})", retry=True)
            except httpx.DecodingError as exc:
                last = StreamFailure(f"the response does not decode: {_shown(str(exc)) or type(exc).__name__}",
                                     retry=False)
            except httpx.TransportError as exc:
                if self._stop.is_set():
                    return
                last = StreamFailure(f"connection failed: {_shown(str(exc)) or type(exc).__name__}", retry=True)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                last = StreamFailure(f"{type(exc).__name__}: {_shown(str(exc))}", retry=False)
            if streamed or not last.retry or attempt > req.retries:
                break
            delay = req.backoff_s * 2 ** (attempt - 1)
            if last.retry_after_s is not None:
                delay = max(delay, min(last.retry_after_s, _MAX_RETRY_AFTER_S))
            log.info("openai.stream.retry url=%s attempt=%d delay_s=%.2f reason=%s", req.shown_url, attempt, delay,
                     self._redactor.scrub(str(last)))
            if self._stop.wait(delay):
                return
        assert last is not None
        tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        where = "after streaming began" if streamed else f"after {tries}"
        self._queue.put(("end", f"POST {req.shown_url}: {last} ({where})", False))

    def _stream(self, client: httpx.Client, req: _Request) -> Iterator[tuple[str, str]]:
        """``("text", delta)`` for each piece of the answer, then ``("finish", note)`` once the
        answer is complete; a :class:`StreamFailure` for anything else."""
        with client.stream("POST", req.url, json=req.body, headers=req.headers) as resp:
            status = resp.status_code
            if 300 <= status < 400:
                where = resp.headers.get("location", "")
                msg = (f"HTTP {status} {resp.reason_phrase}: the server redirects"
                       + (f" to {where[:200]!r}" if where else "") + "; set base_url to the endpoint itself")
                raise StreamFailure(msg, retry=False)
            if status >= 400:
                raw = _Body(resp, req.max_response_bytes).head(_MAX_ERROR_BODY)
                msg = f"HTTP {status} {resp.reason_phrase}: {_error_message(raw)}"
                raise StreamFailure(msg, retry=status in RETRY_STATUS,
                                    retry_after_s=_retry_after(resp.headers.get("retry-after")))
            body = _Body(resp, req.max_response_bytes)
            kind = resp.headers.get("content-type", "")
            if "text/event-stream" not in kind.partition(";")[0].lower():
                start = " ".join(body.head(400).decode("utf-8", "replace").split())[:120]
                msg = (f"the server did not answer with an event stream ({kind or 'no content type'}): "
                       f"{start or '(empty body)'}; is base_url an OpenAI-compatible /v1 endpoint?")
                raise StreamFailure(msg, retry=False)
            finish = ""
            for event, data in _events(body):
                if self._stop.is_set():
                    return
                if data.strip() == "[DONE]":
                    yield "finish", _finish_note(finish)
                    return
                text, reason = _parse_chunk(event, data)
                finish = reason or finish
                if text:
                    yield "text", text
            if finish:  # no [DONE], but the server said the answer is complete
                yield "finish", _finish_note(finish)
                return
            msg = "the stream ended before [DONE]: the answer is truncated"
            raise StreamFailure(msg, retry=True)


class _Body:
    """A response body read in bounded pieces: decoded here (identity, gzip, deflate) so that
    no step produces more than ``_PIECE`` bytes and the whole never more than ``limit``."""

    def __init__(self, resp: httpx.Response, limit: int) -> None:
        self._resp = resp
        self._limit = limit
        self.size = 0
        """Decoded bytes so far."""
        codings = [c.strip().lower() for c in resp.headers.get("content-encoding", "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            msg = f"the server sent a body in an encoding not asked for ({', '.join(codings)})"
            raise StreamFailure(msg, retry=False)
        self._coding = codings[0] if codings else ""

    def pieces(self) -> Iterator[bytes]:
        """The decoded body, piece by piece.

        Raises:
            StreamFailure: It does not decode, or it is larger than the limit.
        """
        z = None
        raw_deflate = False
        if self._coding:
            z = zlib.decompressobj(zlib.MAX_WBITS | 16 if self._coding != "deflate" else zlib.MAX_WBITS)
        for raw in self._resp.iter_raw():
            if z is None:
                yield self._count(raw)
                continue
            data = raw
            while data and not z.eof:
                try:
                    out = z.decompress(data, _PIECE)
                except zlib.error as exc:
                    if self._coding == "deflate" and self.size == 0 and not raw_deflate:
                        # Some servers send raw deflate, without the zlib header HTTP asks for.
                        z, raw_deflate, data = zlib.decompressobj(-zlib.MAX_WBITS), True, raw
                        continue
                    msg = f"the server's {self._coding} body does not decode: {exc}"
                    raise StreamFailure(msg, retry=False) from None
                data = z.unconsumed_tail
                if out:
                    yield self._count(out)

    def head(self, n: int) -> bytes:
        """At most the first ``n`` decoded bytes (the rest is never read)."""
        got = bytearray()
        try:
            for piece in self.pieces():
                got += piece
                if len(got) >= n:
                    break
        except StreamFailure:
            pass  # what decoded so far is what there is to show
        return bytes(got[:n])

    def _count(self, piece: bytes) -> bytes:
        self.size += len(piece)
        if self.size > self._limit:
            msg = f"the response is larger than max_response_bytes={self._limit}"
            raise StreamFailure(msg, retry=False)
        return piece


def _events(body: _Body) -> Iterator[tuple[str, str]]:
    """Server-sent events as ``(event, data)``, parsed by httpx-sse from the bounded body.

    httpx-sse reads an ``httpx.Response``; it gets one whose stream is the body as decoded
    here (bounded), never httpx's own decoding (unbounded per step). A blank line is added at
    the end, so an event left pending when the body ends is dispatched too (lenient: some
    servers omit the last blank line); a truncated ``[DONE]`` then fails as a malformed event.
    """
    import httpx
    import httpx_sse

    class DecodedStream(httpx.SyncByteStream):
        """The decoded pieces of the body, then a blank line."""

        def __iter__(self) -> Iterator[bytes]:
            yield from body.pieces()
            yield b"\n\n"

    resp = httpx.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"}, stream=DecodedStream())
    for sse in httpx_sse.EventSource(resp).iter_sse():
        if sse.data:  # httpx-sse also reports the blank lines after an `id:` (the standard drops them)
            yield sse.event, sse.data


def _parse_chunk(event: str, data: str) -> tuple[str, str]:
    """``(text, finish_reason)`` of one chat-completion chunk; a :class:`StreamFailure` when the
    event is an error or not shaped like a chunk (``{"choices": [{"delta": {"content": ...}}]}``)."""
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):  # also a 5000-digit number, or [[[[... nested too deep
        msg = f"the server sent a malformed event ({data[:80]!r})"
        raise StreamFailure(msg, retry=False) from None
    if event == "error" or (isinstance(chunk, dict) and "error" in chunk):
        msg = f"the server reported an error: {_error_message(data.encode())}"
        raise StreamFailure(msg, retry=False)
    if not isinstance(chunk, dict) or "choices" not in chunk:
        got = f"an object with keys {sorted(chunk)[:5]}" if isinstance(chunk, dict) else type(chunk).__name__
        msg = f"the server sent an event that is not a chat chunk (expected an object with 'choices', got {got})"
        raise StreamFailure(msg, retry=False)
    if not isinstance(chunk["choices"], list):
        msg = (f"the server sent a chat chunk whose 'choices' is {_json_type(chunk['choices'])}, expected a list "
               f"({data[:80]!r})")
        raise StreamFailure(msg, retry=False)
    choices = chunk["choices"]
    if not choices:
        return "", ""  # a usage-only chunk
    first = choices[0]
    delta = first.get("delta") if isinstance(first, dict) else None
    if delta is None and isinstance(first, dict):
        delta = first.get("message", {})
    content = delta.get("content") if isinstance(delta, dict) else None
    text = first.get("text") if isinstance(first, dict) else None
    if not isinstance(delta, dict) or not isinstance(content, str | None) or not isinstance(text, str | None):
        msg = f"the server sent a chat chunk of an unexpected shape ({data[:80]!r})"
        raise StreamFailure(msg, retry=False)
    reason = first.get("finish_reason")
    return content or text or "", reason if isinstance(reason, str) else ""


def _json_type(value: object) -> str:
    """What ``value`` is, in JSON's words (an object, a string, null...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else type(value).__name__


def _finish_note(reason: str) -> str:
    """The end note of a complete answer: ``done``, or ``done (length)`` when it was cut short
    by ``max_tokens`` (complete as far as the server is concerned)."""
    return "done" if reason in ("", "stop") else f"done ({reason[:40]})"


def _error_message(raw: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body text."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _shown(text) or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return _shown(str(err["message"]))
        if isinstance(err, str):
            return _shown(err)
    return _shown(text)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _what_timed_out(exc: Exception, req: _Request) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {req.connect_timeout_s:g} s"
    return f"no data for {req.timeout_s:g} s"
