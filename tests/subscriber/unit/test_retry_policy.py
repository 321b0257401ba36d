"""The back-off between attempts of a failing package: doubling from the initial pause up to
the longest, for as many attempts as a package retried forever makes."""

from __future__ import annotations

from subscriber.bookkeeper.retries import RetryPolicy


def test_the_pause_doubles_up_to_the_longest_and_stays_there_forever() -> None:
    policy = RetryPolicy(initial_s=5.0, max_s=900.0, max_retries=-1)
    assert [policy.delay(n) for n in (0, 1, 2, 3, 8, 9)] == [5.0, 5.0, 10.0, 20.0, 640.0, 900.0]
    # 2.0 ** 1024 overflows a float: attempt 1025 used to raise OverflowError.
    for attempts in (1024, 1025, 1026, 10**6, 10**18):
        assert policy.delay(attempts) == 900.0
    assert not policy.gives_up(10**18)


def test_a_tiny_initial_pause_still_reaches_the_longest() -> None:
    policy = RetryPolicy(initial_s=1e-300, max_s=1.0, max_retries=3)
    assert policy.delay(2000) == 1.0
    assert policy.gives_up(4)
