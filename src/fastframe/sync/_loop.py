"""The blocking client's I/O thread: a private asyncio loop, and the one ordered queue of calls into it.

User threads never touch the socket or the protocol connection: every call becomes an entry of
:class:`Outbox`, run on the loop in the order the entries were made, so frames go out whole and in
call order whatever thread made them. A call that nobody waits for (a SEND or ACK without a
receipt) costs its caller one lock and one append; the loop takes the entries in batches. A call
that waits for a receipt holds the queue only until its frame is written: the wait goes on in a
task of its own (:func:`fastframe.aio.start_call`), so no thread's frame waits behind another's
receipt.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import threading
import time
from typing import Any, Awaitable, Callable, Coroutine, Deque, Dict, List, Optional, Set, Tuple, TypeVar

from .. import aio

__all__ = ["CallTimeout", "LoopThread", "Outbox", "blocking_timeout", "keep"]

T = TypeVar("T")
log = logging.getLogger("fastframe.sync")

_TIMEOUTS = (asyncio.TimeoutError, concurrent.futures.TimeoutError)  # (one class from Python 3.11 on)


# The client's own tasks (the watch on its end, calls waiting for receipts), held until they end: a
# program that drops a client it never closed, while reading is paused (the socket then is in no
# selector), leaves nothing else holding them, and the collector would destroy them pending.
_KEPT: Set[asyncio.Task[Any]] = set()


def keep(task: asyncio.Task[Any]) -> asyncio.Task[Any]:
    """Hold ``task`` until it ends (the event loop holds its tasks only weakly)."""
    _KEPT.add(task)
    task.add_done_callback(_KEPT.discard)
    return task


def blocking_timeout(exc: BaseException) -> BaseException:
    """The builtin :class:`TimeoutError` for a timeout from either side of the thread boundary."""
    if isinstance(exc, _TIMEOUTS) and type(exc) is not TimeoutError:
        error = TimeoutError(str(exc) or "the wait timed out")
        error.__cause__ = exc
        return error
    return exc


class LoopThread:
    """An asyncio event loop running in a daemon thread of its own (a forgotten client does not keep
    the process alive).

    The clients of a process share one (:meth:`acquire`, :meth:`release`): one I/O thread for every
    connection, as one event loop serves every connection of an asyncio program, so the threads of
    a program are its own plus one, and connections do not contend with each other for the GIL.
    """

    _shared: Optional[LoopThread] = None
    _users = 0
    _shared_lock = threading.Lock()

    def __init__(self, name: str = "fastframe-sync") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @classmethod
    def acquire(cls) -> LoopThread:
        """The process's shared loop thread (started when none runs), counted as used once more."""
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.running:
                cls._shared, cls._users = LoopThread(), 0
            cls._users += 1
            return cls._shared

    def release(self, timeout: float) -> None:
        """One user less; the last one stops the thread (waiting at most ``timeout`` s)."""
        with LoopThread._shared_lock:
            if LoopThread._shared is self:
                LoopThread._users -= 1
                if LoopThread._users > 0:
                    return
                LoopThread._shared = None
        self.stop(timeout)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            leftovers = asyncio.all_tasks(self.loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                self.loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            self.loop.close()

    @property
    def in_loop(self) -> bool:
        """Whether the calling thread is the loop's own (where a blocking call would deadlock)."""
        return threading.current_thread() is self._thread

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float]) -> T:
        """Run ``coro`` on the loop and wait for its result (at most ``timeout`` s: :class:`TimeoutError`)."""
        if self.in_loop:
            raise RuntimeError("a blocking fastframe.sync call from the client's own I/O thread (a hook?)")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except BaseException as exc:
            future.cancel()
            error = blocking_timeout(exc)
            if error is exc:
                raise
            raise error from exc

    def stop(self, timeout: float) -> None:
        """Stop the loop (its tasks are cancelled) and wait at most ``timeout`` s for the thread."""
        if self.running:
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:
                pass  # (closed meanwhile)
        if not self.in_loop:
            self._thread.join(timeout)


