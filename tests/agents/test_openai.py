"""OpenAIStreamSource against a real HTTP server on 127.0.0.1 (started by the test)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import flowplex
from flowplex.agents import OpenAIStreamSource

from .conftest import run_source, text_of

Behaviour = Callable[[BaseHTTPRequestHandler, int], None]


class Server:
    """A local OpenAI-compatible endpoint whose behaviour each test scripts."""

    def __init__(self) -> None:
        self.behaviour: Behaviour = sse(["Hello"])
        self.requests: list[tuple[str, dict[str, str], dict[str, object]]] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, dict(self.headers), body))
                server.behaviour(self, len(server.requests))

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.thread.join()
        self.httpd.server_close()


def sse(pieces: list[str], *, done: bool = True, stall: threading.Event | None = None) -> Behaviour:
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        h.wfile.write(b": keep-alive comment\n\n")
        for piece in pieces:
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            h.wfile.flush()
        if stall is not None:
            stall.wait(5)  # bounded: the test's release (or 5 s) ends it
            return
        if done:
            h.wfile.write(b"data: [DONE]\n\n")

    return respond


def error(status: int, message: str, *, retry_after: str | None = None) -> Behaviour:
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            h.send_header("Retry-After", retry_after)
        h.end_headers()
        h.wfile.write(body)

    return respond


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def options(server: Server, **extra: object) -> dict[str, object]:
    return {"base_url": server.base_url, "model": "tiny", "prompt": "say hi", "retry_backoff_s": 0.01, **extra}


def test_streams_deltas_as_they_arrive(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-123")
    server.behaviour = sse(["Hel", "lo, ", "wörld", "!"])
    chunks = run_source("OpenAIStreamSource", options(server, api_key_env="TEST_LLM_KEY", system="be brief",
                                                       max_tokens=5, temperature=0.5, name="gpt", stream_id=4))
    assert text_of(chunks) == "Hello, wörld!"
    assert [c.text for _, c in chunks if not c.is_end] == ["Hel", "lo, ", "wörld", "!"]
    end = chunks[-1][1]
    assert end.is_end and end.ok and end.name == "gpt" and end.stream_id == 4
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert body == {"model": "tiny", "stream": True, "max_tokens": 5, "temperature": 0.5,
                    "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]}


def test_no_key_no_authorization_header(server: Server) -> None:
    run_source("OpenAIStreamSource", options(server, api_key_env="FLOWPLEX_TEST_UNSET_KEY"))
    assert "Authorization" not in server.requests[0][1]


def test_http_error_is_reported_with_the_server_message_and_not_retried(server: Server) -> None:
    server.behaviour = error(401, "Incorrect API key provided: sk-****")
    chunks = run_source("OpenAIStreamSource", options(server))
    end = chunks[-1][1]
    assert end.is_end and not end.ok
    assert end.text == (f"POST {server.base_url}/chat/completions: HTTP 401 Unauthorized: "
                        "Incorrect API key provided: sk-**** (after 1 attempt)")
    assert len(server.requests) == 1


def test_overload_is_retried_then_streams(server: Server) -> None:
    ok = sse(["fine"])
    busy = error(503, "overloaded")
    server.behaviour = lambda h, attempt: (busy if attempt < 3 else ok)(h, attempt)
    chunks = run_source("OpenAIStreamSource", options(server, retries=2))
    assert text_of(chunks) == "fine" and chunks[-1][1].ok
    assert len(server.requests) == 3


def test_retries_are_bounded(server: Server) -> None:
    server.behaviour = error(429, "slow down", retry_after="0.05")
    chunks = run_source("OpenAIStreamSource", options(server, retries=2))
    assert len(server.requests) == 3
    assert chunks[-1][1].text.endswith("HTTP 429 Too Many Requests: slow down (after 3 attempts)")


def test_read_timeout_before_any_text_is_retried(server: Server) -> None:
    server.behaviour = sse([], stall=server.release)
    chunks = run_source("OpenAIStreamSource", options(server, timeout_s=0.3, retries=1))
    assert len(server.requests) == 2
    assert chunks[-1][1].text.endswith("no data for 0.3 s (ReadTimeout) (after 2 attempts)")


def test_timeout_after_streaming_began_is_not_retried(server: Server) -> None:
    server.behaviour = sse(["partial answer"], stall=server.release)
    chunks = run_source("OpenAIStreamSource", options(server, timeout_s=0.3, retries=3))
    assert text_of(chunks) == "partial answer"
    assert len(server.requests) == 1
    assert chunks[-1][1].text.endswith("no data for 0.3 s (ReadTimeout) (after streaming began)")
    assert not chunks[-1][1].ok


def test_connection_refused() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    chunks = run_source("OpenAIStreamSource", {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m",
                                               "prompt": "p", "retries": 1, "retry_backoff_s": 0.01})
    end = chunks[-1][1]
    assert not end.ok and "connection failed" in end.text and "(after 2 attempts)" in end.text


def test_error_event_and_malformed_data(server: Server) -> None:
    def bad(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        h.wfile.write(b'data: {"error": {"message": "model crashed"}}\n\n')

    server.behaviour = bad
    chunks = run_source("OpenAIStreamSource", options(server))
    assert chunks[-1][1].text.endswith("the server reported an error: model crashed (after 1 attempt)")


def test_fail_on_error_raises(server: Server) -> None:
    server.behaviour = error(400, "bad model")
    with pytest.raises(flowplex.KernelError, match="HTTP 400 Bad Request: bad model"):
        run_source("OpenAIStreamSource", options(server, fail_on_error=True))


@pytest.mark.parametrize(("opts", "message"), [
    ({"prompt": "p"}, "options.model: missing"),
    ({"model": "m"}, "options.prompt: missing"),
    ({"model": "m", "prompt": "p", "base_url": "ftp://x"}, "options.base_url: expected an http"),
    ({"model": "m", "prompt": "p", "retries": -1}, "options.retries: must be >= 0"),
])
def test_option_errors(opts: dict[str, object], message: str) -> None:
    with pytest.raises(flowplex.KernelError, match=message):
        run_source("OpenAIStreamSource", opts)


def test_events_split_over_lines_comments_and_fields(server: Server) -> None:
    """Server-sent events as servers really send them: a JSON chunk over two ``data:`` lines,
    ids, retries and comments between events, CRLF line ends (parsed by httpx-sse)."""
    def varied(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream; charset=utf-8")
        h.end_headers()
        h.wfile.write(b'id: 1\r\nretry: 10\r\ndata: {"choices": [{"delta":\r\ndata: {"content": "Hel"}}]}\r\n\r\n')
        h.wfile.write(b': ping\n\ndata:{"choices": [{"delta": {"content": "lo"}}]}\n\n')
        h.wfile.write(b"data: [DONE]\n\n")

    server.behaviour = varied
    chunks = run_source("OpenAIStreamSource", options(server))
    assert "".join(c.text for _, c in chunks if not c.is_end) == "Hello"
    assert chunks[-1][1].ok
    assert OpenAIStreamSource.__doc__ is not None


def test_a_page_that_is_not_an_event_stream_is_an_error(server: Server) -> None:
    def html(h: BaseHTTPRequestHandler, attempt: int) -> None:
        body = b"<html><body>Please log in</body></html>"
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    server.behaviour = html
    chunks = run_source("OpenAIStreamSource", options(server))
    end = chunks[-1][1]
    assert end.is_end and not end.ok
    assert "the server did not answer with an event stream (text/html)" in end.text


def test_draining_display_abandons_the_request(server: Server) -> None:
    import io
    import time

    from flowplex.agents import read_chunk
    from flowplex.terminal import LogRenderer, TermCaps, Writer, register_display

    from .conftest import source_graph

    server.behaviour = sse(["slow"], stall=server.release)
    display = LogRenderer(Writer(io.BytesIO()), TermCaps(is_tty=False))
    got: list[str] = []
    g = source_graph("OpenAIStreamSource", options(server, timeout_s=5, display="llm"))
    with register_display("llm", display), display, g:
        g.observe("out", lambda p: got.append(read_chunk(p).text))
        g.start()
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        display.draining.set()
        g.wait_done(timeout=5)
    assert got == ["slow", "stopped"]
