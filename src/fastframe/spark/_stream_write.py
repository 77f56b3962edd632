"""Writing rows to a broker: one SEND per row, each confirmed by a RECEIPT before the task reports success.

Runs without Spark (the sink in :mod:`._stream_source` and the tests call it).
A row has a ``body`` (binary or string), optionally ``headers``
(array of name/value structs, repeats kept) or ``header_map``, and optionally a
``destination`` (else the option's). Up to ``maxInFlight`` receipts are awaited
at once, so the broker confirms while more SENDs go out. A task that fails
after some SENDs leaves them on the broker and Spark runs it again: the sink
is at-least-once.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ._file_write import pairs_per_row
from ._stream_client import BrokerConnection
from ._stream_options import SinkOptions


def _column(batch: Any, name: str) -> Optional[List[Any]]:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _rows(batch: Any, opts: SinkOptions) -> Iterable[Tuple[str, Any, List[Tuple[str, str]]]]:
    n = batch.num_rows
    bodies = _column(batch, "body") or [None] * n
    destinations = _column(batch, "destination") or [None] * n
    names = batch.schema.names
    header_column = "headers" if "headers" in names else ("header_map" if "header_map" in names else None)
    headers = pairs_per_row(batch.column(header_column)) if header_column else [None] * n
    for body, destination, pairs in zip(bodies, destinations, headers):
        destination = destination or opts.destination
        if not destination:
            raise ValueError("a row has a null destination and option destination is not set")
        extra = list(pairs or ())
        if opts.content_type is not None:
            extra.append(("content-type", opts.content_type))
        if opts.persistent is not None:
            extra.append(("persistent", "true" if opts.persistent else "false"))
        yield destination, b"" if body is None else body, extra


#: Headers a SEND sets itself, and those a broker gives a MESSAGE: a row read from a broker carries them.
_DROPPED = frozenset(
    ("destination", "content-length", "receipt", "transaction", "subscription", "message-id", "ack", "redelivered")
)


def _headers(pairs: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    return [(name, value) for name, value in pairs if name not in _DROPPED]


def send_batches(opts: SinkOptions, batches: Iterable[Any]) -> Dict[str, int]:
    """SEND every row of ``batches``; return once the broker confirmed each (``messages``, ``bytes``)."""
    timeout = opts.connection.timeout
    totals = {"messages": 0, "bytes": 0}
    with BrokerConnection(opts.connection) as broker:
        client = broker.client
        window: List[Any] = []

        async def send_all(rows: List[Tuple[str, Any, List[Tuple[str, str]]]]) -> None:
            for destination, body, pairs in rows:
                window.append(
                    asyncio.ensure_future(
                        client.send(destination, body, _headers(pairs), receipt=True, timeout=timeout)
                    )
                )
                if len(window) >= opts.max_in_flight:
                    await _settle(window, opts.max_in_flight // 2)

        for batch in batches:
            rows = list(_rows(batch, opts))
            if not rows:
                continue
            broker.run(send_all(rows), timeout * (1 + len(rows) // max(1, opts.max_in_flight)), "sending")
            totals["messages"] += len(rows)
            totals["bytes"] += sum(len(body) for _, body, _ in rows)
        broker.run(_settle(window, 0), timeout + 1, "waiting for receipts")
    return totals


async def _settle(window: List[Any], keep: int) -> None:
    """Wait until at most ``keep`` SENDs of ``window`` await their receipt; raise the first failure."""
    while len(window) > keep:
        done = window[: len(window) - keep]
        del window[: len(window) - keep]
        await asyncio.gather(*done)


def rows_to_batches(rows: Iterable[Any], size: int = 2000) -> Iterator[Any]:
    """Spark rows (what a PySpark 4.0 stream writer receives) as Arrow batches of the columns the sink reads."""
    import pyarrow as pa  # type: ignore[import-untyped]

    pair = pa.struct([("name", pa.string()), ("value", pa.string())])
    chunk: List[Any] = []

    def batch() -> Any:
        names = list(chunk[0].__fields__)
        columns: Dict[str, Any] = {}
        if "body" in names:
            bodies = [row["body"] for row in chunk]
            text = any(isinstance(body, str) for body in bodies)
            columns["body"] = pa.array(
                [body if text or body is None else bytes(body) for body in bodies], pa.string() if text else pa.binary()
            )
        if "destination" in names:
            columns["destination"] = pa.array([row["destination"] for row in chunk], pa.string())
        if "headers" in names:
            columns["headers"] = pa.array(
                [None if row["headers"] is None else [(h[0], h[1]) for h in row["headers"]] for row in chunk],
                pa.list_(pair),
            )
        elif "header_map" in names:
            columns["header_map"] = pa.array(
                [None if row["header_map"] is None else list(row["header_map"].items()) for row in chunk],
                pa.map_(pa.string(), pa.string()),
            )
        return pa.RecordBatch.from_pydict(columns)

    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield batch()
            chunk = []
    if chunk:
        yield batch()
