"""SlotMaker in both twins: what it builds, what it refuses, and that it keeps every reference once.

The compiled twin writes each slot at the offset its member descriptor names (no ``__init__``, no
``__setattr__``), so these tests hold it to what ``object.__new__`` plus the descriptors do in the
Python twin: the same objects, the same errors, no reference gained or lost.
"""

from __future__ import annotations

import gc
import sys
from types import ModuleType
from typing import Any

import pytest

from conftest import compiled_twin
from fastframe.codec import _codec_py as P


class Point:
    __slots__ = ("x", "y", "tag")

    def __init__(self, *args: Any) -> None:
        raise AssertionError("SlotMaker must not call __init__")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AssertionError("SlotMaker must not call __setattr__")


class Base:
    __slots__ = ("a",)


class Derived(Base):
    __slots__ = ("b",)


class WithDict:
    __slots__ = ("s", "__dict__")


def test_builds_without_init_the_slots_in_order_then_the_fixed_ones(codec: ModuleType) -> None:
    make = codec.SlotMaker(Point, ("x", "y", "tag"), ("fixed",))
    made = make(1, [2])
    assert type(made) is Point
    assert (made.x, made.y, made.tag) == (1, [2], "fixed")
    assert (make.cls, make.names, make.fixed) == (Point, ("x", "y", "tag"), ("fixed",))
    other = make(3, 4)
    assert other is not made and (other.x, other.y) == (3, 4)
    assert repr(make) == "SlotMaker(Point, ('x', 'y', 'tag'), fixed=1)"


def test_slots_of_a_base_class_and_a_class_with_a_dict(codec: ModuleType) -> None:
    made = codec.SlotMaker(Derived, ["b", "a"])("B", "A")
    assert (made.a, made.b) == ("A", "B")
    made = codec.SlotMaker(WithDict, ("s",), (5,))()
    assert made.s == 5 and made.__dict__ == {}


def test_a_slot_not_named_stays_unset(codec: ModuleType) -> None:
    made = codec.SlotMaker(Point, ("y",))(7)
    assert made.y == 7
    with pytest.raises(AttributeError):
        made.x  # noqa: B018


class Copied:
    __slots__ = ()
    stolen = Point.__dict__["x"]  # another class's descriptor: its offset is Point's layout


class Abstract:
    __slots__ = ("v",)
    __abstractmethods__ = frozenset({"m"})


class OwnNew:
    __slots__ = ("v",)

    def __new__(cls) -> "OwnNew":
        return super().__new__(cls)


@pytest.mark.parametrize(
    "args, error, text",
    [
        ((3, ("x",)), TypeError, "SlotMaker needs a class, not int"),
        ((int, ("real",)), TypeError, "SlotMaker needs a class that object.__new__ builds; int is not one"),
        ((OwnNew, ("v",)), TypeError, "SlotMaker needs a class that object.__new__ builds; OwnNew is not one"),
        ((Abstract, ("v",)), TypeError, "SlotMaker needs a class that object.__new__ builds; Abstract is not one"),
        ((Point, "x"), TypeError, "SlotMaker's names must be a tuple or list of str"),
        ((Point, (b"x",)), TypeError, "SlotMaker's names must be a tuple or list of str"),
        ((Point, ("x",), (1, 2)), TypeError, "SlotMaker's fixed values must be a tuple or list, at most one per name"),
        ((Point, ("x",), 1), TypeError, "SlotMaker's fixed values must be a tuple or list, at most one per name"),
        ((Point, ("z",)), ValueError, "'z' is not a slot of Point"),
        ((Point, ("__init__",)), ValueError, "'__init__' is not a slot of Point"),
        ((Copied, ("stolen",)), ValueError, "'stolen' is not a slot of Copied"),
        ((WithDict, ("__dict__",)), ValueError, "'__dict__' is not a slot of WithDict"),
        ((Point, ("x", "x")), ValueError, "SlotMaker's names must differ"),
        ((Point, ("x",) * 17), ValueError, "SlotMaker fills at most 16 slots, not 17"),
    ],
)
def test_what_it_refuses_both_twins_refuse_alike(codec: ModuleType, args: Any, error: type, text: str) -> None:
    with pytest.raises(error) as raised:
        codec.SlotMaker(*args)
    assert str(raised.value) == text


def test_a_call_with_the_wrong_number_of_values(codec: ModuleType) -> None:
    make = codec.SlotMaker(Point, ("x", "y", "tag"), (0,))
    for values in ((), (1,), (1, 2, 3)):
        with pytest.raises(TypeError, match=rf"^this SlotMaker takes 2 values \({len(values)} given\)$"):
            make(*values)


def test_every_reference_is_kept_once_and_freed_with_the_object(codec: ModuleType) -> None:
    value, fixed = object(), object()
    before = sys.getrefcount(value), sys.getrefcount(fixed)
    make = codec.SlotMaker(Point, ("x", "y", "tag"), (fixed,))
    made = [make(value, value) for _ in range(1000)]
    assert sys.getrefcount(value) == before[0] + 2000
    assert sys.getrefcount(fixed) == before[1] + 1 + 1000  # (the maker's own, and each object's)
    del made
    gc.collect()
    assert sys.getrefcount(value) == before[0]
    assert sys.getrefcount(fixed) == before[1] + 1


def test_route_messages_builds_with_it_as_the_python_twin_does() -> None:
    C = compiled_twin()
    data = P.Encoder("1.2").encode("MESSAGE", [("subscription", "s"), ("message-id", "7"), ("destination", "/q")])
    results = []
    for module in (C, P):
        queue: list = []

        class Message:
            __slots__ = ("frame", "sub", "mid", "ack", "dest", "session")

        make = module.SlotMaker(Message, Message.__slots__, ("the session",))
        items = module.Decoder("1.2").feed(data * 2)
        assert module.route_messages(items, 0, {"s": ("o", queue, False)}, True, {}, make, []) == 2
        results.append([(m.frame is items[n], m.sub, m.mid, m.ack, m.dest, m.session) for n, m in enumerate(queue)])
    assert results[0] == results[1] == [(True, "s", "7", "7", "/q", "the session")] * 2
