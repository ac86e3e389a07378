"""OpenAIStreamSource against hostile local HTTP servers: endless or compressed bodies, pings,
drips, redirects, pages and shapes that are not chat chunks. The stream always ends, with one
error line, in bounded memory and time."""

from __future__ import annotations

import base64
import contextlib
import gzip
import itertools
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from hypothesis import given
from hypothesis import strategies as st

import flowplex

from ..agents.conftest import run_source, text_of
from ..agents.test_openai import Server

_CHILD = r"""
import json, resource, sys, time
import flowplex, flowplex.agents
from flowplex.agents import read_chunk
opts = json.loads(sys.argv[1])
spec = {"nodes": [{"name": "src", "kernel": "OpenAIStreamSource", "output_ports": ["out"], "options": opts}],
        "output_ports": ["out"]}
got = []
start = time.monotonic()
with flowplex.Graph.from_yaml(json.dumps(spec)) as g:
    g.observe("out", lambda p: got.append(read_chunk(p)))
    g.start()
    g.wait_done(timeout=60)
print(json.dumps({"ends": [[c.text, c.ok] for c in got if c.is_end],
                  "text_chars": sum(len(c.text) for c in got if not c.is_end),
                  "elapsed": time.monotonic() - start,
                  # VmHWM: this program's peak (ru_maxrss keeps the forking test process's across exec)
                  "maxrss_mb": int(next(line for line in open("/proc/self/status")
                                        if line.startswith("VmHWM:")).split()[1]) / 1024}))
"""
_MEM_LIMIT = 1536 * 1024 * 1024


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def options(server: Server, **extra: object) -> dict[str, object]:
    return {"base_url": server.base_url, "model": "m", "prompt": "p", "retries": 0, **extra}


