"""``OpenAIStreamSource``: a streamed chat completion from any OpenAI-compatible server.

OpenAI, vLLM, Ollama and llama.cpp's server all speak the same protocol: ``POST
{base_url}/chat/completions`` with ``"stream": true`` answers with server-sent events whose
``data:`` lines hold JSON chunks (``choices[0].delta.content``) and end with ``data: [DONE]``.
The HTTP exchange runs on a worker thread (httpx, with httpx-sse parsing the events), so the
source never blocks the graph.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
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


class StreamFailure(Exception):
    """The stream could not be completed; ``retry`` says whether another attempt may help."""

    def __init__(self, message: str, *, retry: bool, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class _Request:
    url: str
    headers: dict[str, str]
    body: dict[str, object]
    timeout_s: float
    connect_timeout_s: float
    retries: int
    backoff_s: float


@final
@kernel("OpenAIStreamSource")
class OpenAIStreamSource(Kernel):
    """Streams one chat completion from an OpenAI-compatible endpoint as an agent.

    Each content delta becomes a text chunk as it arrives; the end of the answer (or the
    failure) becomes an ``end`` packet. Connection errors, timeouts and HTTP 408/429/5xx are
    retried (``retries`` times, exponential backoff, ``Retry-After`` honoured up to 30 s) as long
    as no text has been streamed yet; other HTTP errors end the stream at once. Failures are
    reported in the stream (ERROR, with the server's message) and logged; with
    ``fail_on_error`` they fail the graph instead.

    Ports: no inputs → output 0 (Str chunks).

    Options:
        model: The model name. Required.
        prompt: The user message. Required.
        system: An optional system message.
        base_url: Default ``https://api.openai.com/v1`` (vLLM/llama.cpp: ``http://host:8000/v1``,
            Ollama: ``http://localhost:11434/v1``).
        api_key_env: Environment variable holding the API key (default ``OPENAI_API_KEY``);
            when it is unset no ``Authorization`` header is sent (local servers need none).
        max_tokens, temperature: Passed on when set.
        timeout_s: Longest wait for any read, i.e. between two chunks (default 60).
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
        if not base.startswith(("http://", "https://")):
            raise option_error(cc, "base_url", f"expected an http:// or https:// URL, got {base!r}")
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
        headers = {"Accept": "text/event-stream"}
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
        request = _Request(
            url=f"{base}/chat/completions", headers=headers, body=body, timeout_s=timeout_s,
            connect_timeout_s=connect_s, retries=retries, backoff_s=max(0.0, cc.option_float("retry_backoff_s", 0.5)),
        )
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
            cc.emit(0, end_packet("stopped", ts=self._stamp.next(), stream_id=self._who.stream_id,
                                  agent_type=self._who.agent_type, name=self._who.name, ok=True))
            cc.source_done()
            return
        while True:
            try:
                kind, text, ok = self._queue.get_nowait()
            except queue.Empty:
                cc.source_yield(0.02)
                return
            if kind == "text":
                cc.emit(0, chunk_packet(text, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                        agent_type=self._who.agent_type, name=self._who.name))
                continue
            if not ok:
                cc.log(LogLevel.WARN, text)
                if self._fail:
                    raise RuntimeError(text)
            cc.emit(0, end_packet(text, ts=self._stamp.next(), stream_id=self._who.stream_id,
                                  agent_type=self._who.agent_type, name=self._who.name, ok=ok))
            cc.source_done()
            return

    def close(self, cc: Context) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            # A worker blocked in a read notices the stop within one read timeout; the graph does
            # not wait for that (the thread is a daemon and only ever talks to this kernel's queue).
            thread.join(timeout=0.2)

    # -- the worker thread ----------------------------------------------------------------------

    def _work(self, req: _Request) -> None:
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
                    for text in self._stream(client, req):
                        streamed = True
                        self._queue.put(("text", text, True))
                        if self._stop.is_set():
                            return
                self._queue.put(("end", "done", True))
                return
            except StreamFailure as exc:
                last = exc
            except httpx.TimeoutException as exc:
                last = StreamFailure(f"{_what_timed_out(exc, req)} ({type(exc).__name__})", retry=True)
            except httpx.TransportError as exc:
                if self._stop.is_set():
                    return
                last = StreamFailure(f"connection failed: {exc or type(exc).__name__}", retry=True)
            if streamed or not last.retry or attempt > req.retries:
                break
            delay = req.backoff_s * 2 ** (attempt - 1)
            if last.retry_after_s is not None:
                delay = max(delay, min(last.retry_after_s, _MAX_RETRY_AFTER_S))
            log.info("openai.stream.retry url=%s attempt=%d delay_s=%.2f reason=%s", req.url, attempt, delay, last)
            if self._stop.wait(delay):
                return
        assert last is not None
        tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        where = "after streaming began" if streamed else f"after {tries}"
        self._queue.put(("end", f"POST {req.url}: {last} ({where})", False))

    def _stream(self, client: httpx.Client, req: _Request) -> Iterator[str]:
        with client.stream("POST", req.url, json=req.body, headers=req.headers) as resp:
            if resp.status_code >= 400:
                raw = resp.read()[:_MAX_ERROR_BODY]
                msg = f"HTTP {resp.status_code} {resp.reason_phrase}: {_error_message(raw)}"
                raise StreamFailure(
                    msg,
                    retry=resp.status_code in RETRY_STATUS,
                    retry_after_s=_retry_after(resp.headers.get("retry-after")),
                )
            for event, data in _events(resp):
                if self._stop.is_set():
                    return
                if data.strip() == "[DONE]":
                    return
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    msg = f"the server sent a malformed event ({data[:80]!r})"
                    raise StreamFailure(msg, retry=False) from None
                if event == "error" or (isinstance(chunk, dict) and "error" in chunk):
                    msg = f"the server reported an error: {_error_message(data.encode())}"
                    raise StreamFailure(msg, retry=False)
                text = _delta_text(chunk)
                if text:
                    yield text


def _events(resp: httpx.Response) -> Iterator[tuple[str, str]]:
    """The response's server-sent events as ``(event, data)`` (httpx-sse does the parsing)."""
    from httpx_sse import EventSource, SSEError

    try:
        for sse in EventSource(resp).iter_sse():
            if sse.data:  # a comment-only block (keep-alive ping) carries no event
                yield sse.event or "message", sse.data
    except SSEError as exc:  # not an event stream: a proxy's HTML page, a JSON answer...
        kind = resp.headers.get("content-type", "no content type")
        msg = f"the server did not answer with an event stream ({kind}): {exc}"
        raise StreamFailure(msg, retry=False) from None


def _delta_text(chunk: object) -> str:
    if not isinstance(chunk, dict):
        return ""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    delta = choices[0].get("delta") or choices[0].get("message") or {}
    content = delta.get("content") if isinstance(delta, dict) else None
    if isinstance(content, str):
        return content
    text = choices[0].get("text")  # completions-style servers
    return text if isinstance(text, str) else ""


def _error_message(raw: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body text."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text[:300] or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return text[:300]


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
