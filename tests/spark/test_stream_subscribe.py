"""Extra SUBSCRIBE headers (``subscribeHeaders`` as JSON, or ``subscribe.NAME`` options) reach the broker:
an ActiveMQ selector picks the messages a consume=ack source receives; headers the source sets itself are
refused, naming the option that sets them."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from fastframe.spark._stream_options import source_options
from fastframe.spark._stream_read import QueueConsumer

from .stream_helpers import BROKERS, HOST, new_queue, require_broker, run


def _publish_colours(destination: str, colours: List[str]) -> None:
    import fastframe.aio as aio

    async def publish() -> None:
        async with aio.connect(HOST, BROKERS["activemq"].port, login="guest", passcode="guest", timeout=30) as client:
            for n, colour in enumerate(colours):
                await client.send(destination, b"%d" % n, {"colour": colour}, receipt=n == len(colours) - 1)

    run(publish())


def _received(options: Dict[str, str]) -> List[Any]:
    consumer = QueueConsumer(source_options(options))
    try:
        got: List[Any] = []
        for _ in range(20):
            polled = consumer.poll(0, 0)
            got.extend(m for messages in polled.values() for m in messages)
            if len(got) >= 3:
                break
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("style", ["json", "prefix"])
def test_a_selector_header_reaches_activemq(style: str) -> None:
    require_broker(BROKERS["activemq"])
    destination = f"/queue/{new_queue('selector')}"
    _publish_colours(destination, ["red", "blue", "red", "blue", "red"])
    options = {"host": HOST, "port": str(BROKERS["activemq"].port), "login": "guest", "passcode": "guest"}
    options["destination"] = destination
    if style == "json":
        options["subscribeHeaders"] = '{"selector": "colour = \'red\'"}'
    else:
        options["subscribe.selector"] = "colour = 'red'"
    got = _received(options)
    assert sorted(m.body for m in got) == [b"0", b"2", b"4"]
    assert {m.get("colour") for m in got} == {"red"}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"subscribeHeaders": "[1]"}, "a JSON object"),
        ({"subscribeHeaders": "{"}, "not JSON"),
        ({"subscribe.prefetch-count": "5"}, "option prefetch"),
        ({"subscribeHeaders": '{"x-stream-offset": "first"}'}, "option startingOffsets"),
        ({"subscribeHeaders": '{"a:b": "c"}'}, "not a header name"),
    ],
)
def test_bad_subscribe_headers(options: Dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        source_options({"host": "h", "destination": "/queue/a", **options})


def test_subscribe_headers_keep_their_order_and_case() -> None:
    opts = source_options(
        {"host": "h", "destination": "/queue/a", "subscribeHeaders": '{"activemq.subscriptionName": "s1"}',
         "subscribe.x-stream-filter": "eu"}
    )  # fmt: skip
    assert opts.subscribe_headers == (("activemq.subscriptionName", "s1"), ("x-stream-filter", "eu"))
