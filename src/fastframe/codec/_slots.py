"""What both twins' ``SlotMaker`` checks of the class it builds, written once.

A ``SlotMaker`` builds an instance of a class as ``object.__new__`` does and fills slots through
their member descriptors, as ``object.__setattr__`` would, without the class's ``__init__``: the
receiving fast path builds one message object per MESSAGE this way (``route_messages``).
"""

from __future__ import annotations

from types import MemberDescriptorType
from typing import Any, Sequence, Tuple

#: the most slots one SlotMaker fills (the compiled twin keeps their offsets in a fixed array)
MAX_SLOTS = 16
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


def slot_descriptors(cls: Any, names: Sequence[str], fixed: Sequence[Any]) -> Tuple[Any, ...]:
    """The member descriptors of ``cls``'s slots ``names``, in order; TypeError or ValueError when
    ``cls`` is not a class ``object.__new__`` builds or a name is not one of its slots."""
    if not isinstance(cls, type):
        raise TypeError(f"SlotMaker needs a class, not {type(cls).__name__}")
    builds = cls.__new__ is object.__new__  # type: ignore[comparison-overlap]
    if not builds or getattr(cls, "__abstractmethods__", None):
        raise TypeError(f"SlotMaker needs a class that object.__new__ builds; {cls.__qualname__} is not one")
    if not isinstance(names, (tuple, list)) or not all(type(name) is str for name in names):
        raise TypeError("SlotMaker's names must be a tuple or list of str")
    if not isinstance(fixed, (tuple, list)) or len(fixed) > len(names):
        raise TypeError("SlotMaker's fixed values must be a tuple or list, at most one per name")
    if len(names) > MAX_SLOTS:
        raise ValueError(f"SlotMaker fills at most {MAX_SLOTS} slots, not {len(names)}")
    descriptors = []
    for name in names:
        found = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)
        # (a descriptor copied into another class's namespace describes that other class's layout;
        # a class statement's __slots__ make writable object slots, a C type's members may be neither)
        if (
            type(found) is not MemberDescriptorType
            or not issubclass(cls, found.__objclass__)
            or not found.__objclass__.__flags__ & _HEAP_TYPE
        ):
            raise ValueError(f"{name!r} is not a slot of {cls.__qualname__}")
        descriptors.append(found)
    if len(set(names)) != len(names):
        raise ValueError("SlotMaker's names must differ")
    return tuple(descriptors)


def wrong_count(count: int, given: int) -> str:
    """The TypeError's message of a call with the wrong number of values."""
    return f"this SlotMaker takes {count} values ({given} given)"
