"""RabbitMQ stream queues, emulated with RabbitMQ's STOMP semantics (no I/O): see :class:`Streams`.

A stream is an append-only log: every message gets the next offset (0, 1, 2, ...), stays after it is
read, and every consumer reads the whole log on its own from where its SUBSCRIBE said
(``x-stream-offset``). What RabbitMQ 3.10.8 does over STOMP, measured with raw frames
(``/work/shared/notes/streams-and-spark.md`` and the server guide's "Streams" section):

* a SUBSCRIBE to ``/queue/NAME`` with ``x-queue-type:stream`` declares it (``durable:false``,
  ``auto-delete:true`` or ``exclusive:true`` are ``precondition_failed``); a SUBSCRIBE to
  ``/amq/queue/NAME`` reads an existing one (``not_found`` before it exists); a consumer needs a
  ``prefetch-count`` and ``ack:client`` or ``client-individual`` (``ack:auto``: the channel dies), and a
  NACK ends the connection;
* a SEND to ``/amq/queue/NAME`` appends; a SEND to ``/queue/NAME`` declares a classic queue of that name,
  which a stream refuses (``precondition_failed``), except on the connection that declared the stream
  (RabbitMQ's adapter remembers the queues it declared per connection and does not declare them again);
* messages are written in chunks (here: the SENDs of one read of one connection); a consumer with
  credit gets a whole chunk, and ``x-stream-offset:last`` starts at the last chunk's first message;
* retention (``x-max-length-bytes``, ``x-max-age``) removes whole segments (``x-stream-max-segment-size-
  bytes``, 500 MB by default), the oldest first and never the one being written, when a new segment
  starts, as RabbitMQ's osiris does.

Sizes count what the broker holds for a message (:func:`fastframe.broker._core.held_size`, the body and
the headers), not RabbitMQ's bytes on disk; offsets are contiguous (RabbitMQ spends one on each new
segment). Time enters through ``now`` (seconds since the epoch), as the core's callers pass it.
"""

from __future__ import annotations

import collections
import re
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

__all__ = ["Streams", "StreamLog", "StreamCursor", "DEFAULT_SEGMENT_BYTES", "AMQ_QUEUE", "parse_age"]

#: RabbitMQ's default ``x-stream-max-segment-size-bytes``.
DEFAULT_SEGMENT_BYTES = 500_000_000
#: The destination prefix that names an existing queue without declaring it.
AMQ_QUEUE = "/amq/queue/"
_QUEUE = "/queue/"
#: The queue arguments a declaration takes, and RabbitMQ's AMQP type name of each (its error texts say it).
_ARGUMENTS = {
    "x-queue-type": "longstr",
    "x-max-length-bytes": "long",
    "x-max-age": "longstr",
    "x-stream-max-segment-size-bytes": "long",
}
_INTEGER = re.compile(r"-?[0-9]+\Z")
_AGE = re.compile(r"([0-9]+)([YMDhms])\Z")
_AGE_UNITS = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}
#: An error: (kind of :data:`fastframe.broker.ERRORS`, its arguments).
Refusal = Tuple[str, Tuple[Any, ...]]


def parse_age(value: str) -> Optional[int]:
    """``x-max-age`` in seconds (``7D``, ``12h``, ``30s``; Y, M, D, h, m, s as RabbitMQ), ``None`` if malformed."""
    match = _AGE.match(value)
    if match is None:
        return None
    return int(match.group(1)) * _AGE_UNITS[match.group(2)]


class _Entry:
    """One message of a log: what every delivery of it shares, when it was written, its chunk."""

    __slots__ = ("message", "timestamp", "chunk", "size")

    def __init__(self, message: Any, timestamp: float, chunk: int, size: int) -> None:
        self.message = message
        self.timestamp = timestamp
        self.chunk = chunk
        self.size = size


class _Segment:
    __slots__ = ("count", "size", "newest")

    def __init__(self) -> None:
        self.count = 0
        self.size = 0
        self.newest = 0.0


class StreamCursor:
    """One consumer of a stream: its subscription, the next offset it gets, its credit."""

    __slots__ = ("sub", "log", "position", "prefetch", "last_chunk")

    def __init__(self, sub: Any, log: StreamLog, position: int, prefetch: int) -> None:
        self.sub = sub
        self.log = log
        self.position = position
        self.prefetch = prefetch
        #: the chunk of the last message delivered: a chunk once begun is delivered whole
        self.last_chunk = -1


