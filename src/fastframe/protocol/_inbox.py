"""Inbound flow control as plain rules: a subscription's bounded queue, and why reading is paused.

No I/O, no clock, no threads: :class:`Inbox` is a deque with a bound and the decisions around it;
:class:`ReadPauses` is the ledger of the reasons a connection stops reading its socket. Both
clients use them (the asyncio client's subscription is an inbox plus a waiter, the blocking
client's the same inbox plus a condition), so the rules exist once and are tested without a loop.
"""

from __future__ import annotations

import collections
from typing import Callable, Deque, Dict, Generic, List, Optional, Protocol, TypeVar

__all__ = ["Inbox", "ReadGate", "ReadPauses"]

T = TypeVar("T")


class ReadGate(Protocol):
    """What an inbox asks of the connection that filled it (the asyncio client's session)."""

    def pause_reading(self, reason: object, *, hard: bool = False) -> None:
        """Stop reading until ``reason`` is withdrawn (``hard``: even while a receipt is awaited)."""

    def resume_reading(self, reason: object) -> None:
        """Withdraw ``reason``."""


class ReadPauses:
    """Why a connection does not read its socket: reasons given by inboxes (and the read
    coalescing's rests), each soft or hard. A soft reason is lifted while a receipt is awaited (the
    RECEIPT may wait in the socket behind MESSAGEs); a hard one is not; closing down lifts all."""

    __slots__ = ("_reasons", "closing")

    def __init__(self) -> None:
        self._reasons: Dict[object, bool] = {}
        #: DISCONNECT is under way: read freely (its RECEIPT must not wait behind MESSAGEs)
        self.closing = False

    def pause(self, reason: object, hard: bool = False) -> None:
        """Add ``reason`` (or change whether it is hard)."""
        self._reasons[reason] = hard

    def resume(self, reason: object) -> None:
        """Withdraw ``reason`` (no error when it was not given)."""
        self._reasons.pop(reason, None)

    def paused(self, awaiting_receipt: bool) -> bool:
        """Whether reading stays paused now."""
        reasons = self._reasons
        if not reasons or self.closing:
            return False
        return not awaiting_receipt or any(reasons.values())

    def paused_except(self, reason: object) -> bool:
        """Whether a reason other than ``reason`` is given (e.g. a full queue, not a rest)."""
        return any(other is not reason for other in self._reasons)

    def __contains__(self, reason: object) -> bool:
        return reason in self._reasons


_SOFT, _HARD = 1, 2


