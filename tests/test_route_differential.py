"""Differential tests of ``route_messages``: the compiled twin and the Python twin on the same items.

Each twin decodes the same MESSAGE streams (repeated and missing headers, unknown subscriptions,
ack headers set, empty or absent, heart-beats and other frames between, non-UTF-8 values kept)
with its own decoder, then routes them into the same routes (queues some already holding items, manual or not): both must stop at the same index
and leave the same queues, the same ``unacked`` ledger (in its order) and the same ``filled``
list. A model written with ``Frame.get`` says what the result is, so both twins agreeing on a
mistake fails too.

``FASTFRAME_DIFF_EXAMPLES`` sets the number of examples per test, as in tests/test_differential.py
(default 300 here: the file stays within a few seconds).
"""

from __future__ import annotations

import collections
import os
from types import ModuleType
from typing import Any, Dict, List, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import compiled_twin
from fastframe import DecodeError, FrameError
from fastframe.codec import _codec_py as P

C = compiled_twin()  # a skip for the whole module when absent by design

EXAMPLES = int(os.environ.get("FASTFRAME_DIFF_EXAMPLES", "300"))
DIFF = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SUB_IDS = ["0", "1", "sub-2", "x:y"]  # "x:y": escaped on the wire in 1.1 and 1.2
MARK = "§"  # a value's MARK becomes a byte that is not UTF-8 (b"\xff") on the wire
VALUE = st.text(alphabet=st.sampled_from(list("ab01-é" + MARK)), max_size=4)
OWNERS = [f"owner-{n}" for n in range(3)]  # shared by both twins' routes: ``filled`` holds them


@st.composite
def message(draw: Any) -> Tuple[str, List[Tuple[str, str]], bytes]:
    """A MESSAGE whose headers may be missing, repeated, empty or in any order."""
    headers: List[Tuple[str, str]] = []
    for name, values in (
        ("subscription", st.sampled_from(SUB_IDS * 4 + ["unknown", "", "0" + MARK])),
        ("message-id", VALUE),
        ("ack", VALUE),
        ("destination", VALUE),
    ):
        for _ in range(draw(st.sampled_from([0, 1, 1, 1, 1, 1, 1, 1, 1, 2]))):
            headers.append((name, draw(values)))
    for _ in range(draw(st.integers(0, 2))):
        headers.append((draw(st.sampled_from(["x", "content-type", "Subscription", "ack "])), draw(VALUE)))
    return "MESSAGE", draw(st.permutations(headers)), draw(st.binary(max_size=6))


OTHER = st.sampled_from(
    [
        ("RECEIPT", [("receipt-id", "r-1")], b""),
        ("ERROR", [("message", "bad"), ("subscription", "0"), ("message-id", "e")], b"oops"),
        ("CONNECTED", [("version", "1.2")], b""),
        ("SEND", [("destination", "/q"), ("subscription", "0"), ("message-id", "s")], b""),
    ]
)
ITEM = st.one_of(message(), message(), message(), message(), OTHER, st.just("heartbeat"))


def encode_stream(entries: Sequence[Any], version: str) -> bytes:
    """The entries as one stream (``"heartbeat"``: an EOL); those the encoder refuses are left out."""
    encoder = P.Encoder(version)
    parts = []
    for entry in entries:
        if entry == "heartbeat":
            parts.append(b"\n")
            continue
        command, headers, body = entry
        try:
            parts.append(encoder.encode(command, headers, body))
        except FrameError:
            continue
    return b"".join(parts).replace(MARK.encode(), b"\xff")


def decoded(module: ModuleType, data: bytes, options: Dict[str, Any]) -> List[Any]:
    """The twin's own items for ``data``; when the stream is damaged, those before the damage."""
    try:
        return module.Decoder(heartbeat_events=True, **options).feed(data)
    except DecodeError as error:
        return list(error.frames)


