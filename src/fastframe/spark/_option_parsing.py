"""How the ``stomp`` format reads its options, for files and brokers alike: one parser.

Spark hands a data source its options as strings in a case-insensitive map; Python callers
(``fastframe convert``, the tests) pass Python values. Names match ignoring case, ``_`` and ``-``;
each value is converted by its kind; an unknown name or a bad value is a :class:`ValueError` that
names the option. The file half (:mod:`._file_options`) and the broker half
(:mod:`._stream_options`) each declare their options as ``name: (kind, default)`` and call
:func:`parse`; kinds of their own come as ``converters``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..codec import VERSIONS

Converter = Callable[[Any], Any]


def key(name: str) -> str:
    """The name as matched: case, ``_`` and ``-`` ignored."""
    return name.replace("_", "").replace("-", "").lower()


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"not an integer: {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"not an integer: {value!r}") from None


def parse_seconds(value: Any) -> float:
    """A deadline: more than 0 and at most a day."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"not a number of seconds: {value!r}") from None
    if not seconds > 0 or seconds > 86_400:
        raise ValueError(f"must be more than 0 and at most 86400 seconds, not {value!r}")
    return seconds


def choice(value: Any, choices: Tuple[str, ...], upper: bool = False) -> str:
    text = str(value).strip()
    text = text.upper() if upper else text.lower()
    if text not in choices:
        raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
    return text


def parse_paths(value: Any) -> List[str]:
    if isinstance(value, str):
        # Spark passes several load() paths as a JSON array in "paths"
        parsed = json.loads(value) if value.lstrip().startswith("[") else [value]
    else:
        parsed = list(value)
    if not all(isinstance(p, str) for p in parsed):
        raise ValueError(f"paths must be strings, not {value!r}")
    return [os.fspath(p) for p in parsed]


def parse_size(value: Any) -> int:
    """A size in bytes (``fastframe.archive.parse_size``: ``64m``, ``1 GiB``), imported when an option is
    given one: the archive package costs each Spark Python process of a stream 10-30 ms to import."""
    from ..archive import parse_size as parse

    return parse(value)


def _auto(convert: Converter) -> Converter:
    # an optional value: empty, "none" or "auto" is None (the codec's own default)
    return lambda value: None if value is None or str(value).lower() in ("", "none", "auto") else convert(value)


#: The kinds both halves use.
KINDS: Dict[str, Converter] = {
    "str": lambda value: value if isinstance(value, str) else os.fspath(value),
    "paths": parse_paths,
    "bool": parse_bool,
    "bool?": _auto(parse_bool),
    "int": parse_int,
    "size": parse_size,
    "seconds": parse_seconds,
    "version": lambda value: choice(value, VERSIONS),
    "version?": _auto(lambda value: choice(value, VERSIONS)),
}


def convert(kind: str, value: Any, converters: Optional[Mapping[str, Converter]] = None) -> Any:
    """``value`` converted by ``kind`` (one of :data:`KINDS`, or of ``converters``)."""
    try:
        converter = KINDS[kind] if converters is None or kind not in converters else converters[kind]
    except KeyError:
        raise AssertionError(kind) from None
    return converter(value)


def match(options: Mapping[str, Any], known: Mapping[str, Any], what: str) -> Dict[str, Any]:
    """Option values keyed by their canonical name; unknown names are refused."""
    canonical = {key(name): name for name in known}
    out: Dict[str, Any] = {}
    for name, value in options.items():
        found = canonical.get(key(name))
        if found is None:
            names = ", ".join(sorted(known))
            raise ValueError(f"unknown {what} option {name!r}; the options are: {names}")
        out[found] = value
    return out


def parse(
    options: Mapping[str, Any],
    known: Mapping[str, Tuple[str, Any]],
    what: str,
    converters: Optional[Mapping[str, Converter]] = None,
) -> Dict[str, Any]:
    """Every option of ``known`` (``name: (kind, default)``): given ones converted, the others their
    default; an unknown name or a bad value is a :class:`ValueError` naming the option."""
    given = match(options, known, what)
    values: Dict[str, Any] = {}
    for name, (kind, default) in known.items():
        if name not in given:
            values[name] = default
            continue
        try:
            values[name] = convert(kind, given[name], converters)
        except ValueError as exc:
            raise ValueError(f"option {name}: {exc}") from None
    return values