def run_limited(opts: dict[str, object]) -> dict[str, object]:
    """The source in a subprocess under an address-space limit and a time limit."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_MEM_LIMIT, _MEM_LIMIT))

    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(opts)], capture_output=True, timeout=90,
                          preexec_fn=limit, env=dict(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]  # no signal death, no traceback
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def the_end(result: dict[str, object]) -> str:
    ends = result["ends"]
    assert isinstance(ends, list) and len(ends) == 1, ends
    text, ok = ends[0]
    assert not ok and "\n" not in text and len(text) < 1000, text
    return str(text)


def endless(status: int, content_type: str, head: bytes, filler: bytes) -> object:
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.end_headers()
        h.wfile.write(head)
        block = filler * (65536 // len(filler))
        try:
            for _ in range(3 * 16384):  # 3 GB at most, if the client never stops reading
                h.wfile.write(block)
        except OSError:
            pass  # the client hung up: what we want

    return respond


def test_an_endless_error_body_is_read_only_as_far_as_it_is_shown(server: Server) -> None:
    server.behaviour = endless(500, "text/plain", b"overloaded ", b"y")  # type: ignore[assignment]
    result = run_limited(options(server))
    assert the_end(result).startswith(f"POST {server.base_url}/chat/completions: HTTP 500 Internal Server Error: "
                                      "overloaded yyy")
    assert result["maxrss_mb"] < 200  # type: ignore[operator]


def test_an_endless_line_stops_at_max_response_bytes(server: Server) -> None:
    server.behaviour = endless(200, "text/event-stream", b"data: ", b"x")  # type: ignore[assignment]
    result = run_limited(options(server, max_response_bytes=4 * 1024 * 1024))
    assert "the response is larger than max_response_bytes=4194304" in the_end(result)
    assert result["maxrss_mb"] < 200  # type: ignore[operator]


def test_a_gzip_bomb_stops_at_max_response_bytes(server: Server) -> None:
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    bomb = z.compress(b"data: ") + b"".join(z.compress(b"\0" * (1 << 24)) for _ in range(4)) + z.flush()
    assert len(bomb) < 400 * 1024  # 64 MB decoded: four times the default bound

    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(bomb)))
        h.end_headers()
        with contextlib.suppress(OSError):  # the client hangs up once it has read enough
            h.wfile.write(bomb)

    server.behaviour = respond
    result = run_limited(options(server))
    assert "the response is larger than max_response_bytes=16777216" in the_end(result)
    assert result["maxrss_mb"] < 150  # type: ignore[operator]


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_answer_is_decoded(server: Server, coding: str) -> None:
    chunk = {"choices": [{"delta": {"content": "zipped"}}]}
    plain = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    if coding == "gzip":
        body = gzip.compress(plain)
    else:
        z = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS if coding == "deflate" else -zlib.MAX_WBITS)
        body = z.compress(plain) + z.flush()

    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Encoding", coding.removeprefix("raw-"))
        h.end_headers()
        h.wfile.write(body)

    server.behaviour = respond
    chunks = run_source("OpenAIStreamSource", options(server))
    assert text_of(chunks) == "zipped" and chunks[-1][1].ok
    assert server.requests[0][1]["Accept-Encoding"] == "gzip, deflate"


def test_a_body_that_is_not_gzip_is_an_error(server: Server) -> None:
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Encoding", "gzip")
        h.end_headers()
        h.wfile.write(b"this is not gzip at all" * 10)

    server.behaviour = respond
    chunks = run_source("OpenAIStreamSource", options(server))
    end = chunks[-1][1]
    assert end.is_end and not end.ok
    assert "the server's gzip body does not decode" in end.text


def test_an_invalid_base_url_is_an_option_error() -> None:
    with pytest.raises(flowplex.KernelError, match=r"options\.base_url: 'http://\[::1/v1' is not a valid URL"):
        run_source("OpenAIStreamSource", {"base_url": "http://[::1/v1", "model": "m", "prompt": "p"})


def drip(piece: bytes, every_s: float, release: threading.Event) -> object:
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        try:
            for _ in range(600):
                h.wfile.write(piece)
                h.wfile.flush()
                if release.wait(every_s):
                    return
        except OSError:
            pass

    return respond


@pytest.mark.parametrize(("piece", "every_s"), [(b": ping\n\n", 0.05), (b"d", 0.1)], ids=["pings", "a-byte-a-tick"])
def test_max_duration_ends_a_stream_that_read_timeouts_never_end(server: Server, piece: bytes, every_s: float) -> None:
    server.behaviour = drip(piece, every_s, server.release)  # type: ignore[assignment]
    start = time.monotonic()
    chunks = run_source("OpenAIStreamSource", options(server, timeout_s=5, max_duration_s=0.8))
    elapsed = time.monotonic() - start
    end = chunks[-1][1]
    assert end.is_end and not end.ok
    assert end.text == f"POST {server.base_url}/chat/completions: no complete answer within max_duration_s=0.8 s"
    assert elapsed < 4


def canned(status: int, headers: dict[str, str], body: bytes) -> object:
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return respond


SSE = {"Content-Type": "text/event-stream"}


@pytest.mark.parametrize(("status", "headers", "body", "message"), [
    (302, {"Location": "https://login.example/sso"}, b"", "HTTP 302 Found: the server redirects to "
                                                        "'https://login.example/sso'; set base_url"),
    (200, {"Content-Type": "text/html"}, b"<html><body>Sign in</body></html>",
     "did not answer with an event stream (text/html): <html><body>Sign in</body></html>"),
    (200, SSE, b"<html><body>Sign in</body></html>", "the stream ended before [DONE]: the answer is truncated"),
    (200, SSE, b'data: {"foo": 1}\n\n', "not a chat chunk (expected an object with 'choices', got an object with "
                                        "keys ['foo'])"),
    (200, SSE, b"data: [1, 2]\n\n", "not a chat chunk (expected an object with 'choices', got list)"),
    (200, SSE, b'data: {"choices": [{"delta": {"content": 5}}]}\n\n', "a chat chunk of an unexpected shape"),
    (200, SSE, b'data: {"choices": ["x"]}\n\n', "a chat chunk of an unexpected shape"),
    (200, SSE, b"data: not json\n\n", "malformed event"),
    (204, {}, b"", "did not answer with an event stream (no content type): (empty body)"),
], ids=["redirect", "html", "html-as-sse", "no-choices", "list", "content-int", "choice-str", "not-json",
        "no-content"])
def test_answers_that_are_not_answers_are_errors(server: Server, status: int, headers: dict[str, str], body: bytes,
                                                 message: str) -> None:
    server.behaviour = canned(status, headers, body)  # type: ignore[assignment]
    chunks = run_source("OpenAIStreamSource", options(server))
    end = chunks[-1][1]
    assert end.is_end and not end.ok, end
    assert message in end.text
    assert "\n" not in end.text
    assert len(server.requests) == 1


def test_a_stream_cut_before_done_is_truncated_not_done(server: Server) -> None:
    piece = {"choices": [{"delta": {"content": "half an ans"}}]}
    server.behaviour = canned(200, SSE, f"data: {json.dumps(piece)}\n\n".encode())  # type: ignore[assignment]
    chunks = run_source("OpenAIStreamSource", options(server, retries=2))
    assert text_of(chunks) == "half an ans"
    end = chunks[-1][1]
    assert not end.ok and "truncated" in end.text and end.text.endswith("(after streaming began)")
    assert len(server.requests) == 1  # text was shown: not asked again


def test_a_finish_reason_without_done_is_a_complete_answer(server: Server) -> None:
    pieces = [{"choices": [{"delta": {"content": "all"}, "finish_reason": None}]},
              {"choices": [{"delta": {}, "finish_reason": "length"}]}]
    body = "".join(f"data: {json.dumps(p)}\n\n" for p in pieces).encode()
    server.behaviour = canned(200, SSE, body)  # type: ignore[assignment]
    chunks = run_source("OpenAIStreamSource", options(server))
    assert text_of(chunks) == "all"
    end = chunks[-1][1]
    assert end.ok and end.text == "done (length)"


class _Pieces:
    """A body already decoded, in the pieces a network might cut it into."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    def pieces(self) -> Iterator[bytes]:
        yield from self._pieces