class StreamLog:
    """One stream queue: offsets ``[first, end)`` held in segments, its arguments, its consumers."""

    def __init__(self, name: str, arguments: Dict[str, str], declarer: Any) -> None:
        self.name = name
        self.destination = _QUEUE + name
        #: the declared arguments, as declared (a declaration again must name the same)
        self.arguments = arguments
        self.max_length_bytes = int(arguments["x-max-length-bytes"]) if "x-max-length-bytes" in arguments else 0
        age = arguments.get("x-max-age")
        self.max_age = parse_age(age) if age is not None else None
        segment = arguments.get("x-stream-max-segment-size-bytes")
        self.segment_bytes = int(segment) if segment is not None else DEFAULT_SEGMENT_BYTES
        self.entries: List[_Entry] = []
        self.first = 0
        self.end = 0
        self.segments: Deque[_Segment] = collections.deque([_Segment()])
        self.size = 0
        self.cursors: List[StreamCursor] = []
        #: sessions whose SUBSCRIBE declared it: their SEND to /queue/NAME appends (see the module)
        self.declarers: Dict[Any, None] = {declarer: None}
        self._chunk = -1
        self._chunk_token: Any = None
        self._last_chunk_start = 0

    def start(self, spec: Optional[str], now: float) -> Optional[int]:
        """The offset ``x-stream-offset`` names (``None`` for an ``offset=`` or ``timestamp=`` that is no
        number: RabbitMQ's "Processing error"); no header or an unknown word is ``next``, as RabbitMQ."""
        if spec is None or spec == "next":
            return self.end
        if spec == "first":
            return self.first
        if spec == "last":
            return self._last_chunk_start if self.entries else self.end
        kind, _, value = spec.partition("=")
        if kind not in ("offset", "timestamp"):
            return self.end
        try:
            number = int(value)
        except ValueError:
            return None
        if kind == "offset":
            return min(max(number, self.first), self.end)
        for index, entry in enumerate(self.entries):  # (a timestamp: seconds, the chunk's write time)
            if entry.timestamp >= number:
                return self.first + index
        return self.end

    def append(self, message: Any, size: int, now: float, token: Any) -> int:
        """Write one message (its offset already in its headers); returns the bytes retention freed."""
        freed = 0
        segment = self.segments[-1]
        rolled = False
        if segment.count and segment.size + size > self.segment_bytes:
            segment = _Segment()
            self.segments.append(segment)
            freed = self._retain(now)
            rolled = True  # (a chunk never spans two segments, as in RabbitMQ)
        if rolled or token is not self._chunk_token or token is None:
            self._chunk += 1
            self._chunk_token = token
            self._last_chunk_start = self.end
        self.entries.append(_Entry(message, now, self._chunk, size))
        self.end += 1
        self.size += size
        segment.count += 1
        segment.size += size
        segment.newest = now
        return freed

    def _retain(self, now: float) -> int:
        """Drop whole segments, oldest first, never the newest: past ``x-max-length-bytes``, or all of
        whose messages are older than ``x-max-age``."""
        freed = 0
        segments = self.segments
        while len(segments) > 1:
            oldest = segments[0]
            too_big = self.max_length_bytes and self.size > self.max_length_bytes
            too_old = self.max_age is not None and oldest.newest < now - self.max_age
            if not (too_big or too_old):
                break
            segments.popleft()
            del self.entries[: oldest.count]
            self.first += oldest.count
            self.size -= oldest.size
            freed += oldest.size
        for cursor in self.cursors:  # a consumer behind the log's start goes on from it
            if cursor.position < self.first:
                cursor.position = self.first
        return freed


def _value(value: Optional[str], kind: str) -> str:
    """An argument as RabbitMQ's "inequivalent arg" text shows it."""
    return "none" if value is None else f"the value '{value}' of type '{kind}'"


