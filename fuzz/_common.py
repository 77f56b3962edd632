"""What the harnesses share: the input layout, decoding outcomes, seeds.

A decoding input is CONTROL bytes of settings, then the stream itself. The settings sit at a fixed
place in front, so a mutation of the stream never changes the options, and a seed is any STOMP
stream with CONTROL bytes put before it (all zero: default options, fed whole and byte by byte).

Control bytes: 0 version, strict, heart-beat events and two tolerances, the escape set;
1 the two three-state tolerances and which limits are set; 2-5 the limits; 6 how the stream is
cut into pieces; 7 a seed for the cuts, and for the column decoder's takes.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from fastframe import DecodeError
from fastframe.codec import _codec_c as C
from fastframe.codec import _codec_py as P

REPO = Path(__file__).resolve().parents[1]
# what the suite already has: where ../shared is, and how a Columns reads back as rows
sys.path.insert(0, str(REPO / "tests"))
from _shared import find_shared  # noqa: E402
from _strategies import column_rows  # noqa: E402,F401  (the harnesses import it from here)

CONTROL = 8
VERSIONS = (None, "1.0", "1.1", "1.2")
TRISTATE = (None, False, True, None)
TWINS = {"c": C, "py": P}


def twin() -> Any:
    """The twin a single-twin harness exercises: $FASTFRAME_FUZZ_TWIN, the compiled one by default."""
    return TWINS[os.environ.get("FASTFRAME_FUZZ_TWIN", "c")]


def split(data: bytes) -> Tuple[bytes, bytes]:
    control = data[:CONTROL]
    return control + bytes(CONTROL - len(control)), data[CONTROL:]


def decoder_options(control: bytes) -> Dict[str, Any]:
    b0, b1 = control[0], control[1]
    options: Dict[str, Any] = {}
    if VERSIONS[b0 & 3]:
        options["version"] = VERSIONS[b0 & 3]
    for bit, flag in (
        (2, "strict"),
        (3, "heartbeat_events"),
        (4, "allow_missing_colon"),
        (5, "keep_undefined_escapes"),
    ):
        if b0 >> bit & 1:
            options[flag] = True
    if VERSIONS[b0 >> 6]:
        options["escapes"] = VERSIONS[b0 >> 6]
    if control[2] >> 7:  # (max_header_count takes the low 3 bits)
        options["keep_invalid_utf8"] = True
    for shift, flag in ((0, "allow_colon_in_value"), (2, "allow_bare_cr")):
        if TRISTATE[b1 >> shift & 3] is not None:
            options[flag] = TRISTATE[b1 >> shift & 3]
    # small limits, so the fuzzer meets every one of them on short inputs
    limits = (
        ("max_header_count", control[2] % 8),
        ("max_line_length", control[3] % 64 + 1),
        ("max_body_size", control[4] % 128),
        ("max_frame_size", control[5] * 2 + 2),
    )
    for bit, (name, value) in enumerate(limits):
        if b1 >> (4 + bit) & 1:
            options[name] = value
    return options


def cut_points(control: bytes, size: int) -> List[int]:
    """Where the stream is cut: byte by byte, every k bytes, or at a few random places."""
    mode, seed = control[6] % 4, control[6] >> 2 | control[7] << 6
    if mode == 0 and size <= 512:  # byte by byte: the Python twin makes long inputs slow
        return list(range(1, size))
    if mode == 1:
        step = seed % 17 + 1
        return list(range(step, size, step))
    rng = random.Random(seed)
    return sorted({rng.randrange(size + 1) for _ in range(seed % 9)}) if size else []


def describe(items: Sequence[Any]) -> List[Tuple[Any, ...]]:
    return [
        ("frame", item.command, item.headers, item.body, item.offset)
        if hasattr(item, "command")
        else ("heartbeat", item.offset, item.eol)
        for item in items
    ]


def outcome(module: Any, data: bytes, cuts: Sequence[int], options: Dict[str, Any]) -> Tuple[Any, ...]:
    """Everything observable about decoding ``data`` fed in pieces ending at ``cuts``, then closed.

    ``("ok", events, heartbeats, bytes_fed, buffered)`` or
    ``("error", class, offset, code, limit, events, heartbeats, message)``.
    """
    decoder = module.Decoder(**options)
    seen: List[Any] = []
    try:
        start = 0
        for cut in [*cuts, len(data)]:
            seen += describe(decoder.feed(data[start:cut]))
            start = cut
        decoder.close()
    except DecodeError as error:
        seen += describe(error.frames)
        check_error_state(decoder, error)
        return ("error", type(error), error.offset, error.code, getattr(error, "limit", None), seen,
                decoder.heartbeats, str(error))  # fmt: skip
    return ("ok", seen, decoder.heartbeats, decoder.bytes_fed, decoder.buffered)


def check_error_state(decoder: Any, error: DecodeError) -> None:
    """After an error the decoder refuses input with the same error until reset()."""
    for again in (lambda: decoder.feed(b"SEND\n\n\0"), decoder.close):
        try:
            again()
        except DecodeError as repeat:
            assert (type(repeat), repeat.offset, repeat.frames) == (type(error), error.offset, []), repeat
        else:
            raise AssertionError("a decoder in its error state accepted input")
    decoder.reset()
    assert (decoder.feed(b""), decoder.buffered) == ([], 0)


def check_events(events: Sequence[Tuple[Any, ...]], size: int) -> None:
    """Offsets rise and stay inside the stream; frames hold str and bytes."""
    last = -1
    for event in events:
        offset = event[-1] if event[0] == "frame" else event[1]
        assert last < offset < size, (last, offset, size)
        last = offset
        if event[0] == "frame":
            _, command, headers, body, _ = event
            assert isinstance(command, str) and command and isinstance(body, bytes)
            assert all(isinstance(n, str) and isinstance(v, str) for n, v in headers)
        else:
            assert event[2] in (b"\n", b"\r\n")


# ----------------------------------------------------------------------------- seeds


def streams(max_size: int = 64 * 1024) -> Iterator[Tuple[str, bytes]]:
    """Seed streams: the hand-made seeds, sample streams, and the broker recordings up to max_size."""
    from fastframe.archive import generate_stream

    for path in sorted((REPO / "fuzz" / "seeds").glob("*.stomp")):
        yield f"hand-{path.stem}", path.read_bytes()
    for frames, seed in ((1, 0), (2, 1), (3, 2), (5, 3), (8, 4), (20, 5)):
        yield f"sample-{frames}-{seed}", generate_stream(frames, seed=seed)
        yield f"sample-{frames}-{seed}-crlf", generate_stream(frames, seed=seed, crlf=True)
    brokers = find_shared() / "corpus" / "brokers"
    if not brokers.is_dir():
        print(f"fuzz: no broker corpus at {brokers}; seeding from samples only", file=sys.stderr)
        return
    for path in sorted(brokers.glob("*/*.stomp")):
        if 0 < path.stat().st_size <= max_size:
            yield f"{path.parent.name}-{path.stem}", path.read_bytes()


def decoding_seeds() -> Iterator[Tuple[str, bytes]]:
    """Each stream under a few settings: defaults byte by byte, 1.0 with RabbitMQ's escapes, small limits."""
    settings = {
        "default": bytes(CONTROL),
        "v10-rabbit-pieces": bytes([1 | 3 << 6, 0, 0, 0, 0, 0, 2 | 5 << 2, 0]),
        "strict-events-every7": bytes([3 | 1 << 2 | 1 << 3, 0, 0, 0, 0, 0, 1 | 6 << 2, 0]),
        "limits-random": bytes([1 << 3 | 1 << 4 | 1 << 5, 0xF0 | 1 | 2 << 2, 3, 40, 100, 90, 3 | 9 << 2, 1]),
    }
    for name, stream in streams():
        for label, control in settings.items():
            yield f"{name}-{label}", control + stream


class Draw:
    """Takes choices from the front of the input, like atheris.FuzzedDataProvider but without
    atheris, so that a corpus replays under the sanitizers too. Past the end every choice is 0."""

    ALPHABET = "ab:\\\n\r\t é☃\0c-"

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        self.at += 1
        return self.data[self.at - 1] if self.at <= len(self.data) else 0

    def pick(self, choices: Sequence[Any]) -> Any:
        return choices[self.byte() % len(choices)]

    def binary(self, most: int) -> bytes:
        size = self.byte() % (most + 1)
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def text(self, most: int) -> str:
        """Mostly characters that matter to STOMP; a byte above 0xEF starts any code point."""
        out = []
        for _ in range(self.byte() % (most + 1)):
            b = self.byte()
            if b >= 0xF0:
                point = (b & 0x0F) << 16 | self.byte() << 8 | self.byte()
                out.append(chr(point % 0x110000))
            elif b >= 0x80:
                out.append(chr(b - 0x80 + 0x20))
            else:
                out.append(self.ALPHABET[b % len(self.ALPHABET)])
        return "".join(out)