class Inbox(Generic[T]):
    """A subscription's queue of messages with one bound, and when reading must pause for it.

    The rules, for ``bound`` = n:

    * holding n messages pauses reading, softly: a receipt wait reads on (its RECEIPT may come
      behind MESSAGEs); holding 2n pauses it hard;
    * taking messages down to n // 2 withdraws the pause; below 2n a hard pause turns soft;
    * while the client closes down (reading freely for DISCONNECT's receipt), what comes past 2n
      is dropped: the bound holds whatever the socket brings.

    Each bound holds to one socket read: the read that reaches it is queued whole (deciding per
    message inside a read would cost every message a check the common case never needs).

    :meth:`put` and :meth:`settle` ask the gate to pause or resume, so they run where the gate
    lives (the event loop's thread); :meth:`take` and :meth:`take_batch` take without asking
    anything: after them, :attr:`settle_due` says whether :meth:`settle` should run (where the gate
    lives). :meth:`take` (a deque's popleft) may run on any thread, beside others; :meth:`take_batch`
    copies then clears, so it is for one taker at a time (the asyncio client's loop).
    """

    __slots__ = ("items", "bound", "room", "low", "high", "pause", "settle_at", "wake", "_gate")

    def __init__(self, bound: int) -> None:
        if bound < 1:
            raise ValueError("max_queue must be at least 1")
        #: the messages, oldest first (a deque: one append and one popleft are atomic across threads)
        self.items: Deque[T] = collections.deque()
        self.bound = bound
        #: below this many queued, :meth:`put` only appends (a caller may append to :attr:`items` itself)
        self.room = bound - 1
        self.low = bound // 2  # taking down to this withdraws the pause
        self.high = 2 * bound  # the hard bound
        #: what this inbox asks of its gate: 0 (nothing), 1 (a soft pause) or 2 (a hard one)
        self.pause = 0
        #: :meth:`settle` is due once at most this many are queued (-1: not paused): a taker's one
        #: comparison per message (``len(inbox.items) <= inbox.settle_at``), no call
        self.settle_at = -1
        #: what wakes the inbox's reader after a connection queued messages into :attr:`items`
        #: itself (:meth:`fastframe.protocol.ClientConnection.route`): called once per read, after
        #: :meth:`filled`
        self.wake: Optional[Callable[[], None]] = None
        self._gate: Optional[ReadGate] = None  # the gate it asked (the connection that filled it)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def paused(self) -> bool:
        """Whether this inbox asks its gate not to read."""
        return self.pause != 0

    @property
    def hard(self) -> bool:
        """Whether it asks so even while a receipt is awaited."""
        return self.pause == _HARD

    def put(self, item: T, gate: ReadGate, closing: bool = False) -> bool:
        """Queue ``item``, read by ``gate``; False when it was dropped (``closing`` past the hard bound)."""
        items = self.items
        size = len(items)
        if size >= self.room:
            if closing and size >= self.high:
                return False
            self._ask(_HARD if size + 1 >= self.high else _SOFT, gate)
        items.append(item)
        return True

    def filled(self, gate: ReadGate) -> None:
        """After a connection appended to :attr:`items` itself (a read's messages, routed): pause
        ``gate`` as :meth:`put` would have for the last of them (the read is queued whole)."""
        size = len(self.items)
        if size >= self.bound:
            self._ask(_HARD if size >= self.high else _SOFT, gate)

    def _ask(self, pause: int, gate: ReadGate) -> None:
        if pause != self.pause or gate is not self._gate:  # asked once per change
            self._set(pause, gate)
            gate.pause_reading(self, hard=pause == _HARD)

    def _set(self, pause: int, gate: Optional[ReadGate]) -> None:
        self.pause, self._gate = pause, gate
        self.settle_at = (-1, self.low, self.high - 1)[pause]

    def take(self) -> T:
        """The oldest message (:class:`IndexError` when none); see :attr:`settle_due`."""
        return self.items.popleft()

    def take_batch(self, limit: int) -> List[T]:
        """Up to ``limit`` messages, oldest first (an empty list when none); see :attr:`settle_due`."""
        items = self.items
        if limit >= len(items):
            batch = list(items)
            items.clear()  # (not atomic with the copy: one taker at a time, see the class)
            return batch
        popleft = items.popleft
        return [popleft() for _ in range(limit)]

    @property
    def settle_due(self) -> bool:
        """Whether messages were taken far enough for :meth:`settle` to change the pause."""
        return len(self.items) <= self.settle_at

    def settle(self) -> None:
        """After messages were taken: withdraw the pause at the low mark, soften it below the hard bound."""
        pause, gate = self.pause, self._gate
        if pause == 0 or gate is None:
            return
        left = len(self.items)
        if left <= self.low:
            self._set(0, None)
            gate.resume_reading(self)
        elif pause == _HARD and left < self.high:
            self._set(_SOFT, gate)
            gate.pause_reading(self)  # a receipt wait may read on again

    def release(self) -> None:
        """Withdraw the pause, whatever is queued (the subscription ended)."""
        gate = self._gate
        self._set(0, None)
        if gate is not None:
            gate.resume_reading(self)

    def restart(self, gate: ReadGate, keep: bool) -> None:
        """A new connection replaced the one that filled the inbox: ``keep`` False drops what is
        queued (unacknowledged messages, which the broker redelivers on the new one); the pause, if
        the inbox is still full, is asked of ``gate``."""
        if not keep:
            self.items.clear()
        self._set(0, None)
        if len(self.items) >= self.bound:
            self._set(_SOFT, gate)
            gate.pause_reading(self)

    def __repr__(self) -> str:
        state = ("", " paused", " paused hard")[self.pause]
        return f"<Inbox {len(self.items)}/{self.bound}{state}>"