@st.composite
def cases(draw: Any) -> Dict[str, Any]:
    version = draw(st.sampled_from(["1.0", "1.1", "1.2"]))
    data = bytearray(
        encode_stream(draw(st.lists(ITEM, min_size=draw(st.sampled_from([0, 4, 8])), max_size=12)), version)
    )
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # now and then a damaged stream
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.sampled_from([b"\xff", b"\n", b"\0", b":", b"\\"]))
    # (without keep_invalid_utf8, a value that is not UTF-8 ends the items: the decoder's error)
    options: Dict[str, Any] = {"version": version, "keep_invalid_utf8": draw(st.sampled_from([True, True, False]))}
    routed = draw(st.lists(st.sampled_from(SUB_IDS), unique=True, min_size=draw(st.sampled_from([0, 2, 3, 4]))))
    routes = {
        sub_id: (
            draw(st.sampled_from(OWNERS)),  # (the connection's owners differ; shared ones test the runs)
            draw(st.sampled_from([0, 0, 0, 1, 2, 5])),  # held already
            draw(st.booleans()),  # manual
        )
        for sub_id in routed
    }
    return {
        "data": bytes(data),
        "options": options,
        "routes": routes,
        "ack_header": draw(st.booleans()),
        "unacked": draw(st.lists(st.tuples(st.sampled_from(["a", "0", "1", "b", "m"]), st.just(("0", "p"))))),
        "filled": draw(st.lists(st.sampled_from(OWNERS), max_size=2)),
        "start_seed": draw(st.integers(0, 10_000)),
        "beats": draw(st.booleans()),  # heart-beats routed past, into events
        "slot_maker": draw(st.booleans()),  # make: a SlotMaker (built in C by the compiled twin)
    }


def describe(items: Sequence[Any]) -> List[Any]:
    return [
        ("frame", item.command, item.headers, item.body) if hasattr(item, "command") else ("heartbeat",)
        for item in items
    ]


class Made:
    """What a SlotMaker builds in these tests: the five fields and one fixed slot."""

    __slots__ = ("frame", "subscription", "message_id", "ack_id", "destination", "fixed")


BEAT = object()  # what each heart-beat routed past appends to events


class Run:
    """One twin's routes, ledger, ``filled`` and events, fresh from a case; ``make`` records each call
    (or, with ``slot_maker``, is the twin's SlotMaker of :class:`Made`)."""

    def __init__(self, module: ModuleType, case: Dict[str, Any]) -> None:
        self.module = module
        self.items = decoded(module, case["data"], case["options"])
        self.index = {id(item): i for i, item in enumerate(self.items)}
        self.queues = {
            sub_id: collections.deque(("held", n) for n in range(held))
            for sub_id, (_, held, _) in case["routes"].items()
        }
        self.routes = {
            sub_id: (owner, self.queues[sub_id], manual) for sub_id, (owner, _, manual) in case["routes"].items()
        }
        self.unacked: Dict[str, Tuple[str, str]] = dict(case["unacked"])
        self.filled: List[Any] = list(case["filled"])
        self.ack_header = case["ack_header"]
        self.events: Any = [] if case["beats"] else None
        self.maker = module.SlotMaker(Made, Made.__slots__, ("fixed",)) if case["slot_maker"] else self.make

    def make(self, frame: Any, *fields: Any) -> Tuple[Any, ...]:
        return (self.index[id(frame)], *fields)  # the very item decoded, and the fields

    def route(self, start: int) -> int:
        result: int = self.module.route_messages(
            self.items, start, self.routes, self.ack_header, self.unacked, self.maker, self.filled, self.events, BEAT
        )
        return result

    def entry(self, made: Any) -> Any:
        if type(made) is not Made:
            return made
        assert made.fixed == "fixed"
        return (self.index[id(made.frame)], made.subscription, made.message_id, made.ack_id, made.destination)

    def state(self) -> Tuple[Any, ...]:
        return (
            {sub_id: [self.entry(made) for made in queue] for sub_id, queue in self.queues.items()},
            list(self.unacked.items()),
            self.filled,
            None if self.events is None else len(self.events),
        )


