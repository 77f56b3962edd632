"""The ``stomp`` format on a broker: Structured Streaming readers and the writers (PySpark 4.0+; the
readers are written for 4.2's API, :mod:`._stream_compat` and :class:`_FollowsTheQuery` bridge 4.0/4.1).

:class:`StreamQueueReader` (``consume=stream``): offsets ``{destination: next
offset}`` in the checkpoint; the driver plans ``[start, end)`` per
destination under the trigger's limit and one task per destination reads it
(see :func:`._stream_read.read_range`). A batch replayed after a failure reads
the same messages: with a checkpointed file sink, every message lands once.
``startingOffsets`` latest or timestamp=T is resolved by a first batch that
reads nothing, so the offset log holds where the query began.
``maxBytesPerTrigger`` has the driver read a planned range to measure it.
Offsets the stream no longer holds fail the query (``failOnDataLoss``, see
:func:`._stream_read.checked_end`). :class:`StreamRangeReader` reads a range
of the same streams as a batch (``endingOffsets``).

:class:`AckQueueReader` (``consume=ack``): one connection on the driver
receives; a batch carries its messages to the tasks; Spark's ``commit(end)``
of the batch acknowledges them. Spark commits a batch to its source only when
it plans the next one, so after a batch with messages the reader asks for one
more, empty batch (its offset's ``tick`` moves): that commits the last
messages while the query idles. A query stopped or killed before that
acknowledges nothing more: the broker redelivers (at-least-once). With
``trigger(availableNow=True)`` the reader stops taking messages at the first
poll that finds none, and the query ends once that last batch is acknowledged.

Driver-side objects connect on first use (Spark also builds a reader just to
plan, and pickles it to the tasks).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from ._stream_compat import (
    ADMISSION_CONTROL,
    PYSPARK_VERSION,
    STREAM_ARROW_WRITER,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from ._stream_options import SinkOptions, SourceOptions, sink_options, source_options
from ._worker import freeze_worker_heap


def _limits(limit: ReadLimit, opts: SourceOptions) -> Tuple[int, int]:
    """(messages, bytes) a trigger may take; 0 is no limit. ``ReadAllAvailable`` lifts the options' limits."""
    if isinstance(limit, ReadAllAvailable):
        return 0, 0
    if isinstance(limit, ReadMaxRows):
        return limit.max_rows, opts.max_bytes
    if isinstance(limit, ReadMaxBytes):
        return opts.max_messages, limit.max_bytes
    return opts.max_messages, opts.max_bytes


def _default_limit(opts: SourceOptions) -> ReadLimit:
    if opts.max_messages:
        return ReadMaxRows(opts.max_messages)
    if opts.max_bytes:
        return ReadMaxBytes(opts.max_bytes)
    return ReadAllAvailable()


class RangePartition(InputPartition):
    """Offsets ``[start, end)`` of one stream queue."""

    def __init__(self, destination: str, start: int, end: int) -> None:
        self.destination = destination
        self.start = start
        self.end = end


