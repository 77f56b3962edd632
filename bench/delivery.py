"""Where a received MESSAGE's CPU goes, stage by stage, in one process and without a socket.

    python -m bench.delivery                     # 50,000 MESSAGEs of 200 B, 3 rounds
    python -m bench.delivery --messages 20000 --rounds 5

The same bytes (MESSAGEs with RabbitMQ's six headers, fed in 256 KiB pieces) go through growing
parts of the receiving path; each stage's best round counts, in CPU µs per message:

- ``decode``: the codec's ``Decoder.feed``;
- ``events``: a ``ClientConnection`` returning ``protocol.Message`` events (the general path);
- ``events + aio.Message``: the same with the asyncio client's ``message_class``;
- ``events, queued``: those events queued into an inbox and taken out again (the general path of
  both clients: the client's routing step);
- ``routed``: ``ClientConnection.route`` into an inbox (the compiled ``route_messages``), then each
  message taken out with ``popleft`` (what ``async for`` does).
"""

from __future__ import annotations

import argparse
import functools
import time
from typing import Any, Callable, Dict, List, Optional

import fastframe
from fastframe.aio import Message
from fastframe.protocol import ClientConnection, Inbox

HEADERS = (
    ("destination", "/queue/bench"),
    ("message-id", "T_s@@session-abc@@{n}"),
    ("redelivered", "false"),
    ("subscription", "s"),
    ("ack", "T_s@@session-abc@@{n}"),
    ("content-length", "200"),
)
PIECE = 256 * 1024


def pieces(count: int) -> List[bytes]:
    encoder = fastframe.Encoder("1.2")
    data = b"".join(
        encoder.encode(fastframe.Frame("MESSAGE", tuple((k, v.format(n=n)) for k, v in HEADERS), b"m" * 200))
        for n in range(count)
    )
    return [data[i : i + PIECE] for i in range(0, len(data), PIECE)]


def connection(message_class: Optional[Callable[..., Any]] = None) -> ClientConnection:
    conn = ClientConnection(message_class=message_class) if message_class else ClientConnection()
    conn.connect(host="/")
    conn.receive_data(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
    conn.subscribe("s", "/queue/bench", ack="client-individual")
    return conn


def aio_message() -> Callable[..., Any]:
    return functools.partial(Message, client=None, session=None)  # type: ignore[arg-type]  # (no socket)


def stages(data: List[bytes]) -> List[Any]:
    def decode() -> None:
        decoder = fastframe.Decoder("1.2")
        for piece in data:
            decoder.feed(piece)

    def events(message_class: Optional[Callable[..., Any]] = None) -> None:
        conn = connection(message_class)
        for piece in data:
            conn.receive_data(piece)

    def queued() -> None:
        conn = connection(aio_message())
        inbox: Inbox[Any] = Inbox(1000)
        items, take = inbox.items, inbox.items.popleft
        for piece in data:
            for event in conn.receive_data(piece):
                if getattr(event, "subscription", None) == "s":
                    items.append(event)
            while items:
                take()

    def routed() -> None:
        conn = connection(aio_message())
        inbox: Inbox[Any] = Inbox(1000)
        conn.route("s", inbox)
        take = inbox.items.popleft
        for piece in data:
            conn.receive_data(piece)
            conn.take_filled()
            while inbox.items:
                take()

    return [
        ("decode", decode),
        ("events", events),
        ("events + aio.Message", lambda: events(aio_message())),
        ("events, queued", queued),
        ("routed", routed),
    ]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.delivery", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    data = pieces(args.messages)
    best: Dict[str, float] = {}
    for _ in range(args.rounds):  # stages alternate within each round
        for name, run in stages(data):
            started = time.process_time()
            run()
            spent = (time.process_time() - started) / args.messages * 1e6
            best[name] = min(best.get(name, spent), spent)
    print(f"| stage ({fastframe.IMPLEMENTATION} codec, {args.messages:,} x 200 B) | CPU µs per message |")
    print("|---|---:|")
    for name, spent in best.items():
        print(f"| {name} | {spent:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
