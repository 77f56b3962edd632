"""Captures keep no secrets: CONNECT's passcode (and login on request) replaced before anything is written,
the files and sidecars consistent with what was written, and replay filling the values back in.

The recorder decodes with each twin (the ``codec`` fixture)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fastframe
from fastframe import aio
from fastframe.capture import Archive, _recorder, pieces_of, read_times, replay

from .helpers import client_stream, pieces, read_file, start_fastframe, stomp_files
from .test_proxy import HOST, run

SECRET = "s3cr3t-pass"
CONNECT = fastframe.encode(
    "CONNECT", [("accept-version", "1.2"), ("host", "/"), ("login", "alice"), ("passcode", SECRET)]
)


@pytest.fixture(autouse=True)
def twin(codec, monkeypatch):
    monkeypatch.setattr(_recorder, "codec", codec)
    return codec


def recorded(tmp_path, stream: bytes, seed: int = 0, most: int = 700, **options) -> bytes:
    """Record ``stream`` as the client's bytes, cut at random places; return what the c2s files hold."""
    with Archive(str(tmp_path), "b", roll_size=1 << 12, **options) as archive:
        recorder = archive.recorder()
        for piece in pieces(stream, seed, most):
            recorder.c2s(piece)
        recorder.close()
        assert recorder.dropped is None
    paths = stomp_files(str(tmp_path))["conn-0001.c2s"]
    for path in paths:  # every piece decodes on its own and its sidecar's offsets are its frames'
        frames = fastframe.decode(read_file(path))
        assert [offset for offset, _ in read_times(path)] == [f.offset for f in frames]
    return b"".join(read_file(path) for path in paths)


def everything_written(root) -> bytes:
    out = b""
    for folder, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(folder, name), "rb") as stream:
                out += stream.read()
    return out


@pytest.mark.parametrize("seed,most", [(0, 2), (1, 9), (2, 700), (3, 1 << 20)])
def test_the_passcode_is_replaced_wherever_the_reads_cut(tmp_path, seed, most):
    stream = b"\n\r\n" + CONNECT + client_stream(60, seed)
    written = recorded(tmp_path, stream, seed, most)
    assert SECRET.encode() not in everything_written(tmp_path)  # nor in a sidecar
    frames = fastframe.decode(written)
    assert frames[0].get("passcode") == "<redacted>" and frames[0].get("login") == "alice"
    # everything else byte for byte
    assert written == stream.replace(f"passcode:{SECRET}".encode(), b"passcode:<redacted>")


def test_login_too_crlf_lines_a_stomp_frame_and_repeated_headers(tmp_path):
    connect = b"STOMP\r\naccept-version:1.2\r\nlogin:alice\r\npasscode:one\r\npasscode:two\r\n\r\n\0"
    written = recorded(tmp_path, connect + client_stream(5), most=3, redact=("passcode", "login"))
    assert written.startswith(
        b"STOMP\r\naccept-version:1.2\r\nlogin:<redacted>\r\npasscode:<redacted>\r\npasscode:<redacted>\r\n\r\n\0"
    )
    assert b"one" not in written and b"two" not in written and b"alice" not in written


def test_only_connect_frames_at_a_boundary_are_touched(tmp_path):
    # a passcode header on a SEND, and CONNECT text inside a body, are data: kept as sent
    send = fastframe.encode("SEND", [("destination", "/q"), ("passcode", "kept")], b"CONNECT\npasscode:body\n\n")
    stream = CONNECT + send + send
    written = recorded(tmp_path, stream, most=5)
    assert written == stream.replace(f"passcode:{SECRET}".encode(), b"passcode:<redacted>")


def test_a_reconnect_through_the_same_recorder_is_redacted_too(tmp_path):
    # a client's wire_hook sees each frame it writes on its own: the next session's CONNECT starts a read
    with Archive(str(tmp_path), "b") as archive:
        with archive.recorder() as recorder:
            for session in range(2):
                for piece in pieces(CONNECT, seed=session, most=6):
                    recorder.c2s(piece)
                for frame in fastframe.decode(client_stream(3, seed=session))[1:]:
                    recorder.c2s(fastframe.encode(frame))
    written = everything_written(tmp_path)
    assert written.count(b"passcode:<redacted>") == 2 and SECRET.encode() not in written


