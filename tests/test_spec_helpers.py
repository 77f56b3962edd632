"""fastframe.protocol.spec: frame validation, heart-beat and version negotiation, body decoding.

The helpers are plain Python, but the ones that take a Frame are run with
frames of both twins (the ``codec`` fixture), decoded or built by hand.
"""

from __future__ import annotations

import json
import pickle

import pytest

import fastframe
from fastframe.protocol import spec
from fastframe.protocol.spec import (
    ValidationError,
    body_text,
    frame_problems,
    negotiate_heartbeat,
    negotiate_version,
    parse_heartbeat,
    validate,
)

# --------------------------------------------------------------------------- validation

# A minimal valid frame of each command, per version, and the side that sends it.
VALID = {
    "1.2": [
        ("client", "CONNECT", {"accept-version": "1.2", "host": "/"}),
        ("client", "STOMP", {"accept-version": "1.1,1.2", "host": "/", "heart-beat": "0,1000"}),
        ("client", "SEND", {"destination": "/queue/a"}),
        ("client", "SUBSCRIBE", {"destination": "/queue/a", "id": "0", "ack": "client-individual"}),
        ("client", "UNSUBSCRIBE", {"id": "0"}),
        ("client", "ACK", {"id": "12345", "transaction": "tx1"}),
        ("client", "NACK", {"id": "12345"}),
        ("client", "BEGIN", {"transaction": "tx1"}),
        ("client", "COMMIT", {"transaction": "tx1"}),
        ("client", "ABORT", {"transaction": "tx1"}),
        ("client", "DISCONNECT", {"receipt": "77"}),
        ("server", "CONNECTED", {"version": "1.2", "heart-beat": "1000,0", "session": "s:1"}),
        ("server", "MESSAGE", {"destination": "/queue/a", "message-id": "007", "subscription": "0"}),
        ("server", "RECEIPT", {"receipt-id": "77"}),
        ("server", "ERROR", {}),
    ],
    "1.1": [
        ("client", "CONNECT", {"accept-version": "1.1", "host": "/"}),
        ("client", "STOMP", {"accept-version": "1.1", "host": "/"}),
        ("client", "SUBSCRIBE", {"destination": "/queue/a", "id": "0"}),
        ("client", "UNSUBSCRIBE", {"id": "0"}),
        ("client", "ACK", {"message-id": "m1", "subscription": "0"}),
        ("client", "NACK", {"message-id": "m1", "subscription": "0"}),
        ("server", "CONNECTED", {"version": "1.1"}),
        ("server", "MESSAGE", {"destination": "/queue/a", "message-id": "m1", "subscription": "0"}),
    ],
    "1.0": [
        ("client", "CONNECT", {}),
        ("client", "CONNECT", {"login": "guest", "passcode": "guest"}),
        ("client", "SUBSCRIBE", {"destination": "/queue/a", "ack": "client"}),
        ("client", "UNSUBSCRIBE", {"destination": "/queue/a"}),
        ("client", "UNSUBSCRIBE", {"id": "0"}),
        ("client", "ACK", {"message-id": "m1"}),
        ("server", "CONNECTED", {"session": "s1"}),
        ("server", "MESSAGE", {"destination": "/queue/a", "message-id": "m1"}),
    ],
}
VALID_CASES = [(version, *case) for version, cases in VALID.items() for case in cases]


@pytest.mark.parametrize(("version", "side", "command", "headers"), VALID_CASES)
def test_valid_frames_have_no_problems(codec, version, side, command, headers):
    frame = codec.Frame(command, headers)
    assert frame_problems(frame, version, side) == []
    assert frame_problems(frame, version) == []
    assert validate(frame, version, side) is frame


