"""REST fuzzing of the publisher API and the subscriber's health endpoint, over real HTTP servers
(uvicorn on 127.0.0.1, so that a request that hangs times out instead of hanging the test).

* Publisher: schemathesis generates valid and invalid requests for every operation of its
  OpenAPI document, sent with the API token, without it, and with a wrong one. Every answer
  comes within the timeout and is no 5xx; with the token, answers conform to the document
  (status code documented, body matching its schema); without a valid token, an operation
  that declares a security requirement answers 401 (whatever the body: auth before body).
* Subscriber endpoint: schemathesis over the document FastAPI builds for it (it serves none),
  and for both servers Hypothesis-generated raw HTTP requests (odd methods, targets, versions,
  headers, bodies, chunked encodings): every answer within the timeout, none a 5xx, and the
  server still answers afterwards.

Generation is derandomized: every run sends the same requests.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from prometheus_client import CollectorRegistry, generate_latest
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from blobstore.local import LocalBlobStore
from journal.api import Journal
from journal.settings import JournalSettings, TopicSettings
from journal.sqlite.journal import SqliteJournal
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.client import PublisherClient
from runtime.http_server import AppServer
from subscriber.http import Health, HealthServer
from subscriber.http import create_app as create_health_app
from tests.publisher.conftest import AUTH, TOKEN, publisher_settings
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

# Examples per operation, generation mode and token variant: enough for Hypothesis to reach
# empty, huge, unicode and wrong-typed values of every parameter; the module stays within about
# two minutes on a loaded 2-core machine.
EXAMPLES = 50
# Distribute bodies built to break the content rules.
BODY_EXAMPLES = 200
# Raw HTTP requests per server.
RAW_EXAMPLES = 300
# Every answer within this bound, or the request counts as hung.
REQUEST_TIMEOUT_S = 10.0
# A generated bearer token: never the real one.
WRONG_TOKENS = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=0, max_size=80
)

TokenVariant = str  # "token", "none" or "wrong"
# A simulated subscriber whose queues the operations on a named queue get to work on; alive
# for the whole module (the default discovery TTL is 30 s).
SIM_INSTANCE, SIM_AGENT = "fuzz-instance", "fuzz-subscriber"
SIM_QUEUE = f"{SIM_INSTANCE}-{SIM_AGENT}"
SUBSCRIBER_TTL_S = 3600.0


@dataclass
class Server:
    url: str
    schema: Any  # schemathesis' OpenApiSchema


@pytest.fixture(scope="module")
def publisher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A started publisher agent on the embedded journal, with content to export, served by
    uvicorn."""
    tmp = tmp_path_factory.mktemp("rest-fuzz")
    content = tmp / "content"
    (content / "site" / "page").mkdir(parents=True)
    (content / "site" / "page" / "index.html").write_text("<h1>fuzz</h1>")
    (content / "site" / "logo.bin").write_bytes(bytes(range(256)))
    js = JournalSettings(backend="sqlite", sqlite_path=tmp / "journal.db")
    journal = SqliteJournal(js.sqlite_path)
    settings = publisher_settings(content_root=content, discovery_ttl_s=SUBSCRIBER_TTL_S)
    agent = PublisherAgent(settings, js, journal, LocalBlobStore(tmp / "blobs")).start()
    server = AppServer(create_app(agent), name="fuzzed publisher API")
    server.start()
    try:
        _subscriber_with_queues(server.url, journal, js.topics)
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        yield Server(server.url, schema)
    finally:
        server.stop()
        agent.stop()
        journal.close()


# What _subscriber_with_queues distributes, in order.
PAGES = ("/site/page", "/site")