def test_keep_credentials(tmp_path):
    stream = CONNECT + client_stream(3)
    assert recorded(tmp_path, stream, redact=()) == stream


def test_a_stream_ending_inside_the_headers_and_an_endless_header_block(tmp_path):
    cut = CONNECT[: CONNECT.index(b"passcode") + 14]  # the passcode line without its end
    with Archive(str(tmp_path / "cut"), "b") as archive:
        with archive.recorder() as recorder:
            recorder.c2s(cut)
    assert SECRET.encode() not in everything_written(tmp_path / "cut")
    assert b"passcode:<redacted>" in everything_written(tmp_path / "cut")
    # a header block that never ends is not held without bound: the recording is dropped, nothing written
    with Archive(str(tmp_path / "long"), "b") as archive:
        recorder = archive.recorder()
        recorder.c2s(b"CONNECT\npasscode:" + SECRET.encode() + b"\n")
        for _ in range(20):
            recorder.c2s(b"x-filler:" + b"y" * 65536 + b"\n")
        assert recorder.dropped is not None and "CONNECT" in recorder.dropped
        recorder.close()
    assert SECRET.encode() not in everything_written(tmp_path / "long")


def test_archive_refuses_a_string_for_redact(tmp_path):
    with pytest.raises(TypeError, match="tuple of header names"):
        Archive(str(tmp_path), "b", redact="passcode")  # type: ignore[arg-type]


def test_replay_fills_the_redacted_passcode_and_says_when_it_was_missing(tmp_path):
    async def main():
        with Archive(str(tmp_path), "mem") as archive:
            async with aio.Broker(port=0, users={"alice": SECRET}, wire_hook=archive.server_hook) as broker:
                async with aio.connect(HOST, broker.port, login="alice", passcode=SECRET) as client:
                    await client.send("/queue/r", b"hi", receipt=True, timeout=5)
                    await client.disconnect(timeout=5)
        path = stomp_files(str(tmp_path))["conn-0001.c2s"][0]
        async with aio.Broker(port=0, users={"alice": SECRET}) as fresh:
            refused = await replay(pieces_of(path), HOST, fresh.port, idle=1.0)
            accepted = await replay(pieces_of(path), HOST, fresh.port, idle=1.0, credentials={"passcode": SECRET})
        return refused, accepted

    refused, accepted = run(main())
    assert SECRET.encode() not in everything_written(tmp_path)
    assert refused.redacted and [f.command for f in refused.answers] == ["ERROR"]
    assert not accepted.redacted and [f.command for f in accepted.answers][:2] == ["CONNECTED", "RECEIPT"]


def test_broker_record_and_replay_commands(tmp_path):
    broker, port = start_fastframe("broker", "--port", "0", "--user", f"alice:{SECRET}", "--record", str(tmp_path))
    try:

        async def session():
            async with aio.connect(HOST, port, login="alice", passcode=SECRET) as client:
                await client.send("/queue/r", b"hi", receipt=True, timeout=5)
                await client.disconnect(timeout=5)

        run(session())
    finally:
        broker.terminate()
        broker.communicate(timeout=30)
    assert SECRET.encode() not in everything_written(tmp_path)
    path = stomp_files(str(tmp_path / "fastframe-broker"))["conn-0001.c2s"][0]
    fresh, fresh_port = start_fastframe("broker", "--port", "0", "--user", f"alice:{SECRET}")
    try:
        command = [sys.executable, "-m", "fastframe", "replay", path, "--to", f"127.0.0.1:{fresh_port}", "--idle", "1"]
        without = subprocess.run(command, capture_output=True, text=True, timeout=60)
        env = dict(os.environ, FASTFRAME_PASSCODE=SECRET)
        with_env = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    finally:
        fresh.terminate()
        fresh.communicate(timeout=30)
    assert "credentials were redacted" in without.stderr and "ERROR 1" in without.stdout
    assert with_env.returncode == 0 and "CONNECTED 1" in with_env.stdout, with_env.stderr
    assert "redacted" not in with_env.stderr
