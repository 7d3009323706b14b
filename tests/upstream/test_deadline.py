"""Deadline: fires like asyncio.timeout, and never mistakes a cancellation from outside for its own."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.upstream.deadline import Deadline, Deadlines


async def test_a_block_that_outlasts_its_deadline_raises_timeout_error() -> None:
    never = asyncio.Event()
    task = asyncio.current_task()
    assert task is not None
    with pytest.raises(TimeoutError), Deadline(Deadlines(asyncio.get_running_loop()), 0.01):
        await never.wait()
    assert task.cancelling() == 0  # its cancel was taken back: the task carries on as if never cancelled
    await asyncio.sleep(0)  # and nothing is left to cancel it later


async def test_a_block_that_ends_in_time_is_not_cancelled_afterwards() -> None:
    deadline = Deadline(Deadlines(asyncio.get_running_loop()), 1)  # in time, however loaded the machine
    with deadline:
        await asyncio.sleep(0)
    await asyncio.sleep(1.05)  # past the deadline: its timer was cancelled on the way out
    assert not deadline.expired


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    entered, never = asyncio.Event(), asyncio.Event()

    async def waits() -> None:
        with Deadline(Deadlines(asyncio.get_running_loop()), 60):
            entered.set()
            await never.wait()

    task = asyncio.create_task(waits())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_arriving_with_the_expiry_wins() -> None:
    """The client left just as the deadline passed: the task must still end cancelled, not timed out."""
    never = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def waits() -> None:
        task = asyncio.current_task()
        assert task is not None
        with Deadline(Deadlines(loop), 0.01) as deadline:
            loop.call_later(0.02, task.cancel)  # the client leaves just after the deadline passes
            time.sleep(0.05)  # noqa: ASYNC251  (the loop held up on purpose: both are due at its next turn, the expiry first)
            await never.wait()
        assert deadline.expired  # not reached: the block must raise

    task = asyncio.create_task(waits())
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_other_errors_pass_through() -> None:
    with pytest.raises(ValueError, match="boom"), Deadline(Deadlines(asyncio.get_running_loop()), 60):
        raise ValueError("boom")


async def _outlast(never: asyncio.Event) -> None:
    """Wait for what never comes; fail after 5 s, when no deadline ended the wait (not a TimeoutError)."""
    await asyncio.wait([asyncio.ensure_future(never.wait())], timeout=5)
    raise AssertionError("no deadline ended the wait")


async def test_a_deadline_expires_when_the_elder_its_timer_was_set_for_ended_in_time() -> None:
    deadlines, never = Deadlines(asyncio.get_running_loop()), asyncio.Event()
    with Deadline(deadlines, 1):  # ends in time: the queue's one timer stays set for it
        await asyncio.sleep(0.03)  # (not a synchronisation: the next deadline is due 0.03 s after this one)
    with pytest.raises(TimeoutError), Deadline(deadlines, 1):
        await _outlast(never)


async def test_deadlines_of_one_length_each_expire_at_their_own_time() -> None:
    deadlines, never = Deadlines(asyncio.get_running_loop()), asyncio.Event()

    async def waits() -> None:
        with Deadline(deadlines, 1):
            await _outlast(never)

    elder = asyncio.create_task(waits())
    # not a synchronisation: the younger deadline begins later, by more than a loaded machine's stall
    await asyncio.sleep(0.5)
    younger = asyncio.create_task(waits())
    with pytest.raises(TimeoutError):
        await elder
    assert not younger.done()  # the elder's expiry cancels only its own block
    with pytest.raises(TimeoutError):
        await younger


async def test_deadlines_of_another_length_do_not_wait_behind_a_longer_one() -> None:
    deadlines, never = Deadlines(asyncio.get_running_loop()), asyncio.Event()
    with Deadline(deadlines, 60), pytest.raises(TimeoutError), Deadline(deadlines, 0.01):
        await _outlast(never)