# (version, command, headers given, header reported missing)
MISSING = [
    ("1.2", "SUBSCRIBE", {"destination": "/q"}, "id"),
    ("1.1", "SUBSCRIBE", {"destination": "/q"}, "id"),
    ("1.2", "ACK", {"message-id": "m", "subscription": "0"}, "id"),
    ("1.2", "NACK", {"message-id": "m", "subscription": "0"}, "id"),
    ("1.1", "ACK", {"id": "m", "subscription": "0"}, "message-id"),
    ("1.1", "ACK", {"id": "m", "message-id": "m"}, "subscription"),
    ("1.1", "NACK", {"message-id": "m"}, "subscription"),
    ("1.0", "ACK", {"id": "m"}, "message-id"),
    ("1.2", "CONNECT", {"host": "/"}, "accept-version"),
    ("1.2", "STOMP", {"accept-version": "1.2"}, "host"),
    ("1.1", "CONNECT", {"accept-version": "1.1"}, "host"),
    ("1.2", "CONNECTED", {"session": "s"}, "version"),
    ("1.1", "CONNECTED", {}, "version"),
    ("1.2", "SEND", {}, "destination"),
    ("1.0", "SEND", {}, "destination"),
    ("1.2", "UNSUBSCRIBE", {"destination": "/q"}, "id"),
    ("1.2", "BEGIN", {}, "transaction"),
    ("1.1", "COMMIT", {}, "transaction"),
    ("1.0", "ABORT", {}, "transaction"),
    ("1.2", "MESSAGE", {"destination": "/q", "message-id": "m"}, "subscription"),
    ("1.1", "MESSAGE", {"destination": "/q", "subscription": "0"}, "message-id"),
    ("1.0", "MESSAGE", {"message-id": "m"}, "destination"),
    ("1.2", "RECEIPT", {}, "receipt-id"),
    ("1.0", "RECEIPT", {}, "receipt-id"),
]


@pytest.mark.parametrize(("version", "command", "headers", "missing"), MISSING)
def test_missing_required_header(codec, version, command, headers, missing):
    problems = frame_problems(codec.Frame(command, headers), version)
    assert problems == [f"{command} requires header {missing!r} in STOMP {version}"]


def test_required_headers_differ_per_version(codec):
    ack_12 = codec.Frame("ACK", {"id": "1"})
    ack_11 = codec.Frame("ACK", {"message-id": "1", "subscription": "0"})
    assert frame_problems(ack_12, "1.2") == []
    assert len(frame_problems(ack_12, "1.1")) == 2
    assert frame_problems(ack_11, "1.1") == []
    assert frame_problems(ack_11, "1.2") == ["ACK requires header 'id' in STOMP 1.2"]
    subscribe = codec.Frame("SUBSCRIBE", {"destination": "/q"})
    assert frame_problems(subscribe, "1.0") == []
    assert frame_problems(subscribe, "1.1") != []
    # 1.0's CONNECT needs nothing; 1.1 and 1.2 want accept-version and host
    connect = codec.Frame("CONNECT", {"login": "guest"})
    assert frame_problems(connect, "1.0") == []
    assert len(frame_problems(connect, "1.1")) == len(frame_problems(connect, "1.2")) == 2


def test_unsubscribe_10_needs_id_or_destination(codec):
    assert frame_problems(codec.Frame("UNSUBSCRIBE"), "1.0") == [
        "UNSUBSCRIBE requires header 'id' or 'destination' in STOMP 1.0"
    ]


def test_empty_values_count_as_present(codec):
    assert frame_problems(codec.Frame("SEND", {"destination": ""}), "1.2") == []


@pytest.mark.parametrize("command", ["NACK", "STOMP"])
def test_commands_missing_from_10(codec, command):
    headers = {"id": "1", "accept-version": "1.2", "host": "/"}
    assert frame_problems(codec.Frame(command, headers), "1.0") == [f"{command} does not exist in STOMP 1.0"]
    assert frame_problems(codec.Frame(command, headers), "1.2") == []


def test_unknown_command(codec):
    assert frame_problems(codec.Frame("FOO"), "1.2") == ["unknown command 'FOO'"]
    assert frame_problems(codec.Frame("send", {"destination": "/q"}), "1.2") == ["unknown command 'send'"]