class _FollowsTheQuery:
    """Where the next batch starts, for PySpark 4.0 and 4.1, whose ``latestOffset()`` takes no start.

    As PySpark's own wrapper of simple readers does: the start is the initial offset on a new
    query, the end of the last batch in the offset log on a restart (Spark plans that batch's
    partitions again when it restarts), then the end of each batch this reader planned.
    """

    _initial: Optional[Dict[str, Any]] = None
    _next: Optional[Dict[str, Any]] = None

    def _first_offset(self) -> Dict[str, Any]:
        raise NotImplementedError

    def initialOffset(self) -> Dict[str, Any]:
        if self._initial is None:  # Spark may ask after latestOffset(): the same answer both times
            self._initial = self._first_offset()
        return self._initial

    def _start(self, start: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        if start is not None:
            return start
        return self._next if self._next is not None else self.initialOffset()

    def _planned(self, end: Dict[str, Any]) -> Dict[str, Any]:
        self._next = end
        return end

    def _replanned(self, end: Dict[str, Any]) -> None:
        if self._next is None:
            self._next = end


class StreamQueueReader(_FollowsTheQuery, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Any) -> None:
        self.opts = source_options(options)
        self._target: Optional[Dict[str, int]] = None  # availableNow: where each stream ended at the start
        self._proven: Dict[str, int] = {}  # an end a probe found, past the limit it was asked for
        self._latest: Dict[str, int] = {}  # each stream's end as the last probe found it (reportLatestOffset)
        self._last_batch = time.monotonic()  # when the last batch with messages was planned (maxTriggerDelay)

    def __getstate__(self) -> Dict[str, Any]:
        return {"opts": self.opts, "_target": None, "_proven": {}, "_latest": {}, "_last_batch": 0.0}

    def _first_offset(self) -> Dict[str, Any]:
        # earliest, an offset or a JSON object: offsets now. latest and timestamp=T stay names here: the
        # first batch resolves them (see latestOffset), so the offset log keeps where the query began
        from ._stream_read import starting_offset

        return {dest: starting_offset(self.opts, dest) for dest in self.opts.destinations}

    def _end(self, dest: str, start: int, max_messages: int) -> Tuple[int, int]:
        """(begin, end) of the next range of ``dest``: begin is ``start`` unless offsets from there on are
        gone and failOnDataLoss=false (see checked_end)."""
        from ._stream_read import checked_end

        proven = self._proven.get(dest, 0)
        if max_messages and proven >= start + max_messages:
            return start, start + max_messages  # a backlog already proven: no probe (a task checks what it reads)
        target = self._target.get(dest) if self._target is not None else None
        if target is not None and start <= target <= proven:
            # availableNow: the end it reads to was proven at its start, so no batch probes again (the
            # first one included), nor the last, which finds the target reached
            return start, min(target, start + max_messages) if max_messages else target
        begin, end = checked_end(self.opts, dest, start, max_messages)
        self._latest[dest] = end
        if end < begin or end < start:
            self._proven.pop(dest, None)
            return begin, end  # a stream declared again: read from its first offset to its end
        self._proven[dest] = max(proven, end)
        return begin, min(end, begin + max_messages) if max_messages else end

    def _ends(self, start: Dict[str, Any], max_messages: int, max_bytes: int) -> Dict[str, Any]:
        from ._stream_read import end_within_bytes, resolve_start, starting_offset

        unresolved = [d for d in self.opts.destinations if not isinstance(start.get(d), int)]
        if unresolved:
            # a batch of its own that reads nothing: it resolves latest or timestamp=T (or the start of
            # a destination added to the options since the checkpoint began), and Spark writes that
            # offset to the offset log before the batch runs: a query stopped or killed before its first
            # commit starts again from the same offsets, not from a later "latest"
            resolved = {d: resolve_start(self.opts, d, start.get(d, starting_offset(self.opts, d))) for d in unresolved}
            return {**start, **resolved}
        ends = {}
        begins = dict(start)  # past start where offsets are gone (failOnDataLoss=false)
        for dest in self.opts.destinations:
            begins[dest], ends[dest] = self._end(dest, start[dest], max_messages)
            if ends[dest] < start[dest]:
                begins[dest] = ends[dest]  # (a stream declared again: its whole range is one batch)
            elif self._target is not None:
                ends[dest] = min(ends[dest], max(begins[dest], self._target.get(dest, begins[dest])))
        start = begins
        total = sum(ends[d] - start[d] for d in ends)
        if max_messages and total > max_messages:  # share the limit in proportion to each backlog
            left = max_messages
            for dest in ends:
                share = min(left, (ends[dest] - start[dest]) * max_messages // total)
                ends[dest], left = start[dest] + share, left - share
            first = next(d for d in ends if ends[d] < start[d] + max_messages)
            ends[first] += left
        if max_bytes:  # each destination in turn gets an even share of what the ones before left
            left = max_bytes
            for i, dest in enumerate(ends):
                share = max(1, left // (len(ends) - i))
                ends[dest], used = end_within_bytes(self.opts, dest, start[dest], ends[dest], share)
                left = max(0, left - used)
        return {**start, **ends}

    def reportLatestOffset(self) -> Optional[Dict[str, Any]]:
        # each stream's end as the driver's last probe found it: Spark shows it as latestOffset in the
        # query's progress, beside endOffset (PySpark 4.2+; the lag is latest minus end)
        return dict(self._latest) or None

    def latestOffset(self, start: Optional[Dict[str, Any]] = None, limit: Optional[ReadLimit] = None) -> Dict[str, Any]:
        # PySpark 4.0/4.1 call latestOffset() with no arguments (see _FollowsTheQuery)
        limit = self.getDefaultReadLimit() if limit is None else limit
        begin = self._start(start)
        end = self._ends(begin, *_limits(limit, self.opts))
        return self._planned(self._at_least(begin, end))

    def _at_least(self, start: Dict[str, Any], end: Dict[str, Any]) -> Dict[str, Any]:
        """minOffsetsPerTrigger: no batch while the streams hold fewer new offsets, unless maxTriggerDelay
        passed since the last batch, or the trigger is availableNow (which wants what there is)."""
        least = self.opts.min_messages
        if not least or self._target is not None:
            return end
        if any(not isinstance(start.get(d), int) for d in self.opts.destinations):
            return end  # the batch that resolves latest or timestamp=T
        new = sum(max(0, end[d] - start[d]) for d in self.opts.destinations)
        if not new:
            return end
        if new < least and time.monotonic() - self._last_batch < self.opts.max_trigger_delay:
            return start
        self._last_batch = time.monotonic()
        return end

    def getDefaultReadLimit(self) -> ReadLimit:
        return _default_limit(self.opts)

    def prepareForTriggerAvailableNow(self) -> None:
        from ._stream_read import find_end

        self._target = {dest: find_end(self.opts, dest, 0, 0, settle=True) for dest in self.opts.destinations}
        self._proven.update(self._target)
        self._latest.update(self._target)

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        # one task per destination, or minPartitions tasks each reading a piece of its range (each
        # subscribes at its own first offset: a stream is read at several places at once). A start that
        # is not an offset yet (latest, timestamp=T) is a batch that only resolved it: nothing to read.
        self._replanned(end)
        out: List[InputPartition] = []
        for dest in self.opts.destinations:
            first, last = start.get(dest), end.get(dest)
            if not isinstance(first, int) or not isinstance(last, int):
                continue
            if last < first:  # a stream declared again, failOnDataLoss=false: from its first offset
                first = 0
            pieces = max(1, min(self.opts.min_partitions, last - first))
            bounds = [first + (last - first) * i // pieces for i in range(pieces + 1)]
            out.extend(RangePartition(dest, a, b) for a, b in zip(bounds, bounds[1:]) if b > a)
        return out

    def read(self, partition: Any) -> Iterator[Any]:
        from ._stream_read import read_range

        freeze_worker_heap()
        yield from read_range(self.opts, partition.destination, partition.start, partition.end)


class StreamRangeReader(DataSourceReader):
    """``spark.read.format("stomp")`` with ``consume=stream`` and ``endingOffsets``: each stream's offsets
    ``[startingOffsets, endingOffsets)``, read once by tasks as a streaming batch reads them (an end past
    the stream's end now stops there; ``failOnDataLoss`` as for streaming)."""

    def __init__(self, options: Any) -> None:
        self.opts = checked_source_options(options)

    def partitions(self) -> Sequence[InputPartition]:
        from ._stream_read import checked_end, resolve_start, starting_offset

        opts = self.opts
        out: List[InputPartition] = []
        for dest in opts.destinations:
            start = resolve_start(opts, dest, starting_offset(opts, dest))
            begin, latest = checked_end(opts, dest, start, 0)
            if latest < begin:
                begin = 0  # a stream declared again (failOnDataLoss=false): from its first offset
            ending = opts.ending
            wanted = ending[dest] if isinstance(ending, dict) else ending
            end = latest if wanted == "latest" else min(int(wanted), latest)
            pieces = max(1, min(opts.min_partitions, end - begin))
            bounds = [begin + (end - begin) * i // pieces for i in range(pieces + 1)]
            out.extend(RangePartition(dest, a, b) for a, b in zip(bounds, bounds[1:]) if b > a)
        return out or [RangePartition(opts.destinations[0], 0, 0)]  # Spark wants at least one

    def read(self, partition: Any) -> Iterator[Any]:
        from ._stream_read import read_range

        freeze_worker_heap()
        yield from read_range(self.opts, partition.destination, partition.start, partition.end)


class HeldPartition(InputPartition):
    """Messages the driver received for one destination, as Arrow IPC bytes."""

    def __init__(self, destination: str, data: bytes) -> None:
        self.destination = destination
        self.data = data


class _Held:
    """A planned ``consume=ack`` batch: its offsets, its rows, the messages to acknowledge."""

    def __init__(self, start: Dict[str, int], end: Dict[str, int], rows: List[Any], messages: List[Any]) -> None:
        self.start, self.end, self.rows, self.messages = start, end, rows, messages


def _position(offset: Dict[str, int]) -> Tuple[int, int]:
    return offset["received"], offset["tick"]


class AckQueueReader(_FollowsTheQuery, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Any) -> None:
        self.opts = source_options(options)
        self._consumer: Any = None
        self._held: List[_Held] = []
        self._available_now = False  # trigger(availableNow=True): stop at the first poll that finds nothing
        self._drained = False

    def __getstate__(self) -> Dict[str, Any]:
        return {"opts": self.opts, "_consumer": None, "_held": [], "_available_now": False, "_drained": False}

    def prepareForTriggerAvailableNow(self) -> None:
        # A queue's depth cannot be asked over STOMP, and nothing on a message says when it was queued,
        # so "what is available now" is what the broker delivers until it has nothing more for one
        # pollTimeout: after that first empty poll no message is taken (what the broker sent meanwhile
        # goes back to the queue when the query stops), and the query ends once the last batch is
        # committed (acknowledged). Messages published while it reads are read too.
        self._available_now = True

    def _receiver(self) -> Any:
        if self._consumer is None:
            from ._stream_read import QueueConsumer

            self._consumer = QueueConsumer(self.opts)
        return self._consumer

    def _first_offset(self) -> Dict[str, Any]:
        self._receiver()  # fail now when the broker or a destination is wrong
        return {"received": 0, "tick": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return _default_limit(self.opts)

    def latestOffset(self, start: Optional[Dict[str, Any]] = None, limit: Optional[ReadLimit] = None) -> Dict[str, Any]:
        # PySpark 4.0/4.1 call latestOffset() with no arguments (see _FollowsTheQuery)
        limit = self.getDefaultReadLimit() if limit is None else limit
        return self._planned(self._latest(self._start(start), limit))

    def _latest(self, start: Dict[str, Any], limit: ReadLimit) -> Dict[str, Any]:
        from ..codec import IMPLEMENTATION
        from ._stream_schema import batch_to_bytes, messages_to_batch

        for held in self._held:
            if held.start == start:
                return held.end  # asked again for the same batch
        max_messages, max_bytes = _limits(limit, self.opts)
        received = {} if self._drained else self._receiver().poll(max_messages, max_bytes)
        count = sum(len(messages) for messages in received.values())
        self._drained = self._available_now and not count
        if count:
            end = {"received": start["received"] + count, "tick": start["tick"]}
            rows = [
                HeldPartition(dest, batch_to_bytes(messages_to_batch(dest, messages, None, IMPLEMENTATION)))
                for dest, messages in received.items()
                if messages
            ]
            self._held.append(_Held(start, end, rows, [m for messages in received.values() for m in messages]))
            return end
        if any(held.messages and _position(held.end) <= _position(start) for held in self._held):
            # an empty batch, so that Spark commits the one before (and its messages are acknowledged)
            end = {"received": start["received"], "tick": start["tick"] + 1}
            self._held.append(_Held(start, end, [], []))
            return end
        return start

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]) -> Sequence[InputPartition]:
        self._replanned(end)
        for held in self._held:
            if held.start == start and held.end == end:
                return held.rows
        # a batch planned by an earlier run of the query: its messages were never acknowledged, so the
        # broker has redelivered them into later batches
        return []

    def read(self, partition: Any) -> Iterator[Any]:
        from ._stream_schema import bytes_to_batches

        freeze_worker_heap()
        yield from bytes_to_batches(partition.data)

    def commit(self, end: Dict[str, int]) -> None:
        done = [held for held in self._held if _position(held.end) <= _position(end)]
        self._held = [held for held in self._held if _position(held.end) > _position(end)]
        messages = [m for held in done for m in held.messages]
        if messages:
            stale = self._receiver().ack(messages)
            if stale:
                print(
                    f"fastframe.spark: {stale} committed messages were received on a connection that has ended; "
                    "the broker redelivers them",
                    file=sys.stderr,
                )

    def stop(self) -> None:
        pending = sum(len(held.messages) for held in self._held)
        if pending:  # said once, where the driver's log shows it: these come again (at-least-once)
            print(
                f"fastframe.spark: the query stopped with {pending} received messages not acknowledged (Spark "
                "commits a batch to its source when it plans the next one): the broker redelivers them, and "
                "those of a batch already written are written again",
                file=sys.stderr,
            )
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def checked_source_options(options: Any) -> SourceOptions:
    """The source's options, checked against each other and against the PySpark that runs."""
    opts = source_options(options)
    if (
        not ADMISSION_CONTROL
        and opts.consume == "stream"
        and (opts.max_messages or opts.max_bytes or opts.min_messages)
    ):
        name = "maxMessagesPerTrigger" if opts.max_messages else "maxBytesPerTrigger"
        name = "minOffsetsPerTrigger" if opts.min_messages else name
        raise ValueError(
            f"option {name} with consume=stream needs PySpark 4.2 or later (admission control for Python "
            f"streaming sources), and PySpark {PYSPARK_VERSION} runs here: remove the option (each batch then "
            "reads what the streams hold) or upgrade PySpark"
        )
    return opts


def stream_reader(options: Any) -> DataSourceStreamReader:
    """The reader ``consume`` asks for."""
    opts = checked_source_options(options)
    if opts.ending is not None:
        raise ValueError("option endingOffsets is for a batch read, spark.read.format('stomp'): a stream reads on")
    return StreamQueueReader(options) if opts.consume == "stream" else AckQueueReader(options)


# --------------------------------------------------------------------------- the sink


class SentMessage(WriterCommitMessage):
    def __init__(self, messages: int, size: int) -> None:
        self.messages = messages
        self.size = size


def _send(opts: SinkOptions, iterator: Iterator[Any]) -> SentMessage:
    from ._stream_write import send_batches

    freeze_worker_heap()
    totals = send_batches(opts, iterator)
    return SentMessage(totals["messages"], totals["bytes"])


class BrokerStreamWriter(STREAM_ARROW_WRITER or DataSourceStreamWriter):  # type: ignore[misc]
    """``df.writeStream.format("stomp")`` with a broker: every SEND confirmed before the task's commit message.

    PySpark 4.2+ hands it Arrow batches; 4.0 and 4.1 without ``DataSourceStreamArrowWriter`` hand it rows."""

    def __init__(self, options: Any, schema: Any) -> None:
        self.opts = sink_options(options, schema.fieldNames())

    def write(self, iterator: Iterator[Any]) -> SentMessage:
        if STREAM_ARROW_WRITER is None:
            from ._stream_write import rows_to_batches

            iterator = rows_to_batches(iterator)
        return _send(self.opts, iterator)

    def commit(self, messages: List[Any], batchId: int) -> None:
        pass  # the broker has every message already (the tasks waited for the receipts)

    def abort(self, messages: List[Any], batchId: int) -> None:
        pass  # what failed tasks sent stays sent; Spark runs the batch again (at-least-once)


class BrokerBatchWriter(DataSourceArrowWriter):
    """``df.write.format("stomp")`` with a broker."""

    def __init__(self, options: Any, schema: Any) -> None:
        self.opts = sink_options(options, schema.fieldNames())

    def write(self, iterator: Iterator[Any]) -> SentMessage:
        return _send(self.opts, iterator)

    def commit(self, messages: List[Any]) -> None:
        pass

    def abort(self, messages: List[Any]) -> None:
        pass
