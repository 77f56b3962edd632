"""Reading a broker: RabbitMQ stream queues by offset, and any queue with acknowledgements.

Runs without Spark (the source in :mod:`._stream_source` and the tests call it).

``consume=stream``: a stream queue keeps its messages, numbered 0, 1, 2, ...
(``x-stream-offset``), and a SUBSCRIBE with ``x-stream-offset`` replays from
any point. The driver finds where a stream ends (:func:`find_end`: the first
message of its last chunk, then what follows it), and a task reads exactly the
offsets ``[start, end)`` of a batch (:func:`read_range`), however often Spark
replays it.

``consume=ack``: a queue forgets a message once it is acknowledged, and an
acknowledgement must go on the connection that received it. So one
connection on the driver receives (:class:`QueueConsumer`), the batches carry
the messages to the tasks, and they are acknowledged once Spark commits the
batch that holds them.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, Tuple, Union

from .. import aio
from ..codec import IMPLEMENTATION
from ._stream_client import BrokerConnection, BrokerError, UndecodableError, server_reason
from ._stream_options import SourceOptions, stream_queue
from ._stream_schema import columns_to_batch, messages_to_batch, stream_arrow_schema
from ._worker import collector_paused

#: How long the end of a stream's last chunk may keep the next message waiting.
CHUNK_GAP = 0.05
#: A task's connection rests this long after each read while a stream flows (the client's
#: ``coalesce_reads``; 2 ms by default): a task reads for throughput, and a read of 10 ms of RabbitMQ's
#: deliveries (about 400 messages) costs a third less CPU per message than one of 2 ms, in no more time.
TASK_READ_REST = 0.01


def _subscribe_error(exc: aio.ServerError, destination: str, consume: str) -> BrokerError:
    reason = server_reason(exc)
    if "not_found" in reason or "NOT_FOUND" in reason:
        return BrokerError(
            f"destination {destination!r} does not exist on the broker ({reason}); check option destination "
            "(a stream queue must be declared before it is read: SUBSCRIBE to /queue/NAME with "
            "x-queue-type:stream, durable:true, auto-delete:false)"
        )
    if "x-stream-offset" in reason or "rabbit_classic_queue" in reason or "quorum" in reason:
        return BrokerError(f"destination {destination!r} is not a stream queue ({reason}): read it with consume=ack")
    if "x-queue-type" in reason and "stream" in reason:
        return BrokerError(f"destination {destination!r} is a stream queue ({reason}): read it with consume=stream")
    return BrokerError(f"subscribing to {destination!r} failed: {reason} (check option destination)")


def check_rabbitmq(broker: BrokerConnection) -> None:
    server = broker.server
    # RabbitMQ, or fastframe's in-memory broker, which emulates RabbitMQ's stream queues
    if not server.lower().startswith(("rabbitmq", "fastframe/")):
        raise BrokerError(
            f"consume=stream reads RabbitMQ stream queues, but the broker at {broker.connection.describe()} is "
            f"{server or 'another broker'}: use consume=ack"
        )


def _offset(message: Any, destination: str) -> int:
    return _stream_offset(message.get("x-stream-offset"), destination)


def _row_offset(columns: Any, row: int, destination: str) -> int:
    return _stream_offset(columns.header(row, "x-stream-offset"), destination)


def _stream_offset(value: Optional[str], destination: str) -> int:
    if value is None:
        raise BrokerError(
            f"a message from {destination!r} has no x-stream-offset header: it is not a RabbitMQ stream queue "
            "(read it with consume=ack)"
        )
    return int(value)


async def _stream_subscription(
    client: Any,
    destination: str,
    spec: str,
    prefetch: int,
    timeout: float,
    extra: Tuple[Tuple[str, str], ...] = (),
    columns: bool = False,
) -> Any:
    queue = stream_queue(destination)
    try:
        return await client.subscribe(
            f"/amq/queue/{queue}",
            ack="client",
            headers={**dict(extra), "x-stream-offset": spec, "prefetch-count": str(prefetch)},
            max_queue=prefetch + 1,
            timeout=timeout,
            columns=columns,
        )
    except aio.ServerError as exc:
        raise _subscribe_error(exc, destination, "stream") from None


# --------------------------------------------------------------------------- consume=stream, on the driver


async def _find_end(
    broker: BrokerConnection,
    destination: str,
    start: int,
    limit: int,
    opts: SourceOptions,
    first_wait: float,
    gap: float = CHUNK_GAP,
    span: float = 0.0,
) -> Optional[int]:
    sub = await _stream_subscription(broker.client, destination, "last", opts.prefetch, opts.connection.timeout)
    try:
        first = await sub.get(timeout=first_wait)
    except asyncio.TimeoutError:
        return None  # an empty stream (or nothing within pollTimeout)
    end = _offset(first, destination) + 1
    unacked = 1
    # the last chunk's messages arrive back to back: take them until a gap (acknowledging gives credit),
    # for at most pollTimeout: a producer that never pauses would keep the probe reading what it publishes
    loop = asyncio.get_running_loop()
    stop = loop.time() + (span or opts.poll_timeout)
    while not (limit and end >= start + limit) and loop.time() < stop:
        try:
            message = await sub.get(timeout=min(gap, max(0.001, stop - loop.time())))
        except asyncio.TimeoutError:
            break
        end = max(end, _offset(message, destination) + 1)
        unacked += 1
        if unacked >= opts.prefetch // 2:
            await message.ack()
            unacked = 0
    return end


def find_end(opts: SourceOptions, destination: str, start: int, limit: int, settle: bool = False) -> int:
    """An offset ``end >= start`` such that every offset in ``[start, end)`` exists; with ``limit``, the
    probe stops as soon as ``end`` reaches ``start + limit`` (the caller caps it: what lies past the cap
    is proven too, and saves the next batch a probe).

    The first message of the stream's last chunk proves every offset below it;
    the messages after it arrive back to back and prove the rest. So the
    driver reads at most the last chunk, never the backlog.

    Each probe has a connection of its own, closed without UNSUBSCRIBE: RabbitMQ 3.10 answers a
    stream delivery that crosses an UNSUBSCRIBE with ERROR "Subscription not found", which would
    end a connection kept for the next probe.

    A stream with nothing to deliver within pollTimeout counts as ended at ``start`` (the next trigger
    looks again); ``settle`` waits at least a second for it, where a wrong answer would stay (latest,
    the target of availableNow).
    """
    first_wait = max(opts.poll_timeout, 1.0) if settle else opts.poll_timeout
    wait = first_wait + opts.poll_timeout + opts.connection.timeout * 2
    with BrokerConnection(opts.connection, max_queue=opts.prefetch + 1) as broker:
        check_rabbitmq(broker)
        work = _find_end(broker, destination, start, limit, opts, first_wait)
        end = broker.run(work, wait, f"finding the end of {destination}")
    return start if end is None else max(end, start)


class DataLossError(BrokerError):
    """Offsets a query still has to read are gone from the stream (``failOnDataLoss``)."""


def _span(low: int, high: int) -> str:
    """``offset 5``, or ``offsets 5 to 9`` (both included)."""
    return f"offset {low}" if low == high else f"offsets {low} to {high}"


def data_lost(opts: SourceOptions, destination: str, start: int, first: Optional[int], end: Optional[int]) -> int:
    """Offsets from ``start`` on are gone from ``destination``, which now holds ``[first, end)`` (None: nothing):
    raise :class:`DataLossError` (``failOnDataLoss``, the default), or log the skipped range and return the
    offset to go on from (``failOnDataLoss=false``).

    The message holds for any bounds a caller passes: an empty stream, one that ends before ``start``,
    one that begins past it, and one that still holds ``start`` (nothing skipped; reading goes on there)."""
    if first is None or end is None or end <= first:
        what = f"holds no message, though the query's next offset is {start}: it was deleted and declared again"
        again = 0
    elif end < start:
        what = (
            f"ends before the query's next offset {start} (its last offset is {end - 1}): it was deleted and "
            "declared again (or the checkpoint belongs to another stream)"
        )
        again = first
    elif first > start:
        what = (
            f"now begins at offset {first}, past the query's next offset {start}: retention (x-max-length-bytes, "
            f"x-max-age) removed {_span(start, first - 1)} before they were read"
        )
        again = first
    else:
        what = f"holds {_span(first, end - 1)}, but the query's next offset {start} did not arrive"
        again = start
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"failOnDataLoss: stream {destination!r} {what}; set option failOnDataLoss=false to go on from "
            f"offset {again}"
        )
    print(f"fastframe.spark: data lost (failOnDataLoss=false): stream {destination!r} {what}; going on from "
          f"offset {again}", file=sys.stderr, flush=True)  # fmt: skip
    return again


async def _bounds(
    broker: BrokerConnection, destination: str, start: int, limit: int, opts: SourceOptions, wait: float
) -> Tuple[Optional[int], Optional[int]]:
    end = await _find_end(broker, destination, start, limit, opts, wait)
    if end is None:
        return None, None
    if end < start:
        # an end found before a gap of CHUNK_GAP can fall short of the last chunk's (a busy machine pauses
        # longer): before calling the stream shorter than start, read its last chunk to the end, or on
        # until it reaches start, with gaps of a second allowed
        end = await _find_end(broker, destination, start - 1, 1, opts, wait, gap=1.0, span=opts.connection.timeout)
        if end is None:
            return None, None
    # then the first offset, on a subscription of its own (not unsubscribed: see find_end), after the end's:
    # RabbitMQ sends it a whole chunk, more than it queues, and the client stops reading the socket there
    head = await _stream_subscription(broker.client, destination, "first", 1, opts.connection.timeout)
    try:
        first = _offset(await head.get(timeout=max(wait, 1.0)), destination)
    except asyncio.TimeoutError:
        return None, end
    return first, end


def checked_end(opts: SourceOptions, destination: str, start: int, limit: int) -> Tuple[int, int]:
    """``(begin, end)``: the offsets the next batch of ``destination`` reads, from its committed ``start``,
    as :func:`find_end` finds them, with ``failOnDataLoss`` applied: ``begin`` is ``start``, or where
    reading goes on when offsets from ``start`` on are gone (``end < start``: a stream declared again,
    read from its first offset)."""
    wait = max(opts.poll_timeout, 1.0) + opts.poll_timeout + opts.connection.timeout * 5
    with BrokerConnection(opts.connection, max_queue=opts.prefetch + 1) as broker:
        check_rabbitmq(broker)
        first, end = broker.run(
            _bounds(broker, destination, start, limit, opts, opts.poll_timeout),
            wait,
            f"finding the end of {destination}",
        )
    if end is None and start > 0:
        # nothing within pollTimeout: an empty stream where the query has read, or a slow broker; a
        # second look waits at least a second before calling it lost
        with BrokerConnection(opts.connection, max_queue=opts.prefetch + 1) as broker:
            first, end = broker.run(
                _bounds(broker, destination, start, limit, opts, max(opts.poll_timeout, 1.0)),
                wait,
                f"finding the end of {destination}",
            )
    if end is None:
        if start == 0:
            return start, start
        again = data_lost(opts, destination, start, None, None)
        return again, again
    if end < start or (first is not None and first > start + 1 and start > 0):
        # (a stream spends an offset on each new segment: a first offset one past start loses nothing;
        # offset 0 is "from the beginning", startingOffsets=earliest: the first offset there is)
        again = data_lost(opts, destination, start, first, end)
        return again, end
    return start, max(end, start)


async def _first_offset(broker: BrokerConnection, destination: str, spec: str, opts: SourceOptions) -> Optional[int]:
    sub = await _stream_subscription(broker.client, destination, spec, 1, opts.connection.timeout)
    try:
        return _offset(await sub.get(timeout=max(opts.poll_timeout, 1.0)), destination)
    except asyncio.TimeoutError:
        return None


def starting_offset(opts: SourceOptions, destination: str) -> Union[int, str]:
    """Where ``startingOffsets`` starts a destination: an offset, or ``"latest"`` / ``"timestamp=T"``
    while not resolved against the broker (:func:`resolve_start`)."""
    starting = opts.starting
    if isinstance(starting, dict):
        return int(starting[destination])
    if isinstance(starting, int):
        return starting
    if starting == "earliest":
        return 0  # a stream truncated by retention starts later: a read from 0 begins at its first offset
    return str(starting)


def resolve_start(opts: SourceOptions, destination: str, where: Union[int, str]) -> int:
    """``where`` (from :func:`starting_offset`) as an offset: ``latest`` is the stream's end now;
    ``timestamp=T`` the first message at or after T, else the end."""
    if isinstance(where, int):
        return where
    if where == "latest":
        return find_end(opts, destination, 0, 0, settle=True)
    with BrokerConnection(opts.connection) as broker:
        check_rabbitmq(broker)
        work = _first_offset(broker, destination, where, opts)
        first = broker.run(work, opts.connection.timeout * 2 + 1, f"finding {where} in {destination}")
    return first if first is not None else find_end(opts, destination, 0, 0, settle=True)


# --------------------------------------------------------------------------- consume=stream, in a task


class _Range:
    """The messages at offsets ``[start, end)`` of one stream queue, taken in order on one connection.

    The subscription's credit covers the range and no more: what the broker sent past ``end`` would be
    read for nothing (the next range's messages, up to the whole credit), and DISCONNECT's receipt waits
    behind it. ``columns``: the subscription is columnar (:meth:`take_columns`; a task's read), else
    it gives message objects (:meth:`take`).
    """

    def __init__(
        self,
        opts: SourceOptions,
        broker: BrokerConnection,
        destination: str,
        start: int,
        end: int,
        max_bytes: int = 0,
        columns: bool = False,
    ) -> None:
        self.destination, self.end, self.next = destination, end, start
        self.max_bytes, self.used, self.taken = max_bytes, 0, 0  # max_bytes 0: no byte limit
        self.opts, self.delivered = opts, False
        self.prefetch = max(1, min(opts.prefetch, 65_535, end - start))
        self.unacked = 0
        self.client = broker.client
        # take_columns(): the rows of the last read not taken yet (columns, first row, end row, the
        # offset after them)
        self.span: Optional[Tuple[Any, int, int, int]] = None
        timeout = opts.connection.timeout
        self.sub = broker.run(
            _stream_subscription(
                broker.client, destination, f"offset={start}", self.prefetch, timeout, opts.subscribe_headers, columns
            ),
            timeout + 1,
            f"subscribing to {destination}",
        )

    async def take(self, rows: int) -> Tuple[List[Any], List[int]]:
        """Up to ``rows`` more messages. With a byte limit, the range ends before the first message
        whose body would pass it (``end`` moves there), unless it is the range's first."""
        messages: List[Any] = []
        offsets: List[int] = []
        sub, destination = self.sub, self.destination
        while len(messages) < rows and self.next < self.end:
            # what the socket's reads brought, at once (a wait only when nothing is queued): no
            # coroutine per message
            batch = sub.get_batch(rows - len(messages)) or [await sub.get()]
            got = [_offset(message, destination) for message in batch]
            self._first_delivered(got[0])
            if self.max_bytes or got[0] < self.next or got[-1] >= self.end:
                if await self._take_each(batch, got, messages, offsets):
                    break
                continue
            # the everyday batch: offsets rise through a stream, so the first and last say that every
            # message is in the range
            await self._credit(batch[-1].ack, got[-1], len(batch))
            messages += batch
            offsets += got
            self.taken += len(batch)
            self.next = got[-1] + 1
        return messages, offsets

    def _first_delivered(self, offset: int) -> None:
        """The first message delivered is at ``offset``: past the range's start, that start is gone."""
        if not self.delivered:
            self.delivered = True
            if offset > self.next + 1 and self.next > 0:  # (see checked_end)
                data_lost(self.opts, self.destination, self.next, offset, offset + 1)

    async def _credit(self, acknowledge: Callable[[], Awaitable[None]], offset: int, count: int) -> None:
        """``count`` more messages arrived, the last of them at ``offset`` (``acknowledge()`` acknowledges
        it). The broker sends until ``prefetch`` messages are unacknowledged: up to about offset +
        prefetch - unacked. Acknowledge (ack=client: this one and every one before it) only when that
        falls short of end - 1, then at the last offset whose new credit stays within the range, or at
        half the credit (a range longer than it)."""
        prefetch, end = self.prefetch, self.end
        unacked = self.unacked = self.unacked + count
        if offset + prefetch - unacked < end - 1 and (offset + prefetch >= end - 1 or unacked >= prefetch // 2):
            await acknowledge()
            self.unacked = 0

    async def take_columns(self, rows: int) -> List[Tuple[Any, int, int]]:
        """Up to ``rows`` more messages of the columnar subscription, as ``(columns, first row, end row)``
        pieces in order (see :func:`columns_to_batch`). Each read is cut to the range once, as it
        arrives (:meth:`_next_span`); what a call leaves of it waits for the next call."""
        pieces: List[Tuple[Any, int, int]] = []
        while rows > 0 and self.next < self.end:
            span = self.span or await self._next_span()
            columns, first, end, after = span
            count = min(end - first, rows)
            if count:
                pieces.append((columns, first, first + count))
                rows -= count
                self.taken += count
            if first + count < end:
                self.span = (columns, first + count, end, after)
                self.next = _row_offset(columns, first + count, self.destination)
            else:
                self.span = None
                self.next = max(self.next, after)  # (a read wholly before the range leaves it)
        return pieces

    async def _next_span(self) -> Tuple[Any, int, int, int]:
        """The next read's rows within the range: ``(columns, first row, end row, the offset after
        them)``. Offsets rise through a read, so its first and last rows say whether all of it is in
        the range; a read at the range's start or end is cut where the offsets cross it (a binary
        search, reading a row's header per step)."""
        sub, destination = self.sub, self.destination
        columns = sub.get_nowait() if len(sub) else await sub.get()
        rows = columns.rows
        first, last = _row_offset(columns, 0, destination), _row_offset(columns, rows - 1, destination)
        self._first_delivered(first)
        await self._credit(functools.partial(self._ack_row, columns, rows - 1), last, rows)
        start = 0 if first >= self.next else self._first_row_at(columns, self.next)
        if last < self.end:
            return columns, start, rows, last + 1
        return columns, start, max(start, self._first_row_at(columns, self.end)), self.end

    def _first_row_at(self, columns: Any, offset: int) -> int:
        """The first row of ``columns`` at ``offset`` or later (``columns.rows``: none)."""
        low, high = 0, columns.rows
        while low < high:
            middle = (low + high) // 2
            if _row_offset(columns, middle, self.destination) < offset:
                low = middle + 1
            else:
                high = middle
        return low

    async def _ack_row(self, columns: Any, row: int) -> None:
        """ACK row ``row`` of a read (ack=client: every message before it too), by its ``ack`` header
        (STOMP 1.2) or its ``message-id``."""
        ack_id = columns.header(row, "ack") or columns.header(row, "message-id")
        await self.client.ack(ack_id, subscription=self.sub.id)

    async def _take_each(self, batch: List[Any], got: List[int], messages: List[Any], offsets: List[int]) -> bool:
        """A batch at the range's start, past its end, or under a byte limit, a message at a time; True:
        the range ended within it (the batch's rest is past it)."""
        for message, offset in zip(batch, got):
            await self._credit(message.ack, offset, 1)
            if offset < self.next:
                continue  # the chunk of the first offset starts before it
            if offset >= self.end:
                self.next = self.end
                return True
            if self.max_bytes:
                if self.used + len(message.body) > self.max_bytes and self.taken:
                    self.end = self.next = offset  # this one starts the next batch
                    return True
                self.used += len(message.body)
            self.taken += 1
            messages.append(message)
            offsets.append(offset)
            self.next = offset + 1
        return False


def read_range(opts: SourceOptions, destination: str, start: int, end: int, *, columns: bool = True) -> Iterator[Any]:
    """Arrow batches of the messages at offsets ``[start, end)`` of one stream queue (a task's read).

    The offsets were proven to exist when the batch was planned, so each must
    arrive within ``timeout``; a stream truncated by retention since then
    starts later (the rows say which offsets were read).

    The subscription is columnar (:meth:`fastframe.aio.Client.subscribe` with ``columns=True``): a
    read's messages are one :class:`fastframe.Columns`, laid out in Arrow without a Python object
    each. Its decoder refuses header bytes that are not UTF-8 (RabbitMQ passes them on): then the
    rest of the range is read again as message objects, which make such a message a row that says so.
    ``columns=False`` reads all of it so (the general path, for a benchmark's comparison).
    """
    if end <= start:
        return
    done = [start]  # where the batches yielded so far end
    try:
        yield from _read_batches(opts, destination, start, end, columns, done)
    except UndecodableError:
        yield from _read_batches(opts, destination, done[0], end, False, done)


def _read_batches(
    opts: SourceOptions, destination: str, start: int, end: int, columns: bool, done: List[int]
) -> Iterator[Any]:
    """:func:`read_range` on one connection, columnar or not; ``done[0]`` follows the batches yielded."""
    schema = stream_arrow_schema()
    codec = IMPLEMENTATION
    queue = min(opts.prefetch, end - start) + 1
    with BrokerConnection(opts.connection, max_queue=queue, coalesce_reads=TASK_READ_REST) as broker:
        check_rabbitmq(broker)
        cursor = _Range(opts, broker, destination, start, end, columns=columns)
        rows = opts.max_records_per_batch
        while cursor.next < end:
            what = f"reading offset {cursor.next} of {destination} (the batch ends at {end})"
            with collector_paused():
                try:
                    if columns:
                        pieces = broker.run(cursor.take_columns(rows), opts.connection.timeout, what)
                        batch = columns_to_batch(destination, pieces, cursor.sub.id, codec, schema) if pieces else None
                        del pieces
                        if batch is not None and batch.column("offset").null_count:  # (a read's first and
                            _stream_offset(None, destination)  # last rows were checked, not those between)
                    else:
                        messages, offsets = broker.run(cursor.take(rows), opts.connection.timeout, what)
                        batch = messages_to_batch(destination, messages, offsets, codec, schema) if messages else None
                        # freed by their counts while the collector is off: on again, it finds no pile of
                        # new objects to walk (it counts what was made less what was freed)
                        del messages, offsets
                except BrokerError as exc:
                    if isinstance(exc, (DataLossError, UndecodableError)):
                        raise
                    if _shorter_than(opts, destination, cursor.next):
                        return  # failOnDataLoss=false: what the stream lacks is skipped (and logged)
                    raise
            done[0] = cursor.next
            if batch is not None:
                yield batch
        # no UNSUBSCRIBE (see find_end): DISCONNECT ends the subscription


def _shorter_than(opts: SourceOptions, destination: str, offset: int) -> bool:
    """After a read that got nothing within ``timeout``: whether the stream ends before ``offset`` (deleted and
    declared again since the batch was planned), which :func:`data_lost` reports; False: the error stands."""
    try:
        with BrokerConnection(opts.connection, max_queue=opts.prefetch + 1) as broker:
            wait = max(opts.poll_timeout, 1.0)
            first, end = broker.run(
                _bounds(broker, destination, offset, 0, opts, wait), wait * 2 + opts.connection.timeout * 5, ""
            )
    except BrokerError:
        return False
    if (end is not None and end >= offset) or (end is None and offset == 0):
        return False  # the stream reaches the offset (or is empty, as a new one is): the error stands
    data_lost(opts, destination, offset, first, end)
    return True


def end_within_bytes(opts: SourceOptions, destination: str, start: int, end: int, max_bytes: int) -> Tuple[int, int]:
    """The largest ``stop <= end`` such that the bodies at offsets ``[start, stop)`` hold at most
    ``max_bytes`` bytes (at least one message: a larger first message is a batch of its own), and
    those bodies' size.

    The driver reads the range to measure it (a stream tells no sizes before it delivers), so a
    byte limit costs a second read of each batch.
    """
    if end <= start:
        return end, 0
    with BrokerConnection(opts.connection, max_queue=min(opts.prefetch, end - start) + 1) as broker:
        check_rabbitmq(broker)
        cursor = _Range(opts, broker, destination, start, end, max_bytes)
        while cursor.next < cursor.end:
            what = f"measuring offset {cursor.next} of {destination} (maxBytesPerTrigger)"
            broker.run(cursor.take(opts.max_records_per_batch), opts.connection.timeout, what)
        return cursor.end, cursor.used


# --------------------------------------------------------------------------- consume=ack, on the driver


def _refuse_stream(opts: SourceOptions, destination: str) -> None:
    """consume=ack on a RabbitMQ stream queue reads nothing (a stream consumer without x-stream-offset starts
    at the next message published): refuse it. A SUBSCRIBE with x-stream-offset on a probe connection of its
    own tells: a stream accepts it, any other queue answers ERROR (which ends that connection only)."""
    if not destination.startswith("/amq/queue/"):
        return  # /queue/NAME declares a classic queue: RabbitMQ refuses it for a stream (see _subscribe_error)
    try:
        with BrokerConnection(opts.connection, max_queue=2) as broker:
            work = _stream_subscription(broker.client, destination, "next", 1, opts.connection.timeout)
            broker.run(work, opts.connection.timeout + 1, f"subscribing to {destination}")
    except BrokerError:
        return  # not a stream (or missing: the subscription of consume=ack says so)
    raise BrokerError(
        f"destination {destination!r} is a stream queue: consume=ack would read nothing from it (a stream "
        "keeps its messages and delivers them by offset); read it with consume=stream"
    )


def to_acknowledge(messages: List[Any], cumulative: bool) -> List[Any]:
    """The messages to send an ACK for, so that all of ``messages`` (in the order received, of one
    subscription when ``cumulative``) are acknowledged: the last one for ``ack:client``, else each."""
    return messages[-1:] if cumulative else messages


class QueueConsumer:
    """The driver's one connection for ``consume=ack``: it receives, holds and acknowledges messages.

    Every destination is subscribed with a prefetch (``prefetch-count`` for
    RabbitMQ, ``activemq.prefetchSize`` for ActiveMQ), which bounds what the
    broker sends before acknowledgements. One destination is subscribed with
    ``ack:client``, whose ACK is cumulative: one ACK (with a receipt) per batch
    acknowledges all its messages, as they came in order. Several destinations
    get ``ack:client-individual`` and an ACK per message: RabbitMQ applies a
    ``client`` ACK to every message the connection received before it, of any
    subscription (measured on 3.10; ActiveMQ keeps to the subscription, as
    STOMP 1.2 says), which would acknowledge another destination's messages
    not yet committed.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.cumulative = len(opts.destinations) == 1  # ack:client (see above)
        self.broker = BrokerConnection(opts.connection, max_queue=opts.prefetch + 1)
        self.subscriptions: Dict[str, Any] = {}
        try:
            if self.broker.server.lower().startswith("rabbitmq"):
                for dest in opts.destinations:
                    _refuse_stream(opts, dest)
            for dest in opts.destinations:
                self.subscriptions[dest] = self.broker.run(self._subscribe(dest), opts.connection.timeout + 1, "")
        except BaseException:
            self.broker.abort()
            raise

    async def _subscribe(self, destination: str) -> Any:
        prefetch = str(self.opts.prefetch)
        try:
            return await self.broker.client.subscribe(
                destination,
                ack="client" if self.cumulative else "client-individual",
                headers={
                    **dict(self.opts.subscribe_headers),
                    "prefetch-count": prefetch,
                    "activemq.prefetchSize": prefetch,
                },
                max_queue=self.opts.prefetch + 1,
                timeout=self.opts.connection.timeout,
            )
        except aio.ServerError as exc:
            raise _subscribe_error(exc, destination, "ack") from None

    async def _lost(self) -> None:
        """A connection that ended is an error: a batch never ends quietly because nothing more came."""
        client = self.broker.client
        if not client.is_connected:
            cause = await asyncio.wait_for(client.wait_closed(), self.opts.connection.timeout)
            undecodable = "undecodable" in str(cause)
            raise BrokerError(
                f"receiving on {self.opts.connection.describe()}: the connection ended: {cause or 'closed'} "
                + (
                    "(a message the codec refuses, e.g. one past a limit or with a malformed header line, ends "
                    "the connection and stays at the head of the queue, with what came before it "
                    "unacknowledged: remove or fix it at the broker)"
                    if undecodable
                    else "(what was received and not acknowledged goes back to the queue; Spark retries the batch)"
                )
            )

    async def _poll(self, max_messages: int, max_bytes: int) -> Dict[str, List[Any]]:
        subs = self.subscriptions
        deadline = time.monotonic() + self.opts.poll_timeout
        while not any(len(sub) for sub in subs.values()) and time.monotonic() < deadline:
            await self._lost()
            await asyncio.sleep(0.005)  # the loop reads the sockets meanwhile
        await asyncio.sleep(0)
        if not any(len(sub) for sub in subs.values()):
            await self._lost()
        out: Dict[str, List[Any]] = {dest: [] for dest in subs}
        count = size = 0
        progress = True
        while progress:
            progress = False
            for dest, sub in subs.items():  # round robin, so no destination starves the others
                if not len(sub) or (max_messages and count >= max_messages) or (max_bytes and size >= max_bytes):
                    continue
                message = await sub.get()
                if message.get("x-stream-offset") is not None:
                    raise BrokerError(f"destination {dest!r} is a stream queue: read it with consume=stream")
                out[dest].append(message)
                count += 1
                size += len(message.body)
                progress = True
        return out

    def poll(self, max_messages: int, max_bytes: int) -> Dict[str, List[Any]]:
        """What arrived, by destination, up to the limits (0: none); waits at most ``pollTimeout`` for a first one."""
        wait = self.opts.poll_timeout + self.opts.connection.timeout
        return self.broker.run(self._poll(max_messages, max_bytes), wait, "receiving")

    async def _ack(self, messages: List[Any]) -> int:
        stale = 0
        settled = to_acknowledge(messages, self.cumulative)
        for i, message in enumerate(settled):
            try:
                await message.ack(receipt=i == len(settled) - 1, timeout=self.opts.connection.timeout)
            except aio.StaleMessageError:
                # received on a connection that is gone: the broker redelivers it (cumulative: all of
                # them, received on that connection or an earlier one)
                stale += len(messages) if self.cumulative else 1
        return stale

    def ack(self, messages: List[Any]) -> int:
        """Acknowledge ``messages``, in the order received (a receipt confirms the last, so all); returns how
        many could not be."""
        if not messages:
            return 0
        return self.broker.run(self._ack(messages), self.opts.connection.timeout + 1, "acknowledging")

    def close(self) -> None:
        """Close without DISCONNECT's wait: what was not acknowledged goes back to the queue."""
        self.broker.abort()