class Streams:
    """The stream queues of one broker core and their consumers.

    The core (``BrokerCore.streams``) calls :meth:`declare` on a SUBSCRIBE to
    ``/queue/NAME``, :meth:`subscribe`, :meth:`append` on a SEND to a stream, :meth:`pump` when a consumer's ACK gives credit, :meth:`drop` when a subscription
    ends; deliveries go through ``deliver(sub, messages)``, the core's (one write for a run of them).
    """

    def __init__(self, deliver: Callable[[Any, List[Any]], None]) -> None:
        self.logs: Dict[str, StreamLog] = {}
        self.cursors: Dict[Any, StreamCursor] = {}
        self._deliver = deliver

    @staticmethod
    def name_of(destination: str) -> Optional[str]:
        """NAME of ``/queue/NAME`` or ``/amq/queue/NAME`` (``None``: neither)."""
        for prefix in (AMQ_QUEUE, _QUEUE):
            if destination.startswith(prefix) and len(destination) > len(prefix):
                return destination[len(prefix) :]
        return None

    def declare(self, session: Any, name: str, frame: Any, classic_exists: bool) -> Union[StreamLog, Refusal]:
        """The stream a SUBSCRIBE to ``/queue/NAME`` declares or finds, or the refusal RabbitMQ gives."""
        wanted = frame.get("x-queue-type")
        for header, value in (("durable", "false"), ("auto-delete", "true"), ("exclusive", "true")):
            if wanted == "stream" and frame.get(header) == value:
                prop = "exclusive-owner" if header == "exclusive" else "auto-delete"  # (durable:false is auto-delete)
                return "precondition", (f"invalid property '{prop}' for queue '{name}' in vhost '/'",)
        arguments: Dict[str, str] = {key: frame.get(key) for key in _ARGUMENTS if frame.get(key) is not None}
        log = self.logs.get(name)
        if log is None:
            if classic_exists:
                return self.inequivalent(name, "x-queue-type", wanted, None)
            for key in ("x-max-length-bytes", "x-stream-max-segment-size-bytes"):
                size = arguments.get(key)
                if size is None:
                    continue
                if not _INTEGER.match(size):
                    return "processing", ()  # (RabbitMQ's answer to a value that is no number)
                if int(size) < 0:
                    return "precondition", (f"invalid arg '{key}' for queue '{name}' in vhost '/': "
                                            f"{{value_negative,{int(size)}}}",)  # fmt: skip
            if "x-max-age" in arguments and parse_age(arguments["x-max-age"]) is None:
                return "precondition", (f"invalid arg 'x-max-age' for queue '{name}' in vhost '/': "
                                        f"{arguments['x-max-age']}",)  # fmt: skip
            log = self.logs[name] = StreamLog(name, arguments, session)
            return log
        for key, kind in _ARGUMENTS.items():
            got, current = arguments.get(key), log.arguments.get(key)
            if got != current:
                return self.inequivalent(name, key, got, current, kind)
        log.declarers[session] = None
        return log

    @staticmethod
    def inequivalent(name: str, key: str, got: Optional[str], current: Optional[str], kind: str = "longstr") -> Refusal:
        """RabbitMQ's refusal of a declaration whose argument ``key`` is ``got`` where the queue has ``current``."""
        if got is not None and current is not None:
            shown = f"received '{got}' but current is '{current}'"
        else:
            shown = f"received {_value(got, kind)} but current is {_value(current, kind)}"
        return "precondition", (f"inequivalent arg '{key}' for queue '{name}' in vhost '/': {shown}",)

    def subscribe(self, sub: Any, log: StreamLog, frame: Any, now: float) -> Optional[Refusal]:
        """Make ``sub`` a consumer of ``log`` from its ``x-stream-offset``, or say why RabbitMQ refuses it."""
        prefetch = frame.get("prefetch-count")
        if prefetch is None or not prefetch.isdigit() or int(prefetch) == 0:
            return "precondition", (f"consumer prefetch count is not set for 'queue '{log.name}' in vhost '/''",)
        if sub.ack == "auto":
            return "channel-died", (f"automatic acknowledgement not supported by stream queues queue "
                                    f"'{log.name}' in vhost '/'",)  # fmt: skip
        position = log.start(frame.get("x-stream-offset"), now)
        if position is None:
            return "processing", ()
        cursor = self.cursors[sub] = StreamCursor(sub, log, position, int(prefetch))
        log.cursors.append(cursor)
        return None

    def append(self, log: StreamLog, message: Any, size: int, now: float, token: Any) -> int:
        """Write ``message`` to ``log`` and deliver it to the consumers with credit; the bytes freed."""
        freed = log.append(message, size, now, token)
        for cursor in log.cursors:
            self.pump(cursor)
        return freed

    def pump(self, cursor: StreamCursor) -> None:
        """Deliver to one consumer while it has credit (``prefetch-count`` less what it has not
        acknowledged), then the rest of the chunk it is in, as RabbitMQ sends whole chunks."""
        log, sub = cursor.log, cursor.sub
        if cursor.position < log.first:
            cursor.position = log.first
        entries, first, end = log.entries, log.first, log.end
        position, last_chunk = cursor.position, cursor.last_chunk
        credit = cursor.prefetch - len(sub.unacked)
        run: List[Any] = []
        while position < end:
            entry = entries[position - first]
            if credit <= 0 and entry.chunk != last_chunk:
                break
            position += 1
            credit -= 1
            last_chunk = entry.chunk
            run.append(entry.message)
        cursor.position, cursor.last_chunk = position, last_chunk
        if run:
            self._deliver(sub, run)

    def drop(self, sub: Any) -> bool:
        """Forget ``sub``'s consumer, if it is one (its unacknowledged messages stay in the log)."""
        cursor = self.cursors.pop(sub, None)
        if cursor is None:
            return False
        cursor.log.cursors.remove(cursor)
        return True

    def forget_session(self, session: Any) -> None:
        """A session ended: it no longer counts as having declared any stream."""
        for log in self.logs.values():
            log.declarers.pop(session, None)

    def stats(self) -> Dict[str, int]:
        """Streams, the messages they hold, the bytes they hold, their consumers."""
        return {
            "streams": len(self.logs),
            "stream_messages": sum(len(log.entries) for log in self.logs.values()),
            "stream_bytes": sum(log.size for log in self.logs.values()),
            "stream_consumers": len(self.cursors),
        }
