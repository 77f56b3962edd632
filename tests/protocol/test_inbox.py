"""The inbound flow-control rules both clients share (fastframe.protocol.Inbox, ReadPauses), without a loop."""

from __future__ import annotations

from typing import List, Tuple

import pytest

from fastframe.protocol import Inbox, ReadPauses


class Gate:
    """A connection's read switch, recording what inboxes ask of it."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, bool]] = []
        self.pauses = ReadPauses()

    def pause_reading(self, reason: object, *, hard: bool = False) -> None:
        self.calls.append(("pause", hard))
        self.pauses.pause(reason, hard)

    def resume_reading(self, reason: object) -> None:
        self.calls.append(("resume", False))
        self.pauses.resume(reason)


def fill(inbox: Inbox[int], gate: Gate, n: int) -> None:
    for i in range(n):
        assert inbox.put(i, gate)


def drain(inbox: Inbox[int], n: int) -> List[int]:
    taken = []
    for _ in range(n):
        taken.append(inbox.take())
        if inbox.settle_due:
            inbox.settle()
    return taken


def test_reading_pauses_softly_at_the_bound_and_resumes_at_half() -> None:
    inbox: Inbox[int] = Inbox(10)
    gate = Gate()
    fill(inbox, gate, 9)
    assert gate.calls == [] and not inbox.paused
    fill(inbox, gate, 1)
    assert gate.calls == [("pause", False)] and inbox.paused and not inbox.hard
    fill(inbox, gate, 3)  # more in the same read: asked once, not per message
    assert gate.calls == [("pause", False)]
    drain(inbox, 8)  # 13 -> 5: the resume mark
    assert gate.calls == [("pause", False), ("resume", False)]
    assert not inbox.paused and len(inbox) == 5


def test_twice_the_bound_pauses_hard_and_softens_below_it() -> None:
    inbox: Inbox[int] = Inbox(4)
    gate = Gate()
    fill(inbox, gate, 8)
    assert gate.calls == [("pause", False), ("pause", True)] and inbox.hard
    assert gate.pauses.paused(awaiting_receipt=True)  # even a receipt wait does not read on
    drain(inbox, 1)  # 7 < 8: soft again
    assert gate.calls[-1] == ("pause", False) and not inbox.hard
    assert not gate.pauses.paused(awaiting_receipt=True) and gate.pauses.paused(awaiting_receipt=False)
    drain(inbox, 5)  # 2: the resume mark
    assert gate.calls[-1] == ("resume", False) and not gate.pauses.paused(awaiting_receipt=False)


def test_closing_drops_past_the_hard_bound_and_keeps_order() -> None:
    inbox: Inbox[int] = Inbox(2)
    gate = Gate()
    kept = [inbox.put(i, gate, closing=True) for i in range(6)]
    assert kept == [True, True, True, True, False, False]
    assert inbox.take_batch(10) == [0, 1, 2, 3]


def test_take_batch_takes_at_most_its_limit_oldest_first() -> None:
    inbox: Inbox[int] = Inbox(100)
    gate = Gate()
    fill(inbox, gate, 5)
    assert inbox.take_batch(2) == [0, 1]
    assert inbox.take_batch(10) == [2, 3, 4]
    assert inbox.take_batch(10) == []
    with pytest.raises(IndexError):
        inbox.take()


def test_settle_is_due_only_where_it_would_change_something() -> None:
    inbox: Inbox[int] = Inbox(10)
    gate = Gate()
    fill(inbox, gate, 12)
    for _ in range(6):
        inbox.take()
        assert not inbox.settle_due  # 11 .. 6 left: still above the resume mark
    inbox.take()
    assert inbox.settle_due
    inbox.settle()
    assert not inbox.settle_due and gate.calls == [("pause", False), ("resume", False)]
    inbox.settle()  # a second settle (two consumers both asked) changes nothing
    assert gate.calls == [("pause", False), ("resume", False)]


def test_a_new_gate_is_asked_again() -> None:
    # after a reconnect the messages come from another connection: its reading pauses too
    inbox: Inbox[int] = Inbox(2)
    old, new = Gate(), Gate()
    fill(inbox, old, 2)
    inbox.restart(new, keep=True)  # ack=auto: what is queued stays; still full, so the new one pauses
    assert new.calls == [("pause", False)] and len(inbox) == 2
    drain(inbox, 1)
    assert new.calls[-1] == ("resume", False) and old.calls == [("pause", False)]


def test_restart_without_keep_drops_what_the_broker_redelivers() -> None:
    inbox: Inbox[int] = Inbox(2)
    old, new = Gate(), Gate()
    fill(inbox, old, 3)
    inbox.restart(new, keep=False)
    assert len(inbox) == 0 and new.calls == [] and not inbox.paused


def test_release_withdraws_the_pause_whatever_is_queued() -> None:
    inbox: Inbox[int] = Inbox(2)
    gate = Gate()
    fill(inbox, gate, 4)
    inbox.release()
    assert gate.calls[-1] == ("resume", False) and not gate.pauses.paused(awaiting_receipt=False)
    inbox.release()  # nothing more to withdraw
    assert gate.calls.count(("resume", False)) == 1


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_queue"):
        Inbox(0)


def test_read_pauses_ledger() -> None:
    pauses = ReadPauses()
    assert not pauses.paused(awaiting_receipt=False)
    pauses.pause("rest")
    pauses.pause("queue-a")
    assert pauses.paused(awaiting_receipt=False)
    assert not pauses.paused(awaiting_receipt=True)  # a receipt wait lifts soft reasons
    assert pauses.paused_except("rest")
    pauses.pause("queue-a", hard=True)
    assert pauses.paused(awaiting_receipt=True)  # not a hard one
    pauses.closing = True
    assert not pauses.paused(awaiting_receipt=False)  # closing down lifts all
    pauses.closing = False
    pauses.resume("queue-a")
    pauses.resume("queue-a")  # (withdrawn twice: no error)
    assert "queue-a" not in pauses and not pauses.paused_except("rest")
