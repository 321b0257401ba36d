"""The commit slots of a daemon's agents (subscriber.fleet.commit_slots): at most ``capacity``
holders at once; a waiter that is starting goes before every waiter that serves; waiters of one
kind go in the order they came; a slot is given back when the block raises; a holder that hangs
stops counting after ``stalled_s`` (one agent's hung store does not stop the others); a waiter
whose agent stops gives up its place."""

from __future__ import annotations

import threading

import pytest

from subscriber.errors import Stopped
from subscriber.fleet.commit_slots import CommitSlots
from tests.waiting import wait_for

WAIT_S = 10.0


def queue_up(
    slots: CommitSlots, kinds: list[bool], order: list[int], gate: threading.Event
) -> list[threading.Thread]:
    """One thread per entry of ``kinds`` (True: starting), each queued after the one before;
    each notes its index in ``order`` once it holds a slot, then waits for ``gate``."""
    threads = []
    for index, starting in enumerate(kinds):

        def run(index: int = index, starting: bool = starting) -> None:
            with slots.hold(starting=starting):
                order.append(index)
                gate.wait(WAIT_S)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        queued = index + 1
        wait_for(lambda: slots.waiting >= queued, WAIT_S)  # noqa: B023 - used at once
    return threads


def test_starting_waiters_go_first_and_each_kind_in_its_order() -> None:
    slots = CommitSlots(1)
    order: list[int] = []
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with slots.hold(starting=False):
            held.set()
            release.wait(WAIT_S)

    first = threading.Thread(target=holder, daemon=True)
    first.start()
    assert held.wait(WAIT_S)
    gate = threading.Event()
    gate.set()  # each waiter gives its slot back at once
    threads = queue_up(slots, [False, False, True, False, True], order, gate)
    release.set()
    for thread in [first, *threads]:
        thread.join(WAIT_S)
    assert order == [2, 4, 0, 1, 3]
    assert slots.waiting == 0


def test_no_more_than_capacity_hold_at_once() -> None:
    slots = CommitSlots(2)
    order: list[int] = []
    gate = threading.Event()
    threads = []
    for index in range(5):

        def run(index: int = index) -> None:
            with slots.hold(starting=index % 2 == 0):
                order.append(index)
                gate.wait(WAIT_S)

        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
    wait_for(lambda: len(order) == 2 and slots.waiting == 3, WAIT_S)
    gate.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert sorted(order) == [0, 1, 2, 3, 4]


def test_a_block_that_raises_gives_its_slot_back() -> None:
    slots = CommitSlots(1)
    with pytest.raises(RuntimeError, match="commit failed"), slots.hold(starting=True):
        raise RuntimeError("commit failed")
    done = threading.Event()

    def next_one() -> None:
        with slots.hold(starting=False):
            done.set()

    threading.Thread(target=next_one, daemon=True).start()
    assert done.wait(WAIT_S)


def test_a_holder_that_hangs_stops_counting_after_stalled_s() -> None:
    slots = CommitSlots(1, stalled_s=0.3)
    held, hung = threading.Event(), threading.Event()

    def hanging() -> None:
        with slots.hold(starting=False):
            held.set()
            hung.wait(WAIT_S)  # a store that stopped answering

    threading.Thread(target=hanging, daemon=True).start()
    assert held.wait(WAIT_S)
    done = threading.Event()

    def next_one() -> None:
        with slots.hold(starting=False):
            done.set()

    threading.Thread(target=next_one, daemon=True).start()
    try:
        assert done.wait(WAIT_S), "the next commit waited for the hung one"
        assert not hung.is_set()
    finally:
        hung.set()


def test_a_waiter_whose_agent_stops_gives_up_its_place() -> None:
    slots = CommitSlots(1)
    stop = threading.Event()
    outcome: list[str] = []
    release = threading.Event()

    def leaving() -> None:
        try:
            with slots.hold(starting=True, stop=stop):
                outcome.append("leaver committed")
        except Stopped:
            outcome.append("leaver stopped")

    with slots.hold(starting=False):
        leaver = threading.Thread(target=leaving, daemon=True)
        leaver.start()
        wait_for(lambda: slots.waiting == 1, WAIT_S)
        order: list[int] = []
        others = [threading.Thread(target=_hold_once, args=(slots, order, release), daemon=True)]
        others[0].start()
        wait_for(lambda: slots.waiting == 2, WAIT_S)  # behind the leaver
        stop.set()
        leaver.join(WAIT_S)
        assert outcome == ["leaver stopped"]  # while the slot is still held
        assert slots.waiting == 1
    wait_for(lambda: order == [0], WAIT_S)  # the one behind it goes
    release.set()
    others[0].join(WAIT_S)


def _hold_once(slots: CommitSlots, order: list[int], release: threading.Event) -> None:
    with slots.hold(starting=False):
        order.append(0)
        release.wait(WAIT_S)


@pytest.mark.parametrize("capacity", [0, -1])
def test_a_capacity_below_one_is_refused(capacity: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        CommitSlots(capacity)