@pytest.mark.parametrize("command", sorted(fastframe.SERVER_COMMANDS))
def test_client_must_not_send_server_frames(codec, command):
    frame = codec.Frame(command, {"version": "1.2", "destination": "/q", "message-id": "1", "subscription": "0",
                                  "receipt-id": "1"})  # fmt: skip
    assert frame_problems(frame, "1.2", "client") == [f"a client must not send {command} frames"]
    assert frame_problems(frame, "1.2", "server") == []


@pytest.mark.parametrize("command", sorted(fastframe.CLIENT_COMMANDS))
def test_server_must_not_send_client_frames(codec, command):
    frame = codec.Frame(command, {"accept-version": "1.2", "host": "/", "destination": "/q", "id": "1",
                                  "transaction": "t"})  # fmt: skip
    assert frame_problems(frame, "1.2", "server") == [f"a server must not send {command} frames"]
    assert frame_problems(frame, "1.2", "client") == []


@pytest.mark.parametrize(
    "command", sorted((fastframe.CLIENT_COMMANDS | fastframe.SERVER_COMMANDS) - {"SEND", "MESSAGE", "ERROR"})
)
def test_body_only_on_send_message_error(codec, command):
    required = dict.fromkeys(spec.REQUIRED_HEADERS["1.2"][command], "x")
    assert frame_problems(codec.Frame(command, required), "1.2") == []
    assert frame_problems(codec.Frame(command, required, b"hi"), "1.2") == [
        f"{command} frames must not have a body (2 bytes)"
    ]


@pytest.mark.parametrize("command", ["SEND", "MESSAGE", "ERROR"])
def test_body_commands_may_have_a_body(codec, command):
    required = dict.fromkeys(spec.REQUIRED_HEADERS["1.2"][command], "x")
    assert frame_problems(codec.Frame(command, required, b"\0binary\0"), "1.2") == []


def test_body_rule_on_decoded_frames(codec):
    frames = codec.decode(b"BEGIN\ntransaction:t\n\nsurprise\0SEND\ndestination:/q\n\nok\0")
    assert frame_problems(frames[0]) == ["BEGIN frames must not have a body (8 bytes)"]
    assert frame_problems(frames[1]) == []


def test_content_length_must_match_the_body(codec):
    good = codec.Frame("SEND", [("destination", "/q"), ("content-length", "3")], b"abc")
    assert frame_problems(good) == []
    short = codec.Frame("SEND", [("destination", "/q"), ("content-length", "2")], b"abc")
    assert frame_problems(short) == ["content-length 2 does not match the 3-byte body"]
    for bad in ("-1", "3.0", " 3", "abc", "３"):
        frame = codec.Frame("SEND", [("destination", "/q"), ("content-length", bad)], b"abc")
        assert frame_problems(frame) == [f"content-length {bad!r} is not a non-negative decimal integer"]


def test_first_repeated_header_wins(codec):
    # spec "Repeated Header Entries": only the first content-length counts
    frame = codec.Frame("SEND", [("destination", "/q"), ("content-length", "3"), ("content-length", "9")], b"abc")
    assert frame_problems(frame) == []
    frame = codec.Frame("SUBSCRIBE", [("destination", "/q"), ("id", "0"), ("ack", "bogus"), ("ack", "auto")])
    assert frame_problems(frame) == ["SUBSCRIBE ack 'bogus' is not one of auto, client, client-individual in STOMP 1.2"]


def test_subscribe_ack_modes(codec):
    for mode in ("auto", "client", "client-individual"):
        assert frame_problems(codec.Frame("SUBSCRIBE", {"destination": "/q", "id": "0", "ack": mode})) == []
    assert frame_problems(codec.Frame("SUBSCRIBE", {"destination": "/q", "ack": "client-individual"}), "1.0") == [
        "SUBSCRIBE ack 'client-individual' is not one of auto, client in STOMP 1.0"
    ]