def _subscriber_with_queues(url: str, journal: Journal, topics: TopicSettings) -> None:
    """A simulated editable subscriber behind by two packages, one of them in its error queue:
    the operations on a queue then reach real queue code when given its name."""
    with PublisherClient(url, TOKEN, timeout_s=30) as api:
        offsets = [api.distribute({"action": "ADD", "deepPaths": [p]})["offset"] for p in PAGES]
    subscriber = SimulatedSubscriber(journal, topics, SIM_INSTANCE, SIM_AGENT, max_retries=2)
    subscriber.announce(offsets[0] - 1)
    subscriber.failed(offsets[0])

    def listed() -> bool:
        queues = httpx.get(f"{url}/queues", timeout=10).json()
        return any(q["name"] == SIM_QUEUE and q["size"] == 2 for q in queues)

    wait_for(listed, 30, "the simulated subscriber's queue")


def _health() -> Health:
    return Health(agent="fuzz", instance_id="fuzz-instance", processed_offset=41, state="IDLE")


def _ready() -> tuple[bool, str]:
    # Ready: not ready is a 503 by design, which the 5xx check cannot tell from a failure.
    return True, "idle for 10 s"


def _metrics() -> bytes:
    return generate_latest(CollectorRegistry())


@pytest.fixture(scope="module")
def subscriber_endpoint() -> Iterator[Server]:
    """The subscriber daemon's health endpoint (the HTTP layer under test; its three sources
    are stand-ins, so no Spark is needed)."""
    server = HealthServer(_health, _ready, _metrics)
    server.start()
    try:
        document = create_health_app(_health, _ready, _metrics).openapi()
        yield Server(server.url, schemathesis.openapi.from_dict(document))
    finally:
        server.stop()


def _operations(schema: Any) -> list[Any]:
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the document has an invalid operation: {result}"
        operations.append(result.ok())
    return operations


def _secured(operation: Any) -> bool:
    return bool(operation.definition.raw.get("security"))


def _fuzz_operation(
    server: Server,
    operation: Any,
    mode: GenerationMode,
    variant: TokenVariant,
    path_parameters: dict[str, Any] | None = None,
) -> str | None:
    """Fuzz one operation (with ``path_parameters`` fixed, if given); the failure, or None."""
    cases = operation.as_strategy(mode, path_parameters=path_parameters)

    @given(case=cases, token=WRONG_TOKENS)
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any, token: str) -> None:
        headers = dict(case.headers or {})
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        if variant == "token":
            headers.update(AUTH)
        elif variant == "wrong":
            headers["Authorization"] = f"Bearer {token}"
        case.headers = headers
        note(f"{variant}: {case.method} {case.formatted_path} headers={headers}")
        try:
            response = case.call(base_url=server.url, timeout=REQUEST_TIMEOUT_S)
        except requests.exceptions.Timeout as exc:
            raise AssertionError(f"no answer within {REQUEST_TIMEOUT_S} s: {exc}") from None
        checks: list[Any] = [not_a_server_error]
        if variant == "token" and mode is GenerationMode.POSITIVE:
            checks += [status_code_conformance, response_schema_conformance]
        case.validate_response(response, checks=checks)
        if variant != "token" and _secured(operation):
            assert response.status_code == 401, (
                f"{variant} token: {response.status_code} {response.text[:300]}"
            )

    try:
        run()
    except Unsatisfiable:
        # An operation without parameters or body has no invalid request to generate.
        return None if mode is GenerationMode.NEGATIVE else "unsatisfiable in positive mode"
    except (Exception, FailureGroup) as exc:  # FailureGroup: a BaseExceptionGroup
        return f"{type(exc).__name__}: {str(exc)[:3000]}"
    return None


def _fuzz_all(server: Server, variants: list[TokenVariant]) -> tuple[int, list[str]]:
    operations = _operations(server.schema)
    failures = []
    for variant in variants:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for operation in operations:
                fixed: list[dict[str, Any] | None] = [None]
                if "{name}" in operation.path:  # also on a queue that exists
                    fixed.append({"name": SIM_QUEUE})
                for path_parameters in fixed:
                    failure = _fuzz_operation(server, operation, mode, variant, path_parameters)
                    if failure is not None:
                        failures.append(
                            f"{operation.label} {path_parameters or ''} [{mode.value}, "
                            f"{variant}]: {failure}"
                        )
    return len(operations), failures


