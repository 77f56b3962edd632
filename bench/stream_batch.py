"""The broker source's rows: CPU µs per message of ``messages_to_batch`` (no broker, no Spark).

    python -m bench.stream_batch                     # 40,000 messages of 7 headers and 200 bytes
    FASTFRAME_NO_EXTENSIONS=1 python -m bench.stream_batch   # the pure-Python twin

The messages are decoded and wrapped as the asyncio client wraps them, then made
into Arrow batches of ``--batch`` as a consume=stream task does (issue 33: at
most 3 µs per message). ``to_columns`` alone, the codec's share, is timed beside it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, List, Sequence

import fastframe
from fastframe.aio import Message
from fastframe.codec import to_columns
from fastframe.spark._stream_schema import messages_to_batch, stream_arrow_schema


def make_messages(count: int, body_size: int = 200) -> List[Message]:
    """``count`` MESSAGEs of one stream subscription (7 headers), decoded and wrapped like the client's."""
    encoder = fastframe.Encoder("1.2")
    data = b"".join(
        encoder.encode(
            fastframe.Frame(
                "MESSAGE",
                (
                    ("subscription", "s"),
                    ("destination", "/queue/q"),
                    ("message-id", f"T_s@@session@@{i}"),
                    ("redelivered", "false"),
                    ("x-stream-offset", str(i)),
                    ("n", str(i)),
                    ("content-length", str(body_size)),
                ),
                b"m" * body_size,
            )
        )
        for i in range(count)
    )
    frames = fastframe.Decoder("1.2").feed(data)
    return [
        Message(f, "s", f.get("message-id"), f.get("message-id"), "/queue/q", client=None, session=None) for f in frames
    ]


def per_message(run: Callable[[Sequence[Message], int], Any], messages: Sequence[Message], batch: int) -> float:
    """CPU µs per message of ``run`` over ``messages`` in slices of ``batch``."""
    started = time.process_time()
    for first in range(0, len(messages), batch):
        run(messages[first : first + batch], first)
    return (time.process_time() - started) / len(messages) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    messages = make_messages(args.messages)
    schema = stream_arrow_schema()

    def batch(part: Sequence[Message], first: int) -> Any:
        return messages_to_batch("/queue/q", part, range(first, first + len(part)), fastframe.IMPLEMENTATION, schema)

    def columns(part: Sequence[Message], first: int) -> Any:
        return to_columns([message.frame for message in part])

    print(f"codec {fastframe.IMPLEMENTATION}, {args.messages} messages in batches of {args.batch}: CPU µs per message")
    for _ in range(args.rounds):  # the machine may be shared: the best round is the steady one
        print(
            f"messages_to_batch {per_message(batch, messages, args.batch):.2f}"
            f"   to_columns alone {per_message(columns, messages, args.batch):.2f}"
        )


if __name__ == "__main__":
    main()