_FIELD = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)


@given(events=st.lists(st.lists(_FIELD, min_size=1, max_size=3), max_size=5),
       ends=st.sampled_from([b"\n", b"\r\n", b"\r"]), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_events_parse_the_same_however_the_body_is_cut(events: list[list[str]], ends: bytes, cuts: list[int]) -> None:
    from flowplex.agents._openai import _events

    body = b"".join(b"".join(b"data: " + line.encode() + ends for line in lines) + b": ping" + ends + ends
                    for lines in events)
    bounds = sorted({0, len(body), *(c for c in cuts if c < len(body))})
    pieces = [body[a:b] for a, b in itertools.pairwise(bounds)]
    got = list(_events(_Pieces(pieces)))  # type: ignore[arg-type]
    # An event whose data is empty carries no chunk: it is not reported (nor is a keep-alive).
    assert got == [("message", "\n".join(lines)) for lines in events if "\n".join(lines)]


def chunked(head: bytes) -> object:
    """A 200 event stream in chunked encoding whose first chunk starts with ``head``."""
    def respond(h: BaseHTTPRequestHandler, attempt: int) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(head)

    return respond


def test_a_100_kb_chunk_header_is_cut_as_error_bodies_are(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    server.behaviour = chunked(b"z" * 100_000 + b"\r\n")  # type: ignore[assignment]
    with caplog.at_level("DEBUG", logger="flowplex"):
        chunks = run_source("OpenAIStreamSource", options(server))
    end = chunks[-1][1]
    assert end.is_end and not end.ok
    assert "connection failed: illegal chunk header: bytearray(b'zzz" in end.text
    assert "\n" not in end.text and len(end.text) < 500, len(end.text)
    assert caplog.records and max(len(r.getMessage()) for r in caplog.records) < 1000


_USER, _PASSWORD, _TOKEN = "alice", "s3cr3t-pw", "tok-5e5e5e"


@pytest.mark.parametrize("fail_on_error", [False, True], ids=["in-stream", "fail-on-error"])
@pytest.mark.parametrize("failure", ["http-500", "chunk-header", "refused"])
def test_credentials_in_base_url_are_never_shown(server: Server, caplog: pytest.LogCaptureFixture,
                                                capfd: pytest.CaptureFixture[str], failure: str,
                                                fail_on_error: bool) -> None:
    base = server.base_url.replace("http://", f"http://{_USER}:{_PASSWORD}@") + f"?api_key={_TOKEN}"
    if failure == "refused":  # a port nobody listens on: httpx's own error text
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        base = f"http://{_USER}:{_PASSWORD}@127.0.0.1:{port}/v1?api_key={_TOKEN}"
    server.behaviour = (canned(500, {}, f"overloaded {base}".encode()) if failure == "http-500"  # type: ignore[assignment]
                        else chunked(b"z" * 5000 + base.encode() + b"\r\n"))
    opts = {**options(server), "base_url": base, "fail_on_error": fail_on_error}
    got: list[str] = []
    with caplog.at_level("DEBUG", logger="flowplex"):
        try:
            got = [c.text for _, c in run_source("OpenAIStreamSource", opts)]
        except flowplex.KernelError as exc:
            assert fail_on_error
            got = [str(exc)]
    shown = [*got, *(r.getMessage() for r in caplog.records), *capfd.readouterr()]
    assert got and any("http://***@127.0.0.1:" in text and "?api_key=***" in text for text in got), got
    for text in shown:
        assert _PASSWORD not in text and _TOKEN not in text and f"{_USER}:" not in text, text
    if failure != "refused":  # the credentials still go to the server: as Basic auth and in the query
        path, headers, _ = server.requests[0]
        assert path == f"/v1/chat/completions?api_key={_TOKEN}"
        assert headers["Authorization"] == "Basic " + base64.b64encode(f"{_USER}:{_PASSWORD}".encode()).decode()


def test_an_invalid_base_url_with_credentials_is_redacted_in_the_option_error() -> None:
    with pytest.raises(flowplex.KernelError) as info:
        run_source("OpenAIStreamSource", {"base_url": f"http://{_USER}:{_PASSWORD}@[::1/v1", "model": "m",
                                          "prompt": "p"})
    assert "options.base_url: 'http://***@[::1/v1' is not a valid URL" in str(info.value)
    assert _PASSWORD not in str(info.value)


@pytest.mark.parametrize(("choices", "what"), [
    ({"delta": {"content": "x"}}, "an object"), (None, "null"), ("x", "a string"), (5, "a number"),
    (True, "a boolean"),
])
def test_choices_of_the_wrong_type_say_so(server: Server, choices: object, what: str) -> None:
    body = f"data: {json.dumps({'choices': choices})}\n\n".encode()
    server.behaviour = canned(200, SSE, body)  # type: ignore[assignment]
    end = run_source("OpenAIStreamSource", options(server))[-1][1]
    assert f"the server sent a chat chunk whose 'choices' is {what}, expected a list" in end.text, end.text
    assert "got an object with keys ['choices']" not in end.text


@pytest.mark.parametrize("data", [b"[" * 100_000, b'{"choices": [], "n": ' + b"9" * 5000 + b"}"],
                         ids=["nested-too-deep", "5000-digit-number"])
def test_json_that_python_refuses_is_a_malformed_event(server: Server, data: bytes) -> None:
    server.behaviour = canned(200, SSE, b"data: " + data + b"\n\n")  # type: ignore[assignment]
    end = run_source("OpenAIStreamSource", options(server))[-1][1]
    assert end.is_end and not end.ok
    assert "the server sent a malformed event" in end.text, end.text
