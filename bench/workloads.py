"""Deterministic, seeded benchmark workloads.

Each :class:`Workload` holds the *logical* frames (``command``, tuple of
``(name, value)`` pairs, ``body`` bytes) and the stream of bytes they encode
to. The bytes are built with fastframe's own reference encoder
(``fastframe.codec._codec_py.encode``), so every workload is valid STOMP 1.2 and
decodes back to exactly its logical frames (``check_workload``).

Workloads (``WORKLOAD_NAMES``):

- ``small``: MESSAGE frames as RabbitMQ sends them (subscription,
  destination, message-id, redelivered, ack, content-type, content-length,
  custom headers; 5-8 headers), 0-200 B JSON bodies, content-length always;
- ``medium``: SEND frames as a client sends them, 1-4 KiB text/JSON bodies;
- ``large``: MESSAGE frames with 64 KiB-1 MiB binary bodies full of NULs;
- ``escape``: headers heavy with escapes (``\\n \\r \\c \\\\``) and non-ASCII UTF-8;
- ``mixed``: a broker stream with CONNECTED, MESSAGE, RECEIPT, ERROR frames,
  CRLF line endings on some frames, heart-beats (LF and CRLF) between frames,
  and bodies without content-length;
- ``repeats``: MESSAGE frames with repeated header names (a proxy prepends
  headers; the first entry wins by the spec);
- ``client``: SEND frames as an application hands them to a client library:
  5 headers (content-length among them), 40-80 B JSON bodies; ``bench.compare``
  also times the client's calls on them (``encode(command, dict, body)``,
  ``Encoder().encode(command, pairs, body)``, ``Frame(command, dict, body)``).

Sizes: ``"full"`` for measurements, ``"tiny"`` for CI smoke runs; a mapping
``{name: frame count}`` overrides counts. The output depends only on the seed
and the sizes (``random.Random`` with a per-workload seed; no clock, no uuid).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from fastframe.codec import _codec_py

__all__ = [
    "LogicalFrame",
    "Workload",
    "WORKLOAD_NAMES",
    "SIZES",
    "DEFAULT_SEED",
    "build_workload",
    "build_workloads",
    "check_workload",
]

Header = Tuple[str, str]
#: ``(command, ((name, value), ...), body)``: what a decoder must give back.
LogicalFrame = Tuple[str, Tuple[Header, ...], bytes]

DEFAULT_SEED = 20240601
WORKLOAD_NAMES: Tuple[str, ...] = ("small", "medium", "large", "escape", "mixed", "repeats", "client")

#: Frame counts per workload for each size preset.
SIZES: Dict[str, Dict[str, int]] = {
    "full": {
        "small": 100_000,
        "medium": 10_000,
        "large": 24,
        "escape": 30_000,
        "mixed": 30_000,
        "repeats": 20_000,
        "client": 100_000,
    },
    "tiny": {"small": 300, "medium": 30, "large": 2, "escape": 100, "mixed": 120, "repeats": 60, "client": 300},
}

# large bodies: 64 KiB .. 1 MiB (log-uniform); tiny runs cap them to keep CI fast
_LARGE_MIN = 64 * 1024
_LARGE_MAX = {"full": 1024 * 1024, "tiny": 128 * 1024}


@dataclass(frozen=True)
class Workload:
    """One workload: logical frames and their encoded stream."""

    name: str
    description: str
    frames: Tuple[LogicalFrame, ...]
    data: bytes
    #: stream offset just past each frame's NUL, for cutting whole-frame prefixes
    ends: Tuple[int, ...] = field(repr=False)

    def __len__(self) -> int:
        return len(self.frames)

    def prefix(self, n_frames: int) -> Tuple[Tuple[LogicalFrame, ...], bytes]:
        """The first ``n_frames`` frames and the bytes that carry exactly them."""
        n_frames = max(0, min(n_frames, len(self.frames)))
        end = self.ends[n_frames - 1] if n_frames else 0
        return self.frames[:n_frames], self.data[:end]

    def slice_bytes(self, max_bytes: int) -> Tuple[Tuple[LogicalFrame, ...], bytes]:
        """The longest whole-frame prefix of at most ``max_bytes`` bytes (at least one frame)."""
        n = 1
        while n < len(self.ends) and self.ends[n] <= max_bytes:
            n += 1
        return self.prefix(n)


# --------------------------------------------------------------------------- pieces

_WORDS = (
    "order", "shipped", "payment", "received", "invoice", "warehouse", "ready", "delayed", "retry",
    "customer", "refund", "ok", "pending", "priority", "express", "return",
)  # fmt: skip
_QUEUES = ("/queue/orders", "/queue/invoices", "/topic/prices.eu", "/exchange/amq.topic/audit.log", "/amq/queue/jobs")
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# non-ASCII text of 2, 3 and 4-byte UTF-8 sequences
_UNICODE = ("zürich", "Größe", "café", "naïve", "日本語", "東京", "Ελλάδα", "Москва", "😀", "→", "€", "ß")  # fmt: skip
# characters that 1.2 escapes in header names and values
_SPECIAL = (":", "\n", "\r", "\\")


def _token(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(_ALNUM, k=length))


def _json_body(rng: random.Random, seq: int, limit: int) -> bytes:
    """A JSON document of at most ``limit`` bytes (possibly empty)."""
    if limit < 2:
        return b""
    doc: Dict[str, object] = {"id": seq}
    candidates = [
        ("status", lambda: rng.choice(("new", "paid", "shipped", "cancelled"))),
        ("customer", lambda: f"c-{rng.randrange(100000)}"),
        ("amount", lambda: rng.randrange(100, 999999) / 100),
        ("qty", lambda: rng.randrange(1, 50)),
        ("note", lambda: " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 6)))),
        ("sku", lambda: f"SKU-{rng.randrange(10000):04d}"),
        ("tags", lambda: [rng.choice(_WORDS) for _ in range(rng.randrange(1, 4))]),
        ("ok", lambda: rng.random() < 0.5),
    ]
    body = json.dumps(doc, separators=(",", ":")).encode()
    if len(body) > limit:
        return b"[]"
    for key, make in candidates:
        doc[key] = make()
        grown = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        if len(grown) > limit:
            break
        body = grown
    return body


def _text_block(rng: random.Random, length: int) -> bytes:
    words: List[str] = []
    size = 0
    while size < length:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words).encode()[:length]


def _message_id(session: str, seq: int) -> str:
    return f"T_sub-{seq % 4}@@session-{session}@@{seq + 1}"


def _escaped_text(rng: random.Random, parts: int) -> str:
    """Text mixing ASCII, non-ASCII UTF-8 and the characters 1.2 escapes."""
    out = []
    for _ in range(parts):
        kind = rng.random()
        if kind < 0.35:
            out.append(rng.choice(_SPECIAL))
        elif kind < 0.7:
            out.append(rng.choice(_UNICODE))
        else:
            out.append(_token(rng, rng.randrange(1, 8)))
    return "".join(out)


# --------------------------------------------------------------------------- workloads


def _json_pool(rng: random.Random, size: int = 2048) -> List[bytes]:
    """Distinct JSON bodies of 0-200 B; frames draw from the pool (building one per frame is slow)."""
    return [_json_body(rng, seq, rng.randrange(0, 201)) for seq in range(size)]


def _small(rng: random.Random, count: int, size: str) -> List[LogicalFrame]:
    session = _token(rng, 22)
    bodies = _json_pool(rng)
    frames = []
    for seq in range(count):
        body = b"" if rng.random() < 0.05 else rng.choice(bodies)
        sub = f"sub-{seq % 4}"
        headers: List[Header] = [
            ("subscription", sub),
            ("destination", rng.choice(_QUEUES)),
            ("message-id", _message_id(session, seq)),
            ("redelivered", "true" if rng.random() < 0.03 else "false"),
        ]
        # optional headers, so that the frame has 5-8 headers in all
        optional: List[Header] = []
        if rng.random() < 0.6:
            optional.append(("ack", _message_id(session, seq)))
        if body and rng.random() < 0.9:
            optional.append(("content-type", "application/json"))
        extras = (
            ("persistent", "true"),
            ("priority", str(rng.randrange(10))),
            ("correlation-id", f"{rng.getrandbits(48):012x}"),
            ("x-trace-id", f"{rng.getrandbits(64):016x}"),
            ("timestamp", str(1717200000 + seq)),
            ("app-id", "billing"),
        )
        optional += rng.sample(extras, rng.randrange(0, 3))
        headers += optional[:3]
        headers.append(("content-length", str(len(body))))
        frames.append(("MESSAGE", tuple(headers), body))
    return frames


def _medium(rng: random.Random, count: int, size: str) -> List[LogicalFrame]:
    # bodies are windows on one long text: varied content without building each from words
    text = _text_block(rng, 256 * 1024)
    frames = []
    for seq in range(count):
        length = rng.randrange(1024, 4097)
        start = rng.randrange(0, len(text) - length)
        if rng.random() < 0.5:
            body = text[start : start + length]
            ctype = "text/plain"
        else:
            prefix = b'{"id":%d,"text":"' % seq
            body = prefix + text[start : start + length - len(prefix) - 2] + b'"}'
            ctype = "application/json"
        headers: List[Header] = [
            ("destination", rng.choice(_QUEUES)),
            ("content-type", ctype),
            ("persistent", "true"),
        ]
        if rng.random() < 0.5:
            headers.append(("receipt", f"r-{seq}"))
        if rng.random() < 0.3:
            headers.append(("transaction", f"tx-{seq // 10}"))
        headers.append(("content-length", str(len(body))))
        frames.append(("SEND", tuple(headers), body))
    return frames


def _large(rng: random.Random, count: int, size: str) -> List[LogicalFrame]:
    top = _LARGE_MAX.get(size, _LARGE_MAX["full"])
    frames = []
    for seq in range(count):
        # log-uniform between 64 KiB and the top, so small and huge bodies both occur
        length = int(_LARGE_MIN * (top / _LARGE_MIN) ** rng.random())
        body = rng.randbytes(length)
        headers = (
            ("subscription", "sub-0"),
            ("destination", "/queue/blobs"),
            ("message-id", f"blob-{seq}"),
            ("redelivered", "false"),
            ("content-type", "application/octet-stream"),
            ("content-length", str(length)),
        )
        frames.append(("MESSAGE", headers, body))
    return frames


def _escape(rng: random.Random, count: int, size: str) -> List[LogicalFrame]:
    # distinct names: repeated headers are the ``repeats`` workload's subject, not this one's
    names = sorted({"x-" + _escaped_text(rng, rng.randrange(1, 4)) for _ in range(256)})
    values = [_escaped_text(rng, rng.randrange(3, 10)) for _ in range(2048)]
    texts = [_escaped_text(rng, 3) for _ in range(256)]
    frames = []
    for seq in range(count):
        headers: List[Header] = [
            ("destination", "/topic/" + rng.choice(texts)),
            ("message-id", f"m:{seq}"),
            ("subscription", "sub:" + rng.choice(_UNICODE)),
        ]
        headers += zip(rng.sample(names, rng.randrange(4, 9)), rng.choices(values, k=8))
        body = " ".join(rng.choices(_UNICODE, k=rng.randrange(0, 12))).encode()
        headers.append(("content-type", "text/plain;charset=utf-8"))
        headers.append(("content-length", str(len(body))))
        frames.append(("MESSAGE", tuple(headers), body))
    return frames


def _mixed_frame(
    rng: random.Random, seq: int, session: str, bodies: List[bytes], text: bytes
) -> Tuple[LogicalFrame, bool]:
    """One frame of the mixed stream, and whether its body travels without content-length."""
    kind = rng.random()
    if kind < 0.1:
        return ("RECEIPT", (("receipt-id", f"r-{seq}"),), b""), False
    if kind < 0.13:
        start = rng.randrange(0, len(text) - 80)
        body = b"The message could not be routed\n" + text[start : start + rng.randrange(0, 80)]
        headers = (("message", "malformed frame received"), ("receipt-id", f"r-{seq}"), ("content-type", "text/plain"))
        return ("ERROR", headers + (("content-length", str(len(body))),), body), False
    is_text = rng.random() < 0.4
    if is_text:
        start = rng.randrange(0, len(text) - 300)
        body = text[start : start + rng.randrange(0, 300)]
    else:
        body = rng.choice(bodies)
    headers_l: List[Header] = [
        ("subscription", f"sub-{seq % 3}"),
        ("destination", rng.choice(_QUEUES)),
        ("message-id", _message_id(session, seq)),
        ("redelivered", "false"),
    ]
    if body:
        headers_l.append(("content-type", "text/plain" if is_text else "application/json"))
    # text bodies without content-length end at the first NUL, as ActiveMQ forwards them
    no_length = is_text and rng.random() < 0.7
    if not no_length:
        headers_l.append(("content-length", str(len(body))))
    return ("MESSAGE", tuple(headers_l), body), no_length


def _mixed_stream(rng: random.Random, count: int) -> Tuple[List[LogicalFrame], List[bytes]]:
    session = _token(rng, 22)
    bodies = _json_pool(rng)
    text = _text_block(rng, 64 * 1024)
    frames: List[LogicalFrame] = []
    pieces: List[bytes] = []
    connected: LogicalFrame = (
        "CONNECTED",
        (("version", "1.2"), ("heart-beat", "10000,10000"), ("server", "RabbitMQ/3.13.2"), ("session", session)),
        b"",
    )
    for seq in range(count):
        if seq == 0:
            frame, no_length = connected, False
        else:
            frame, no_length = _mixed_frame(rng, seq, session, bodies, text)
        eol = "\r\n" if rng.random() < 0.5 else "\n"
        data = _codec_py.encode(frame[0], frame[1], frame[2], content_length=False if no_length else None, eol=eol)
        pieces.append(data)
        frames.append(frame)
        # the EOL brokers put after the NUL, then idle heart-beats now and then
        trailer = eol.encode() if rng.random() < 0.8 else b""
        for _ in range(rng.choice((0, 0, 0, 1, 2))):
            trailer += rng.choice((b"\n", b"\r\n"))
        pieces.append(trailer)
    return frames, pieces


def _repeats(rng: random.Random, count: int, size: str) -> List[LogicalFrame]:
    session = _token(rng, 22)
    bodies = _json_pool(rng)
    frames = []
    for seq in range(count):
        body = rng.choice(bodies)
        headers: List[Header] = []
        # a proxy prepends its own entries: the first one is the value that counts
        for hop in range(rng.randrange(1, 4)):
            headers.append(("x-via", f"proxy-{hop}.example"))
        if rng.random() < 0.5:
            headers.append(("destination", "/queue/rerouted"))
        headers += [
            ("subscription", f"sub-{seq % 4}"),
            ("destination", rng.choice(_QUEUES)),
            ("message-id", _message_id(session, seq)),
            ("x-via", "broker.example"),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
        ]
        frames.append(("MESSAGE", tuple(headers), body))
    return frames


def _client(rng: random.Random, count: int, size: str) -> List[LogicalFrame]:
    bodies = [body for body in _json_pool(rng) if 40 <= len(body) <= 80] or [b'{"id":0}']
    frames = []
    for seq in range(count):
        body = rng.choice(bodies)
        headers = (
            ("destination", rng.choice(_QUEUES)),
            ("content-type", "application/json"),
            ("persistent", "true"),
            ("receipt", f"r-{seq}"),
            ("content-length", str(len(body))),
        )
        frames.append(("SEND", headers, body))
    return frames


_BUILDERS = {
    "small": (_small, "MESSAGE frames as RabbitMQ sends them, 5-8 headers, 0-200 B JSON bodies"),
    "medium": (_medium, "SEND frames, 1-4 KiB bodies"),
    "large": (_large, "MESSAGE frames, 64 KiB-1 MiB binary bodies with NULs"),
    "escape": (_escape, "headers heavy with escapes and non-ASCII UTF-8"),
    "mixed": (
        _mixed_stream,
        "CONNECTED/MESSAGE/RECEIPT/ERROR, CRLF frames, heart-beats, bodies without content-length",
    ),
    "repeats": (_repeats, "MESSAGE frames with repeated header names (first entry wins)"),
    "client": (_client, "SEND frames as an application gives them, 5 headers, 40-80 B JSON bodies"),
}


def build_workload(name: str, count: int, *, seed: int = DEFAULT_SEED, size: str = "full") -> Workload:
    """Build one workload of ``count`` frames."""
    builder, description = _BUILDERS[name]
    # one generator per workload, so a workload does not change when another one's size does
    rng = random.Random(f"{seed}:{name}")
    if name == "mixed":
        frames, pieces = _mixed_stream(rng, count)
    else:
        frames = builder(rng, count, size)  # type: ignore[operator]
        pieces = []
        for command, headers, body in frames:
            pieces.append(_codec_py.encode(command, headers, body))
            pieces.append(b"")
    ends = []
    offset = 0
    # pieces alternate: a frame's bytes, then what follows its NUL (EOLs)
    for i in range(0, len(pieces), 2):
        offset += len(pieces[i])
        ends.append(offset)
        offset += len(pieces[i + 1])
    return Workload(name, description, tuple(frames), b"".join(pieces), tuple(ends))


def build_workloads(
    sizes: Union[str, Mapping[str, int]] = "full",
    *,
    names: Optional[Sequence[str]] = None,
    seed: int = DEFAULT_SEED,
) -> Dict[str, Workload]:
    """Build the workloads for a size preset (``"full"``, ``"tiny"``) or a ``{name: count}`` mapping."""
    if isinstance(sizes, str):
        if sizes not in SIZES:
            raise ValueError(f"sizes must be one of {', '.join(SIZES)}, not {sizes!r}")
        counts, preset = SIZES[sizes], sizes
    else:
        counts, preset = {**SIZES["full"], **sizes}, "full"
    wanted = WORKLOAD_NAMES if names is None else tuple(names)
    unknown = set(wanted) - set(WORKLOAD_NAMES)
    if unknown:
        raise ValueError(f"unknown workloads: {', '.join(sorted(unknown))}")
    return {name: build_workload(name, counts[name], seed=seed, size=preset) for name in wanted}


def check_workload(workload: Workload, codec=_codec_py) -> None:  # type: ignore[no-untyped-def]
    """Raise AssertionError unless ``codec`` decodes the stream to exactly the logical frames."""
    decoded = codec.decode(workload.data)
    got = [(f.command, f.headers, f.body) for f in decoded]
    if got != list(workload.frames):
        for index, (have, want) in enumerate(zip(got, workload.frames)):
            if have != want:
                raise AssertionError(f"{workload.name}: frame {index} decodes to {have!r}, expected {want!r}")
        raise AssertionError(f"{workload.name}: {len(got)} frames decoded, expected {len(workload.frames)}")
    offsets = [f.offset for f in decoded]
    starts = [0] + list(workload.ends[:-1])
    # every frame starts at or after the previous frame's end (heart-beats may sit between)
    if any(o is None or o < s for o, s in zip(offsets, starts)):
        raise AssertionError(f"{workload.name}: frame offsets {offsets[:5]}... do not follow the frame ends")
