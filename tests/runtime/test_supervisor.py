"""Supervised threads: restarted after an exception with a growing back-off, counted, logged
with their traceback, and reported down in between."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from runtime.supervisor import Backoff, SupervisedThread, Supervisor, register_metrics
from subscriber.http import Health, create_app
from subscriber.readiness import supervised_check
from tests.waiting import wait_for

# Short pauses so the tests take milliseconds; never healthy long enough to reset by accident.
FAST = Backoff(initial_s=0.01, factor=2.0, max_s=0.04, healthy_s=60.0)


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    register_metrics(registry)
    return registry


def restarts(registry: CollectorRegistry, thread: str) -> float:
    return registry.get_sample_value("scd_thread_restarts_total", {"thread": thread}) or 0.0


def failing(times: int, then: Callable[[], None]) -> Callable[[], None]:
    """A loop that raises on its first ``times`` runs, then runs ``then``."""
    calls = [0]

    def loop() -> None:
        calls[0] += 1
        if calls[0] <= times:
            raise RuntimeError(f"boom {calls[0]}")
        then()

    return loop


@pytest.fixture
def supervisor() -> Iterator[Supervisor]:
    supervisor = Supervisor()
    yield supervisor
    supervisor.stop(5.0)


def restart_logs(caplog: pytest.LogCaptureFixture, thread: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.__dict__.get("supervised_thread") == thread]


def delays(logs: list[logging.LogRecord]) -> list[float]:
    return [r.__dict__["restart_in_s"] for r in logs]


def test_a_failing_loop_is_restarted_counted_and_logged_with_its_traceback(
    supervisor: Supervisor, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "runtime.supervisor")
    name = "test-restarted"
    before = restarts(registry, name)
    running = threading.Event()

    def run_until_stopped() -> None:
        running.set()
        supervisor.stop_event.wait()

    thread = supervisor.spawn(name, failing(5, run_until_stopped), backoff=FAST)
    assert running.wait(5.0), "the loop was never restarted after its failures"
    assert thread.restarts == 5
    assert not thread.down
    assert restarts(registry, name) - before == 5
    logs = restart_logs(caplog, name)
    assert len(logs) == 5
    assert all(r.levelno == logging.ERROR and r.exc_info for r in logs)
    assert "Traceback" in caplog.text
    assert "RuntimeError: boom 1" in caplog.text
    assert "in loop" in caplog.text  # the failing frame
    # Back-off: doubles from the initial pause, capped at max_s.
    assert delays(logs) == pytest.approx([0.01, 0.02, 0.04, 0.04, 0.04])


def test_the_back_off_starts_again_after_a_healthy_run(
    supervisor: Supervisor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, "runtime.supervisor")
    name = "test-healthy-reset"
    calls = [0]
    done = threading.Event()

    def loop() -> None:
        calls[0] += 1
        if calls[0] == 3:
            time.sleep(0.4)  # longer than healthy_s: this run counts as healthy
        if calls[0] <= 4:
            raise RuntimeError("boom")
        done.set()
        supervisor.stop_event.wait()

    backoff = Backoff(initial_s=0.01, factor=2.0, max_s=1.0, healthy_s=0.2)
    supervisor.spawn(name, loop, backoff=backoff)
    assert done.wait(5.0)
    assert delays(restart_logs(caplog, name)) == pytest.approx([0.01, 0.02, 0.01, 0.02])


@pytest.mark.usefixtures("registry")
def test_a_thread_is_down_between_failure_and_restart(supervisor: Supervisor) -> None:
    name = "test-down"
    restarted = threading.Event()

    def run_until_stopped() -> None:
        restarted.set()
        supervisor.stop_event.wait()

    # A long first pause makes the down window observable without racing.
    slow = Backoff(initial_s=0.5, max_s=0.5, healthy_s=60.0)
    thread = supervisor.spawn(name, failing(1, run_until_stopped), backoff=slow)
    wait_for(lambda: thread.down, what="the thread to be down after its failure")
    ok, reason = supervisor.health()
    assert not ok
    assert name in reason
    assert "RuntimeError" in reason
    assert supervisor.down() == [thread]
    assert restarted.wait(5.0)
    assert not thread.down
    assert supervisor.health()[0]
    assert thread.last_error == "RuntimeError"


def test_an_unexpected_return_is_a_restart_too(supervisor: Supervisor) -> None:
    calls: list[int] = []

    def loop() -> None:
        calls.append(1)
        if len(calls) >= 3:
            supervisor.stop_event.wait()

    thread = supervisor.spawn("test-returned", loop, backoff=FAST)
    wait_for(lambda: len(calls) >= 3, what="two restarts of a loop that returned")
    assert thread.restarts == 2
    assert thread.last_error == "returned"


# pytest reports any exception ending a thread; here that end is the behaviour under test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_system_exit_ends_the_thread_for_good_and_it_stays_down(supervisor: Supervisor) -> None:
    def loop() -> None:
        raise SystemExit(3)

    thread = supervisor.spawn("test-exit", loop, backoff=FAST)
    thread.join(5.0)
    assert not thread.is_alive()
    assert thread.down
    assert thread.restarts == 0
    assert not supervisor.health()[0]


def test_stop_during_the_back_off_returns_promptly_and_is_not_down() -> None:
    slow = Backoff(initial_s=30.0, max_s=30.0)
    thread = SupervisedThread("test-stop", failing(1, lambda: None), backoff=slow).start()
    wait_for(lambda: thread.down, what="the failure")
    started = time.monotonic()
    thread.stop(5.0)
    assert time.monotonic() - started < 2.0
    assert not thread.is_alive()
    assert not thread.down


def test_a_failure_once_stopping_ends_the_thread_quietly(registry: CollectorRegistry) -> None:
    stop = threading.Event()

    def loop() -> None:
        stop.set()  # stop() called while the loop ran, then its client closed under it
        raise RuntimeError("consumer closed")

    thread = SupervisedThread("test-stopping", loop, stop=stop, backoff=FAST).start()
    thread.join(5.0)
    assert not thread.is_alive()
    assert not thread.down
    assert thread.restarts == 0
    assert restarts(registry, "test-stopping") == 0


def test_the_counter_is_exposed_by_every_registry_it_is_added_to() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    register_metrics(first)
    register_metrics(second)  # one process-wide counter in two agents' registries
    stop = threading.Event()
    loop = failing(1, stop.set)  # fails once; its restart returns stopped
    SupervisedThread("test-two-registries", loop, stop=stop, backoff=FAST).start().join(5.0)
    for registry in (first, second):
        assert restarts(registry, "test-two-registries") == 1


def test_subscriber_ready_answers_503_while_a_thread_is_down_and_200_after(
    supervisor: Supervisor,
) -> None:
    restarted = threading.Event()
    release = threading.Event()

    def run_until_stopped() -> None:
        restarted.set()
        supervisor.stop_event.wait()

    def loop() -> None:
        if not restarted.is_set() and not release.is_set():
            release.wait(5.0)  # up, then fails when the test says so
            raise RuntimeError("import loop bug")
        run_until_stopped()

    slow = Backoff(initial_s=0.5, max_s=0.5)
    thread = supervisor.spawn("sub1-import", loop, backoff=slow)
    health = Health(agent="sub1", instance_id="i", processed_offset=None, state="RUNNING")
    app = create_app(
        lambda: health,
        supervised_check(lambda: (True, "ready (idle): idle for 10 s"), supervisor),
        lambda: b"",
    )
    with TestClient(app) as client:
        assert client.get("/ready").status_code == 200
        release.set()
        wait_for(lambda: thread.down, what="the import loop to fail")
        answer = client.get("/ready")
        assert answer.status_code == 503
        assert "sub1-import" in answer.json()["reason"]
        assert restarted.wait(5.0)
        assert client.get("/ready").json() == {
            "ready": True,
            "reason": "ready (idle): idle for 10 s",
        }