_BATCH_BYTES = 64 * 1024  # (bodies) a run of SENDs written at once stops past this much

# (call, its arguments, its keyword arguments, who waits for its result, the waiter's deadline on
# time.monotonic()); call None: the everyday SEND
Entry = Tuple[
    Optional[Callable[..., Awaitable[Any]]],
    Tuple[Any, ...],
    Dict[str, Any],
    Optional["concurrent.futures.Future[Any]"],
    float,
]
_NO_KWARGS: Dict[str, Any] = {}  # (the everyday SEND's: its arguments are positional)


class Outbox:
    """Calls to run on the loop, in order. At most ``limit`` entries wait; a caller beyond that blocks
    (at most its timeout) until the loop catches up, so a fast producer cannot fill memory.

    The everyday entry, a SEND nobody waits for, is queued as its arguments alone (:meth:`post_send`).
    A run of them goes to ``send_batch(args_list, failed)``, which writes what it can at once (no
    coroutine, no wrapper, one write for the run) and returns how many it handled; the drain awaits
    ``send`` for the rest, one by one (a reconnect runs, the write buffer is full). An append to the
    queue takes no lock (a deque's append is atomic); only scheduling a drain on the loop does.
    """

    def __init__(
        self,
        runner: LoopThread,
        limit: int,
        send: Callable[..., Awaitable[Any]],
        send_batch: Callable[[List[Tuple[Any, ...]], Callable[[BaseException], None]], int],
    ) -> None:
        if limit < 1:
            raise ValueError("the outbox limit must be at least 1")
        self._runner = runner
        self._limit = limit
        self._send = send
        self._send_batch = send_batch
        self._entries: Deque[Entry] = collections.deque()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._scheduled = False  # a drain runs or is about to (changed under _lock, or by the drain alone)
        self._waiting_for_room = 0
        #: the first failure of a call nobody waited for (raised by the client's next call, then cleared)
        self.failure: Optional[BaseException] = None
        self._closed = False  # the user closed the client: what its close makes fail is no news

    def close(self) -> None:
        """The user closes the client: calls still queued fail with the connection, quietly."""
        self._closed = True

    def __len__(self) -> int:
        return len(self._entries)

    def post_send(self, args: Tuple[Any, ...], timeout: float) -> None:
        """Queue ``send(destination, body, headers, content_type, transaction)``, nobody waiting for it."""
        entries = self._entries
        if len(entries) >= self._limit:
            self._wait_for_room(timeout)
        entries.append((None, args, _NO_KWARGS, None, 0.0))
        if not self._scheduled:
            self._schedule()

    def put(
        self,
        call: Callable[..., Awaitable[Any]],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        waiter: Optional[concurrent.futures.Future[Any]],
        timeout: float,
    ) -> None:
        """Queue ``call(*args, **kwargs)``; ``waiter`` (if any) gets its result or exception. A call
        waited for runs in a task of its own once its turn comes: the next entries go as soon as its
        frame is written. Its ``timeout`` keyword, if it takes one, counts from now: when the call
        starts, it gets what is left (none left: :class:`CallTimeout`, the call never runs)."""
        entries = self._entries
        deadline = time.monotonic() + timeout
        if len(entries) >= self._limit:
            self._wait_for_room(timeout)
        entries.append((call, args, kwargs, waiter, deadline))
        if not self._scheduled:
            self._schedule()

    def _wait_for_room(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            self._waiting_for_room += 1
            try:
                while len(self._entries) > self._limit // 2:  # then half a queue goes in without a wait
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"the connection did not take the call within {timeout} s")
                    self._room.wait(min(left, 0.05))  # (a notify between our check and the wait is not lost)
            finally:
                self._waiting_for_room -= 1

    def _schedule(self) -> None:
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._runner.loop.call_soon_threadsafe(self._start)
        except RuntimeError:  # the loop is closed: nothing will run it
            self._entries.clear()
            raise ConnectionClosedLater() from None

    def _start(self) -> None:
        self._runner.loop.create_task(self._drain())

    async def _drain(self) -> None:
        entries, send, send_batch, failed = self._entries, self._send, self._send_batch, self._failed
        while True:
            while entries:
                call, args, kwargs, waiter, deadline = entries.popleft()
                if call is None:  # the everyday SEND: the run of them that waits goes out in one write
                    batch, size = [args], len(args[1])
                    while entries and size < _BATCH_BYTES and entries[0][0] is None:
                        args = entries.popleft()[1]
                        batch.append(args)
                        size += len(args[1])
                    try:
                        done = send_batch(batch, failed)
                    except Exception as exc:  # (a bug: the drain must go on)
                        done = len(batch)
                        failed(exc)
                    for args in batch[done:]:  # what must wait, one by one
                        try:
                            await send(args[0], args[1], args[2], content_type=args[3], transaction=args[4])
                        except asyncio.CancelledError:
                            raise
                        except BaseException as exc:
                            failed(exc)
                if self._waiting_for_room and len(entries) <= self._limit // 2:
                    with self._lock:  # (once half is taken: not once per entry while callers wait)
                        self._room.notify_all()
                if call is None:
                    continue
                if waiter is not None:
                    if waiter.set_running_or_notify_cancel():
                        await self._start_waited(call, args, kwargs, waiter, deadline)
                    # (else its caller stopped waiting before it ran: it never runs, the caller said so)
                    continue
                try:
                    result = await call(*args, **kwargs)
                except asyncio.CancelledError:
                    if waiter is not None:
                        waiter.cancel()
                    raise
                except BaseException as exc:
                    if waiter is not None:
                        waiter.set_exception(exc)
                    else:
                        self._failed(exc)
                else:
                    if waiter is not None:
                        waiter.set_result(result)
            # empty: a put from now on schedules a new drain, unless an entry came just before the
            # flag was cleared (its putter saw it set): then this drain goes on, if no other started
            self._scheduled = False
            if not entries:
                return
            with self._lock:
                if self._scheduled:
                    return
                self._scheduled = True

    async def _start_waited(
        self,
        call: Callable[..., Awaitable[Any]],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        waiter: concurrent.futures.Future[Any],
        deadline: float,
    ) -> None:
        # a call somebody waits for: written in turn, its receipt awaited beside the queue
        if "timeout" in kwargs:
            left = deadline - time.monotonic()
            if left <= 0:
                waiter.set_exception(CallTimeout(written=False))
                return
            kwargs = dict(kwargs, timeout=left)  # the caller's deadline, not a new one from now
        coro: Coroutine[Any, Any, Any] = call(*args, **kwargs)  # type: ignore[assignment]
        try:
            task, written = await aio.start_call(coro)
        except asyncio.CancelledError:
            waiter.set_exception(aio.ConnectionClosedError("the client was closed"))
            raise
        except BaseException as exc:
            waiter.set_exception(exc)
            return
        keep(task).add_done_callback(functools.partial(_hand_over, waiter, written))

    def _failed(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            if not (self._closed and isinstance(exc, aio.ConnectionClosedError)):
                log.warning("a call that nobody waited for failed: %r", exc)


def _hand_over(waiter: concurrent.futures.Future[Any], written: bool, task: asyncio.Task[Any]) -> None:
    """(On the loop) what a call's task came to, to the thread waiting for it."""
    if task.cancelled():
        waiter.set_exception(aio.ConnectionClosedError("the client was closed"))
        return
    exc = task.exception()
    if exc is None:
        waiter.set_result(task.result())
    elif isinstance(exc, _TIMEOUTS):
        error = CallTimeout(written=written)
        error.__cause__ = exc
        waiter.set_exception(error)
    else:
        waiter.set_exception(exc)


class CallTimeout(TimeoutError):
    """Internal: a call's own deadline passed on the loop; ``written``: whether its frame had gone out
    (the client raises a :class:`TimeoutError` that says which)."""

    def __init__(self, written: bool) -> None:
        super().__init__("the frame was written; its answer did not come" if written else "the frame was not sent")
        self.written = written


class ConnectionClosedLater(RuntimeError):
    """Internal: the loop is gone (the client raises its own ConnectionClosedError instead)."""
