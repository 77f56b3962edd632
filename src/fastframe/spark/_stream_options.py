"""Broker options of the ``stomp`` source and sink: names, defaults, parsing and checking.

The ``stomp`` format talks to a broker when its options name one (``host`` or
``servers``) and reads or writes files otherwise (:mod:`._options`). Names are
matched as the file options are (case, ``_`` and ``-`` ignored). Every wait
has a deadline option, and an error names the option to fix.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from ._option_parsing import key, parse, parse_int

CONSUME_MODES = ("ack", "stream")

#: A consume=stream subscription's default credit (``prefetch-count``). Measured in one process reading
#: 20,000 messages of 200 bytes from the middle of a stream: 2,000 to 8,000 read 27,000 to 38,000
#: messages/s, the whole range at once (20,000) 19,000 to 23,000.
STREAM_CREDIT = 4000

# name: (kind, default); kinds as in _option_parsing.KINDS
_CONNECTION_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "host": ("str", None),
    "port": ("int", 61613),
    "servers": ("str", None),  # "host:port,host:port", tried in order
    "login": ("str", None),
    "passcode": ("str", None),
    "vhost": ("str", "/"),  # CONNECT's host header: RabbitMQ's virtual host (others ignore it)
    "version": ("version", "1.2"),
    "connectTimeout": ("seconds", 10.0),
    "timeout": ("seconds", 30.0),  # every other wait: a receipt, the next message of a planned range
}

_SOURCE_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "destination": ("str", None),
    "destinations": ("str", None),
    "consume": ("str", "ack"),
    "startingOffsets": ("str", "earliest"),
    "endingOffsets": ("str", None),  # a batch read (spark.read) of consume=stream: latest, N or {destination: N}
    "maxMessagesPerTrigger": ("int", 0),
    "maxBytesPerTrigger": ("size", 0),
    # consume=stream: a trigger with fewer new messages than this plans no batch, until maxTriggerDelay
    # seconds passed since the last batch (Kafka's options of the same names)
    "minOffsetsPerTrigger": ("int", 0),
    "maxTriggerDelay": ("seconds", 900.0),
    "prefetch": ("int", 0),  # 0: STREAM_CREDIT (stream), or chosen from maxMessagesPerTrigger (ack)
    "pollTimeout": ("seconds", 0.2),  # how long a trigger waits for a first message (ack) or for the end (stream)
    # rows per Arrow batch a consume=stream task yields: small enough that Spark's JVM writes the first
    # rows while the task still reads the rest (docs/benchmarks.md: with the broker on a core of its
    # own, 85-90% of the ceiling against 67-78% with 10,000; on cores shared with it, no difference)
    "maxRecordsPerBatch": ("int", 2_000),
    "minPartitions": ("int", 1),  # consume=stream: a destination's range is cut into this many tasks
    # consume=stream: offsets the checkpoint holds that the stream no longer has (retention, a stream
    # deleted and declared again) fail the query; false: go on from the first offset there is, logged
    "failOnDataLoss": ("bool", True),
    # extra SUBSCRIBE headers, a JSON object (names keep their case); also options named subscribe.NAME
    "subscribeHeaders": ("str", None),
}

#: The prefix of options that are extra SUBSCRIBE headers (``subscribe.x-stream-filter``).
SUBSCRIBE_PREFIX = "subscribe."

#: SUBSCRIBE headers the source sets itself, and the option that sets each.
_OWN_HEADERS = {
    "destination": "destination",
    "id": "(the source's)",
    "ack": "consume",
    "receipt": "(the source's)",
    "x-stream-offset": "startingOffsets",
    "prefetch-count": "prefetch",
    "activemq.prefetchsize": "prefetch",
}

_SINK_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "destination": ("str", None),
    "maxInFlight": ("int", 1000),  # SENDs whose receipt is awaited at once
    "contentType": ("str", None),
    "persistent": ("bool", None),
}


def is_broker(options: Mapping[str, Any]) -> bool:
    """Whether options name a broker (``host`` or ``servers``): then the source and sink talk to it."""
    return any(key(name) in ("host", "servers") for name in options)


#: Options Spark itself passes along with ours (a load() or save() path, the sink's checkpoint).
_SPARKS_OWN = ("path", "paths", "checkpointLocation", "queryName")


def _values(options: Mapping[str, Any], known: Dict[str, Tuple[str, Any]], what: str) -> Dict[str, Any]:
    spark_own = {key(name) for name in _SPARKS_OWN}
    return parse({k: v for k, v in options.items() if key(k) not in spark_own}, known, what)


class Connection(NamedTuple):
    """Where and how to connect (picklable: it travels to the executors)."""

    servers: Tuple[Tuple[str, int], ...]
    login: Optional[str]
    passcode: Optional[str]
    vhost: Optional[str]
    version: str
    connect_timeout: float
    timeout: float

    def describe(self) -> str:
        return ", ".join(f"{host}:{port}" for host, port in self.servers)


def _connection(values: Dict[str, Any]) -> Connection:
    servers: List[Tuple[str, int]] = []
    if values["host"]:
        servers.append((values["host"], values["port"]))
    for item in (values["servers"] or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"option servers: {item!r} is not host:port")
        try:
            servers.append((host.strip("[]"), parse_int(port)))
        except ValueError:
            raise ValueError(f"option servers: {item!r} is not host:port") from None
    if not servers:
        raise ValueError("no broker given: set option host (and port), or servers")
    for _, port in servers:
        if not 0 < port < 65536:
            raise ValueError(f"option port: {port} is not a TCP port")
    return Connection(
        servers=tuple(servers),
        login=values["login"],
        passcode=values["passcode"],
        vhost=values["vhost"],
        version=values["version"],
        connect_timeout=values["connectTimeout"],
        timeout=values["timeout"],
    )


StartingOffsets = Union[str, int, Dict[str, int]]  # "earliest" | "latest" | N | {destination: N} | "timestamp=T"


class SourceOptions(NamedTuple):
    """Checked source options."""

    connection: Connection
    destinations: Tuple[str, ...]
    consume: str
    starting: Any  # StartingOffsets
    max_messages: int  # 0: no limit
    max_bytes: int  # 0: no limit
    prefetch: int
    poll_timeout: float
    max_records_per_batch: int
    min_partitions: int
    fail_on_data_loss: bool = True
    subscribe_headers: Tuple[Tuple[str, str], ...] = ()  # extra SUBSCRIBE headers, in order
    ending: Any = None  # endingOffsets: None, "latest", N or {destination: N}
    min_messages: int = 0  # minOffsetsPerTrigger; 0: none
    max_trigger_delay: float = 900.0


def _starting(text: str, destinations: Tuple[str, ...]) -> Any:
    text = text.strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return lowered
    if lowered.startswith("timestamp="):
        stamp = text.partition("=")[2].strip()
        try:
            return f"timestamp={parse_int(stamp)}"
        except ValueError:
            raise ValueError(f"option startingOffsets: {text!r}: timestamp=T takes seconds since 1970") from None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"option startingOffsets: not JSON: {exc}") from None
        if not isinstance(parsed, dict) or set(parsed) != set(destinations):
            raise ValueError("option startingOffsets: a JSON object must give an offset for each destination")
        out = {}
        for name, value in parsed.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"option startingOffsets: {name}: {value!r} is not an offset")
            out[name] = value
        return out
    try:
        offset = parse_int(text.partition("offset=")[2] if lowered.startswith("offset=") else text)
    except ValueError:
        raise ValueError(
            f"option startingOffsets: {text!r} is not earliest, latest, an offset N, timestamp=T "
            "or a JSON object {destination: offset}"
        ) from None
    if offset < 0:
        raise ValueError(f"option startingOffsets: {offset} is negative")
    return offset


def _subscribe_headers(options: Mapping[str, Any], text: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    pairs: List[Tuple[str, str]] = []
    if text:
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"option subscribeHeaders: not JSON: {exc}") from None
        if not isinstance(parsed, dict) or not all(isinstance(v, (str, int, float)) for v in parsed.values()):
            raise ValueError(
                'option subscribeHeaders: a JSON object of header names and values, e.g. {"selector": "n > 5"}'
            )
        pairs.extend((str(name), str(value)) for name, value in parsed.items())
    for name, value in options.items():
        if name.lower().startswith(SUBSCRIBE_PREFIX):
            pairs.append((name[len(SUBSCRIBE_PREFIX) :], str(value)))
    for name, _ in pairs:
        if not name or any(c in name for c in ":\r\n"):
            raise ValueError(f"option subscribeHeaders: {name!r} is not a header name")
        if name.lower() in _OWN_HEADERS:
            raise ValueError(
                f"option subscribeHeaders: the source sets {name!r} itself (option {_OWN_HEADERS[name.lower()]})"
            )
    return tuple(pairs)


def source_options(options: Mapping[str, Any]) -> SourceOptions:
    """Check the options of ``spark.readStream.format("stomp")`` with a broker."""
    headers = {k: v for k, v in options.items() if not k.lower().startswith(SUBSCRIBE_PREFIX)}
    values = _values(headers, {**_CONNECTION_OPTIONS, **_SOURCE_OPTIONS}, "broker source")
    connection = _connection(values)
    names = ",".join(filter(None, [values["destination"], values["destinations"]]))
    destinations = tuple(dict.fromkeys(d.strip() for d in names.split(",") if d.strip()))
    if not destinations:
        raise ValueError("no destination given: set option destination (one, or several separated by commas)")
    consume = values["consume"].strip().lower()
    if consume not in CONSUME_MODES:
        raise ValueError(f"option consume: {values['consume']!r} is not ack or stream")
    for name in ("maxMessagesPerTrigger", "maxBytesPerTrigger", "prefetch", "minOffsetsPerTrigger"):
        if values[name] < 0:
            raise ValueError(f"option {name} must not be negative, not {values[name]}")
    for name in ("maxRecordsPerBatch", "minPartitions"):
        if values[name] < 1:
            raise ValueError(f"option {name} must be at least 1, not {values[name]}")
    if consume == "stream":
        for dest in destinations:
            if stream_queue(dest) is None:
                raise ValueError(
                    f"option destination: {dest!r}: consume=stream reads RabbitMQ stream queues, "
                    "named /queue/NAME or /amq/queue/NAME"
                )
    if values["prefetch"]:
        prefetch = values["prefetch"]
    elif consume == "stream":
        prefetch = STREAM_CREDIT
    else:  # the driver's one subscription per queue holds a batch
        prefetch = max(1000, min(2 * values["maxMessagesPerTrigger"], 65_535))
    return SourceOptions(
        connection=connection,
        destinations=destinations,
        consume=consume,
        starting=_starting(values["startingOffsets"], destinations),
        max_messages=values["maxMessagesPerTrigger"],
        max_bytes=values["maxBytesPerTrigger"],
        prefetch=prefetch,
        poll_timeout=values["pollTimeout"],
        max_records_per_batch=values["maxRecordsPerBatch"],
        min_partitions=values["minPartitions"],
        fail_on_data_loss=values["failOnDataLoss"],
        subscribe_headers=_subscribe_headers(options, values["subscribeHeaders"]),
        ending=_ending(values["endingOffsets"], destinations, consume),
        min_messages=_min_messages(values, consume),
        max_trigger_delay=values["maxTriggerDelay"],
    )


def _min_messages(values: Dict[str, Any], consume: str) -> int:
    least, most = values["minOffsetsPerTrigger"], values["maxMessagesPerTrigger"]
    if least and consume != "stream":
        raise ValueError("option minOffsetsPerTrigger counts a stream's offsets: set consume=stream")
    if least and most and least > most:
        raise ValueError(f"option minOffsetsPerTrigger ({least}) is more than maxMessagesPerTrigger ({most})")
    return int(least)


def _ending(text: Optional[str], destinations: Tuple[str, ...], consume: str) -> Any:
    if text is None:
        return None
    if consume != "stream":
        raise ValueError("option endingOffsets reads a range of RabbitMQ stream queues: set consume=stream")
    if text.strip().lower() == "latest":
        return "latest"
    try:
        ending = _starting(text, destinations)
    except ValueError as exc:
        raise ValueError(str(exc).replace("startingOffsets", "endingOffsets")) from None
    if not isinstance(ending, (int, dict)):
        raise ValueError(
            f"option endingOffsets: {text!r} is not latest, an offset N or a JSON object {{destination: N}}"
        )
    return ending


def stream_queue(destination: str) -> Optional[str]:
    """The queue name of ``/queue/NAME`` or ``/amq/queue/NAME``; None for other destinations."""
    for prefix in ("/amq/queue/", "/queue/"):
        if destination.startswith(prefix) and len(destination) > len(prefix):
            return destination[len(prefix) :]
    return None


class SinkOptions(NamedTuple):
    """Checked sink options."""

    connection: Connection
    destination: Optional[str]  # None: every row names its own (a destination column)
    max_in_flight: int
    content_type: Optional[str]
    persistent: Optional[bool]


def sink_options(options: Mapping[str, Any], columns: List[str]) -> SinkOptions:
    """Check the options of ``df.write(Stream).format("stomp")`` with a broker, against the DataFrame's columns."""
    values = _values(options, {**_CONNECTION_OPTIONS, **_SINK_OPTIONS}, "broker sink")
    connection = _connection(values)
    if "body" not in columns:
        raise ValueError(f"writing to a broker needs a 'body' column (the DataFrame has {', '.join(columns)})")
    if not values["destination"] and "destination" not in columns:
        raise ValueError("no destination: set option destination, or give the DataFrame a destination column")
    if values["maxInFlight"] < 1:
        raise ValueError(f"option maxInFlight must be at least 1, not {values['maxInFlight']}")
    return SinkOptions(
        connection=connection,
        destination=values["destination"],
        max_in_flight=values["maxInFlight"],
        content_type=values["contentType"],
        persistent=values["persistent"],
    )


def broker_option_names(kind: str) -> List[str]:
    """The broker options of the source (``"source"``) or the sink (``"sink"``)."""
    extra = _SOURCE_OPTIONS if kind == "source" else _SINK_OPTIONS
    return sorted(set(_CONNECTION_OPTIONS) | set(extra))