@pytest.mark.parametrize("command", ["CONNECT", "STOMP", "CONNECTED"])
def test_heart_beat_header_format(codec, command):
    headers = {"accept-version": "1.2", "host": "/", "version": "1.2", "heart-beat": "1000"}
    assert frame_problems(codec.Frame(command, headers)) == [
        "heart-beat '1000' is not two non-negative integers 'cx,cy'"
    ]
    headers["heart-beat"] = "1000,0"
    assert frame_problems(codec.Frame(command, headers)) == []


def test_frames_that_cannot_be_written(codec):
    # CONNECT headers are never escaped, so a LF cannot be sent (spec "Value Encoding")
    problems = frame_problems(codec.Frame("CONNECT", {"accept-version": "1.2", "host": "a\nb"}), "1.2")
    assert len(problems) == 1 and problems[0].startswith("cannot be written in STOMP 1.2:")
    # 1.1 has no escape for CR; 1.2 has
    send = codec.Frame("SEND", {"destination": "/q", "x": "a\rb"})
    assert frame_problems(send, "1.2") == []
    assert frame_problems(send, "1.1")[0].startswith("cannot be written in STOMP 1.1:")
    assert frame_problems(codec.Frame("SEND", {"destination": "/q", "": "v"}), "1.2")[0].startswith("cannot be")


def test_several_problems_are_all_reported(codec):
    frame = codec.Frame("MESSAGE", {"content-length": "1"}, b"body")
    problems = frame_problems(frame, "1.2", "client")
    assert problems == [
        "a client must not send MESSAGE frames",
        "MESSAGE requires header 'destination' in STOMP 1.2",
        "MESSAGE requires header 'message-id' in STOMP 1.2",
        "MESSAGE requires header 'subscription' in STOMP 1.2",
        "content-length 1 does not match the 4-byte body",
    ]


def test_validate_raises_validation_error(codec):
    frame = codec.Frame("SUBSCRIBE", {"destination": "/q"}, b"x")
    with pytest.raises(ValidationError) as info:
        validate(frame, "1.2", "client")
    err = info.value
    assert isinstance(err, fastframe.FrameError) and isinstance(err, ValueError)
    assert err.problems == frame_problems(frame, "1.2", "client")
    assert str(err) == "; ".join(err.problems)
    assert err.code == "invalid-frame"
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is ValidationError and again.problems == err.problems


def test_bad_arguments(codec):
    frame = codec.Frame("SEND", {"destination": "/q"})
    with pytest.raises(ValueError, match="version"):
        frame_problems(frame, "2.0")
    with pytest.raises(ValueError, match="sender"):
        frame_problems(frame, "1.2", "broker")


def test_real_broker_frames_are_valid(codec, corpus_dir):
    """Every frame of the RabbitMQ recordings that are not deliberately broken passes."""
    checked = 0
    for sidecar in sorted(corpus_dir.glob("rabbitmq/*.json")):
        if sidecar.name == "index.json" or sidecar.name.startswith(("err-", "messages-")):
            continue
        meta = json.loads(sidecar.read_text())
        version = meta["negotiated_version"] or "1.2"
        sender = "client" if meta["direction"] == "c2s" else "server"
        # RabbitMQ sends \r to 1.1 subscribers, undefined in 1.1: keep it literally
        frames = codec.decode(sidecar.with_suffix(".stomp").read_bytes(), version, keep_undefined_escapes=True)
        for frame in frames:
            assert frame_problems(frame, version, sender) == [], (sidecar.name, frame)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    ("connection", "problem"),
    [
        ("err-missing-destination", "SEND requires header 'destination' in STOMP 1.2"),
        ("err-subscribe-missing-id", "SUBSCRIBE requires header 'id' in STOMP 1.2"),
        ("err-unknown-command", "unknown command 'FOO'"),
    ],
)
def test_real_broken_client_frames(codec, corpus_dir, connection, problem):
    frames = codec.decode((corpus_dir / "rabbitmq" / f"{connection}.c2s.stomp").read_bytes())
    found = [p for frame in frames for p in frame_problems(frame, "1.2", "client")]
    assert problem in found