@pytest.mark.parametrize("variants", [["token"], ["none", "wrong"]], ids=["token", "no-token"])
def test_every_publisher_operation_answers_in_time_without_a_server_error(
    publisher: Server, variants: list[TokenVariant]
) -> None:
    count, failures = _fuzz_all(publisher, variants)
    assert count >= 10, f"the publisher documents only {count} operations"
    assert not failures, "\n\n".join(failures)


def test_every_secured_publisher_operation_is_documented_as_such(publisher: Server) -> None:
    """The 401 checks above only cover operations that declare their security requirement:
    every operation that changes something must declare it."""
    undeclared = [
        op.label
        for op in _operations(publisher.schema)
        if op.method.upper() != "GET" and not _secured(op)
    ]
    assert not undeclared, f"operations changing state without a declared token: {undeclared}"


def test_every_subscriber_endpoint_answers_in_time_without_a_server_error(
    subscriber_endpoint: Server,
) -> None:
    count, failures = _fuzz_all(subscriber_endpoint, ["none"])
    assert count == 3, f"the health endpoint serves {count} operations, expected 3"
    assert not failures, "\n\n".join(failures)


# ------------------------------------------------------------------ distribute bodies
CONTENT_PATHS = ["/site", "/site/page", "/site/page/index.html", "/site/logo.bin", "/missing"]
HOSTILE_PATHS = ["", "/", "site", "/site/../..", "/site/./page", "/a\x00b", "/\u202e", "//x"]


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
        st.integers(0, 300_000).map(lambda n: "x" * n),
    )
    typed = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "long", "double", "bool", "date", "binary", "x"])},
        optional={
            "value": scalars,
            "base64": st.one_of(st.text(max_size=20), st.just("AAAA"), st.just("!!")),
            "part": st.text(max_size=10),
            "contentType": st.one_of(st.text(max_size=20), st.just("\r\nX-Evil: 1")),
        },
    )
    return st.recursive(
        st.one_of(scalars, typed), lambda inner: st.lists(inner, max_size=4), max_leaves=8
    )


def _paths() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(CONTENT_PATHS + HOSTILE_PATHS),
        st.text(max_size=30).map(lambda t: "/site/" + t),
        st.integers(1, 3000).map(lambda n: "/" + "a/" * n),
    )


distribute_bodies = st.fixed_dictionaries(
    {"action": st.sampled_from(["ADD", "DELETE", "TEST", "INVALIDATE", "add", "MOVE"])},
    optional={
        "paths": st.lists(_paths(), max_size=4),
        "deepPaths": st.lists(_paths(), max_size=4),
        "nodes": st.lists(
            st.fixed_dictionaries(
                {"path": _paths()},
                optional={"properties": st.dictionaries(st.text(max_size=12), _json_values())},
            ),
            max_size=4,
        ),
        "metadata": st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
        "userId": st.one_of(st.none(), st.text(max_size=20)),
    },
)


def test_hostile_distribute_bodies_get_an_answer_never_a_server_error(publisher: Server) -> None:
    """Bodies that pass the document's schema and break the content rules (paths, names,
    values of every type), some of them valid: 200 with an offset, or a 4xx."""
    answered: list[int] = []

    @given(body=distribute_bodies)
    @settings(
        max_examples=BODY_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(body: dict[str, Any]) -> None:
        note(repr(body)[:3000])
        try:
            answer = httpx.post(
                f"{publisher.url}/distribute", json=body, headers=AUTH, timeout=REQUEST_TIMEOUT_S
            )
        except httpx.TimeoutException:
            raise AssertionError(f"no answer within {REQUEST_TIMEOUT_S} s") from None
        assert answer.status_code < 500, f"{answer.status_code} {answer.text[:500]}"
        if answer.status_code == 200:
            assert answer.json()["offset"] >= 0
        answered.append(answer.status_code)

    run()
    assert 200 in answered, "no generated body was distributed: the generator misses"


# ------------------------------------------------------------------ raw HTTP
KNOWN_PATHS = [
    "/health",
    "/ready",
    "/metrics",
    "/distribute",
    "/distribute/upload",
    "/queues",
    "/queues/x",
    "/queues/x/clear",
    "/subscribers",
    "/agent",
    "/cleanup",
    "/openapi.json",
    "/docs",
]
TOKEN_CHARS = st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=":")