def model(run: Run, start: int) -> Tuple[int, Tuple[Any, ...]]:
    """What route_messages does (its docstring), written with Frame.get, on a copy of ``run``'s state."""
    queues = {sub_id: [run.entry(made) for made in queue] for sub_id, queue in run.queues.items()}
    unacked, filled = dict(run.unacked), list(run.filled)
    beats = None if run.events is None else len(run.events)
    i = start
    while i < len(run.items):
        frame = run.items[i]
        if not hasattr(frame, "command") and beats is not None:  # a heart-beat, routed past
            beats += 1
            i += 1
            continue
        if not hasattr(frame, "command") or frame.command != "MESSAGE":
            break
        sub_id, message_id = frame.get("subscription"), frame.get("message-id")
        if sub_id not in run.routes or message_id is None:
            break
        owner, _, manual = run.routes[sub_id]
        ack_id = (frame.get("ack") if run.ack_header else None) or message_id
        if manual:
            unacked[ack_id] = (sub_id, message_id)
        queues[sub_id].append((i, sub_id, message_id, ack_id, frame.get("destination")))
        if not filled or filled[-1] is not owner:
            filled.append(owner)
        i += 1
    return min(i, len(run.items)), (queues, list(unacked.items()), filled, beats)


@DIFF
@given(case=cases())
def test_twins_route_identically(case: Dict[str, Any]) -> None:
    compiled, python = Run(C, case), Run(P, case)
    assert describe(compiled.items) == describe(python.items)
    start = case["start_seed"] % (len(python.items) + 3)  # past the end too
    while True:  # from each item it stopped at on (what the connection does after the general path)
        expected = model(python, start)
        stop = compiled.route(start)
        assert stop == python.route(start)
        assert compiled.state() == python.state()
        assert (stop, python.state()) == expected
        if stop >= len(python.items):
            break
        start = stop + 1


@DIFF
@given(case=cases())
def test_resuming_after_each_stop_takes_every_item_once_in_order(case: Dict[str, Any]) -> None:
    # the client connection's loop: route, take the item it stopped at by the general path, go on
    results = []
    for module in (C, P):
        run = Run(module, case)
        general, i = [], 0
        while True:
            i = run.route(i)
            if i >= len(run.items):
                break
            general.append(i)
            i += 1
        queued = {
            sub_id: [run.entry(made)[0] for made in queue if run.entry(made)[0] != "held"]
            for sub_id, queue in run.queues.items()
        }
        # (with beats every heart-beat is routed past, into events: the general path takes none)
        beats = [n for n, item in enumerate(run.items) if not hasattr(item, "command")] if case["beats"] else []
        assert run.events is None or len(run.events) == len(beats)
        taken = sorted(general + beats + [index for indexes in queued.values() for index in indexes])
        assert taken == list(range(len(run.items)))  # each once
        for indexes in queued.values():
            assert indexes == sorted(indexes)
        results.append((general, run.state()))
    assert results[0] == results[1]


def test_an_unknown_subscription_stops_and_a_later_call_resumes() -> None:
    for module in (C, P):
        encoder = P.Encoder("1.2")
        data = b"".join(
            encoder.encode("MESSAGE", [("subscription", sub), ("message-id", str(n)), ("ack", f"a{n}")])
            for n, sub in enumerate(["s", "s", "gone", "s"])
        )
        items = module.Decoder("1.2").feed(data)
        queue: collections.deque = collections.deque()
        unacked: Dict[str, Any] = {}
        filled: List[Any] = []
        routes = {"s": ("owner", queue, True)}
        assert module.route_messages(items, 0, routes, True, unacked, lambda *a: a[1:], filled) == 2
        assert module.route_messages(items, 3, routes, True, unacked, lambda *a: a[1:], filled) == 4
        assert [entry[1] for entry in queue] == ["0", "1", "3"]
        assert list(unacked) == ["a0", "a1", "a3"] and filled == ["owner"]  # (runs of one owner: noted once)


@pytest.mark.parametrize("start", [-1, -2, -5])
def test_a_negative_start_counts_as_0_in_both_twins(start: int) -> None:
    # (the connection never passes one; the Python twin once indexed from the end, items[-1] first)
    for module in (C, P):
        encoder = P.Encoder("1.2")
        data = b"".join(encoder.encode("MESSAGE", [("subscription", "s"), ("message-id", str(n))]) for n in range(3))
        items = module.Decoder("1.2").feed(data)
        queue: List[Any] = []
        stop = module.route_messages(items, start, {"s": ("o", queue, False)}, True, {}, lambda *a: a[2], [])
        assert (stop, queue) == (3, ["0", "1", "2"])