# --------------------------------------------------------------------------- heart-beats


@pytest.mark.parametrize(
    ("value", "pair"),
    [("0,0", (0, 0)), ("0,1000", (0, 1000)), ("1000,0", (1000, 0)), ("10000,10000", (10000, 10000)),
     ("007,1", (7, 1)), (None, (0, 0))],
)  # fmt: skip
def test_parse_heartbeat(value, pair):
    assert parse_heartbeat(value) == pair


@pytest.mark.parametrize(
    "value", ["", "1", "1,2,3", "-1,2", "+1,2", " 1,2", "1 ,2", "1, 2", "1,2 ", "a,b", "1.5,2", ",", "1,", "１,2"]
)
def test_parse_heartbeat_is_strict(value):
    with pytest.raises(ValueError, match="not two non-negative integers"):
        parse_heartbeat(value)


def test_parse_heartbeat_wants_text():
    with pytest.raises(TypeError):
        parse_heartbeat(b"0,0")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("client", "server", "expected"),
    [
        ("0,0", "0,0", (0, 0)),
        (None, None, (0, 0)),  # a missing header is 0,0
        ("1000,1000", "1000,1000", (1000, 1000)),
        ("0,1000", "1000,0", (0, 1000)),  # client sends none; server sends every 1000 ms
        ("500,0", "0,1000", (1000, 0)),  # the slower side wins: max(500, 1000)
        ("4000,3000", "2000,5000", (5000, 3000)),
        ("4000,3000", None, (0, 0)),
        ((100, 200), (300, 400), (400, 300)),
        ("100,0", (0, 50), (100, 0)),
    ],
)
def test_negotiate_heartbeat(client, server, expected):
    assert negotiate_heartbeat(client, server) == expected


def test_negotiate_heartbeat_rejects_bad_values():
    with pytest.raises(ValueError):
        negotiate_heartbeat("1,x", "0,0")
    with pytest.raises(ValueError):
        negotiate_heartbeat((1, -2), "0,0")
    with pytest.raises(ValueError):
        negotiate_heartbeat("0,0", (1, 2, 3))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("connection", "expected"),
    [("connect-heartbeat", (0, 1000)), ("heartbeat-both", (1000, 1000)), ("heartbeat-timeout", (1000, 0))],
)
def test_negotiate_heartbeat_like_rabbitmq(codec, corpus_dir, connection, expected):
    base = corpus_dir / "rabbitmq" / connection
    connect = codec.decode((base.parent / f"{connection}.c2s.stomp").read_bytes())[0]
    connected = codec.decode((base.parent / f"{connection}.s2c.stomp").read_bytes())[0]
    assert (connect.command, connected.command) == ("CONNECT", "CONNECTED")
    assert negotiate_heartbeat(connect.get("heart-beat"), connected.get("heart-beat")) == expected


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("accept", "supported", "expected"),
    [
        (None, fastframe.VERSIONS, "1.0"),  # no header: the client speaks 1.0 only
        ("1.2", fastframe.VERSIONS, "1.2"),
        ("1.0,1.1,2.0", fastframe.VERSIONS, "1.1"),  # the spec's example
        ("1.2,1.0", fastframe.VERSIONS, "1.2"),
        (" 1.0 , 1.1 ", fastframe.VERSIONS, "1.1"),
        ("3.0", fastframe.VERSIONS, None),
        ("", fastframe.VERSIONS, None),
        ("1.0,1.1", ("1.2", "2.1"), None),  # the spec's mismatch example
        ("1.2,2.1", ("1.2", "2.1"), "2.1"),
        (None, ("1.1", "1.2"), None),
        ("1.9,1.10", ("1.9", "1.10"), "1.10"),  # numeric, not string, order
    ],
)
def test_negotiate_version(accept, supported, expected):
    assert negotiate_version(accept, supported) == expected