def _targets() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from(KNOWN_PATHS).map(str.encode),
        st.sampled_from(
            [b"*", b"//health", b"/health?", b"/health#x", b"/../../etc/passwd", b"http://x/ready"]
        ),
        st.builds(
            lambda path, junk: path.encode() + junk,
            st.sampled_from(KNOWN_PATHS),
            st.sampled_from([b"?skip=-1", b"?limit=99999999999999999999", b"%00", b"%ff%fe", b"/"]),
        ),
        st.integers(1, 12_000).map(lambda n: b"/" + b"a" * n),
        st.binary(min_size=1, max_size=60).map(lambda b: b"/" + b.replace(b" ", b"%20")),
    )


def _headers() -> st.SearchStrategy[list[tuple[bytes, bytes]]]:
    names = st.one_of(
        st.sampled_from(
            [b"Content-Length", b"Transfer-Encoding", b"Content-Type", b"Authorization", b"Host"]
        ),
        st.text(TOKEN_CHARS, min_size=1, max_size=20).map(str.encode),
    )
    values = st.one_of(
        st.sampled_from(
            [
                b"-1",
                b"0",
                b"99999999999999999999",
                b"abc",
                b"chunked",
                b"gzip, chunked",
                b"application/json",
                b"multipart/form-data; boundary=x",
                b"Bearer ",
                f"Bearer {AUTH['Authorization'].split()[1]}".encode(),
            ]
        ),
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.encode),
        st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
        st.integers(1, 9000).map(lambda n: b"v" * n),
    )
    return st.lists(st.tuples(names, values), max_size=6)


def _bodies() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.just(b""),
        st.binary(max_size=300),
        st.sampled_from(
            [
                b'{"action":"ADD","deepPaths":["/site"]}',
                b'{"action":"DELETE","paths":["/' + b"a" * 3000 + b'"]}',
                b"5\r\nhello\r\n0\r\n\r\n",
                b"ffffffffffffffff\r\nx\r\n",
                b"3\r\nab",
                b"[" * 5000,
            ]
        ),
    )


@st.composite
def malformed_requests(draw: st.DrawFn) -> bytes:
    """Anything that starts like a request: odd methods and versions, junk in headers, bodies
    that contradict Content-Length or the chunked encoding."""
    method = draw(
        st.one_of(
            st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH"]),
            st.sampled_from([b"TRACE", b"CONNECT", b"BREW", b"get", b""]),
            st.text(TOKEN_CHARS, min_size=1, max_size=12).map(str.encode),
        )
    )
    version = draw(
        st.one_of(st.just(b"HTTP/1.1"), st.sampled_from([b"HTTP/1.0", b"HTTP/2.0", b"HTTP/9", b""]))
    )
    lines = [method + b" " + draw(_targets()) + (b" " + version if version else b"")]
    headers = draw(_headers())
    if not any(name.lower() == b"host" for name, _ in headers):
        lines.append(b"Host: 127.0.0.1")
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + draw(_bodies())