def test_negotiate_version_matches_rabbitmq(codec, corpus_dir):
    index = json.loads((corpus_dir / "rabbitmq" / "index.json").read_text())
    checked = 0
    for rec in index["recordings"]:
        data = (corpus_dir / "rabbitmq" / rec["c2s"]["file"]).read_bytes()
        decoder = codec.Decoder("1.2")
        try:
            connect = decoder.feed(data)[0]
        except fastframe.DecodeError as err:
            connect = err.frames[0]
        if connect.command not in ("CONNECT", "STOMP"):
            continue
        if rec["negotiated_version"] is None and rec["connection"] != "err-unsupported-version":
            continue  # refused for another reason (bad login, ...)
        assert negotiate_version(connect.get("accept-version")) == rec["negotiated_version"], rec["connection"]
        checked += 1
    assert checked > 30


# --------------------------------------------------------------------------- bodies


@pytest.mark.parametrize(
    ("content_type", "body", "text"),
    [
        ("text/plain", "héllo".encode(), "héllo"),  # text/* defaults to UTF-8
        ("TEXT/HTML", "<p>ü</p>".encode(), "<p>ü</p>"),
        ("text/plain;charset=utf-8", "日本".encode(), "日本"),
        ("text/html;charset=utf-16", "hi".encode("utf-16"), "hi"),  # the spec's example
        ("text/plain; CHARSET=ISO-8859-1", "café".encode("latin-1"), "café"),
        ('text/plain; charset="latin-1"', "café".encode("latin-1"), "café"),
        ("application/xml;charset=utf-8", "<a>é</a>".encode(), "<a>é</a>"),
        ("application/json; Charset = cp1252 ", "€".encode("cp1252"), "€"),
        ('text/plain; format=flowed; x="a;b"; charset=latin-1', "é".encode("latin-1"), "é"),
        ('text/plain; charset="lat\\in-1"', "é".encode("latin-1"), "é"),
    ],
)
def test_body_text(codec, content_type, body, text):
    assert body_text(codec.Frame("MESSAGE", {"content-type": content_type}, body)) == text


def test_body_text_without_charset(codec):
    json_frame = codec.Frame("MESSAGE", {"content-type": "application/json"}, b'{"a": "\xc3\xa9"}')
    with pytest.raises(ValueError, match="no charset"):
        body_text(json_frame)
    assert body_text(json_frame, default_charset="utf-8") == '{"a": "é"}'
    assert body_text(json_frame, default_charset="latin-1") == '{"a": "Ã©"}'
    bare = codec.Frame("MESSAGE", {}, b"caf\xe9")
    with pytest.raises(ValueError, match="no content-type"):
        body_text(bare)
    assert body_text(bare, default_charset="latin-1") == "café"
    # text/* ignores default_charset: the spec makes it UTF-8
    assert body_text(codec.Frame("MESSAGE", {"content-type": "text/plain"}, b"\xc3\xa9"), "latin-1") == "é"


def test_body_text_first_content_type_wins(codec):
    frame = codec.Frame("MESSAGE", [("content-type", "text/plain;charset=latin-1"), ("content-type", "text/plain")],
                        b"\xe9")  # fmt: skip
    assert body_text(frame) == "é"


def test_body_text_errors(codec):
    with pytest.raises(ValueError, match="unknown charset"):
        body_text(codec.Frame("MESSAGE", {"content-type": "text/plain;charset=klingon"}, b"x"))
    with pytest.raises(ValueError, match="unknown charset"):
        body_text(codec.Frame("MESSAGE", {"content-type": "text/plain;charset=base64"}, b"eA=="))
    with pytest.raises(UnicodeDecodeError):
        body_text(codec.Frame("MESSAGE", {"content-type": "text/plain"}, b"\xff\xfe\xfa"))


def test_body_text_of_decoded_frame(codec):
    wire = (
        b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:0\ncontent-type:text/plain;charset=latin-1\n\n\xe9t\xe9\0"
    )
    (frame,) = codec.decode(wire)
    assert body_text(frame) == "\u00e9t\u00e9"