@st.composite
def well_formed_requests(draw: st.DrawFn) -> bytes:
    """Requests an HTTP parser accepts, so that they reach the application: real routes with
    hostile query strings, headers and bodies, a correct Content-Length or chunked body."""
    method = draw(st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS"]))
    query = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["skip", "limit", "mode", "count", "x", ""]),
                st.one_of(
                    st.sampled_from(["-1", "0", "1e400", "99999999999999999999", "NaN", ""]),
                    st.text(max_size=20),
                ),
            ),
            max_size=3,
        )
    )
    target = draw(st.sampled_from(KNOWN_PATHS)).encode()
    if query:
        target += b"?" + urlencode(query).encode()
    headers = [(b"Host", b"127.0.0.1"), (b"Connection", b"close")]
    headers += draw(
        st.lists(
            st.tuples(
                st.sampled_from([b"Content-Type", b"Authorization", b"Accept", b"X-Fuzz"]),
                st.one_of(
                    st.sampled_from(
                        [
                            b"application/json",
                            b"multipart/form-data; boundary=fuzz",
                            b"text/plain",
                            f"Bearer {AUTH['Authorization'].split()[1]}".encode(),
                            b"Bearer wrong",
                        ]
                    ),
                    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)
                    .map(str.strip)
                    .map(str.encode),
                ),
            ),
            max_size=3,
        )
    )
    body = draw(_bodies())
    if draw(st.booleans()):
        headers.append((b"Content-Length", str(len(body)).encode()))
    else:
        headers.append((b"Transfer-Encoding", b"chunked"))
        body = (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
    head = b"\r\n".join(
        [method + b" " + target + b" HTTP/1.1"] + [n + b": " + v for n, v in headers]
    )
    return head + b"\r\n\r\n" + body


def raw_requests() -> st.SearchStrategy[bytes]:
    return st.one_of(well_formed_requests(), malformed_requests())


CLOSE = b"\r\nConnection: close\r\n"


def _exchange(url: str, request: bytes) -> bytes:
    """Send ``request`` and read until the server closes the connection. A well-formed request
    asks the server to close after answering; after any other, our side is closed once it is
    sent (a server may wait for more of a body that never comes: that is no hang of its own).
    """
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=REQUEST_TIMEOUT_S) as sock:
        sock.settimeout(REQUEST_TIMEOUT_S)
        try:
            sock.sendall(request)
            if CLOSE not in request:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may refuse and close before reading all of it
        answer = bytearray()
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise AssertionError(
                    f"no answer, and the connection still open, after {REQUEST_TIMEOUT_S} s"
                ) from None
            except ConnectionResetError:
                return bytes(answer)
            if not chunk:
                return bytes(answer)
            answer += chunk


def _status_codes(answer: bytes) -> list[int]:
    """The status code of every response in ``answer`` (pipelined requests get several)."""
    codes = []
    for line in answer.split(b"\r\n"):
        if line.startswith(b"HTTP/1.") and len(line) >= 12 and line[9:12].isdigit():
            codes.append(int(line[9:12]))
    return codes


def _fuzz_raw(url: str, probe: Callable[[], int]) -> None:
    @given(request=raw_requests())
    @settings(
        max_examples=RAW_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(request: bytes) -> None:
        note(repr(request[:2000]))
        answer = _exchange(url, request)
        codes = _status_codes(answer)
        assert all(code < 500 for code in codes), f"server error: {answer[:1000]!r}"

    run()
    assert probe() == 200, "the server no longer answers after the raw requests"


def test_raw_http_requests_never_get_a_server_error_from_the_publisher(publisher: Server) -> None:
    _fuzz_raw(publisher.url, lambda: httpx.get(f"{publisher.url}/health", timeout=10).status_code)


def test_raw_http_requests_never_get_a_server_error_from_the_subscriber_endpoint(
    subscriber_endpoint: Server,
) -> None:
    url = subscriber_endpoint.url
    _fuzz_raw(url, lambda: httpx.get(f"{url}/health", timeout=10).status_code)


def test_the_fixtures_serve_what_the_fuzzing_assumes(
    publisher: Server, subscriber_endpoint: Server
) -> None:
    """A valid request with the token distributes; without it, it is refused; the health
    endpoint answers its stand-ins. Guards against fuzzing a server that refuses everything."""
    body = {"action": "ADD", "deepPaths": ["/site/page"]}
    answer = httpx.post(f"{publisher.url}/distribute", json=body, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    refused = httpx.post(f"{publisher.url}/distribute", json=body, timeout=30)
    assert refused.status_code == 401, refused.text
    health = httpx.get(f"{subscriber_endpoint.url}/health", timeout=10)
    assert health.json()["processedOffset"] == 41
