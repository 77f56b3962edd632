"""Replay (in-process and ``fastframe replay``), the in-memory broker recording its own connections
(``Broker(wire_hook=...)`` and ``fastframe broker --record``), and ``fastframe record`` run as a user runs it:
a process on 127.0.0.1 stopped with Ctrl-C (SIGINT), every file closed."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import ssl
import subprocess
import sys
import time

import pytest

import fastframe
from fastframe import aio
from fastframe.capture import Archive, pieces_of, read_times, replay, serve_proxy

from .helpers import RecordProcess, joined, read_file, require_zstd, start_fastframe, stomp_files
from .test_proxy import HOST, Wire, run

# headers that name this session or this message, not what the broker answered
_VARYING = {"message-id", "session", "server", "ack"}


def answers(frames):
    return [(f.command, [(n, v) for n, v in f.headers if n not in _VARYING], f.body) for f in frames]


async def session(port: int, wire: Wire) -> None:
    """A short session with receipts, messages and a DISCONNECT receipt: every answer is deterministic."""
    async with aio.connect(HOST, port, wire_hook=wire, heartbeat=(0, 0), coalesce_reads=0) as client:
        async with await client.subscribe("/queue/replay", ack="auto") as sub:
            for i in range(20):
                await client.send("/queue/replay", b"body\0%d" % i, {"x-i": f"{i}:\\"}, receipt=True, timeout=5)
                await sub.get(timeout=5)
        await client.disconnect(timeout=5)


def test_replay_gives_the_answers_of_the_original_session(tmp_path):
    async def main():
        with Archive(str(tmp_path), "mem") as archive:
            async with aio.Broker(port=0, wire_hook=archive.server_hook) as broker:  # the broker records too
                wire = Wire()
                async with await serve_proxy(archive, HOST, 0, HOST, broker.port) as proxy:
                    await session(proxy.port, wire)
                    await asyncio.sleep(0.1)
        files = stomp_files(str(tmp_path))
        c2s = files["conn-0001.c2s"][0]
        fast = []
        async with aio.Broker(port=0) as fresh:
            result = await replay(pieces_of(c2s), HOST, fresh.port, on_answer=fast.append)
        async with aio.Broker(port=0) as fresh:
            started = time.monotonic()
            paced = await replay([c2s], HOST, fresh.port, pace="recorded", speed=4.0)
            paced_took = time.monotonic() - started
        return wire, files, result, fast, paced, paced_took

    wire, files, result, fast, paced, paced_took = run(main())
    original = fastframe.decode(bytes(wire.into))
    assert result.closed_by_broker and result.error is None and result.bytes_sent == len(wire.out)
    assert answers(result.answers) == answers(original) and fast == result.answers
    assert answers(paced.answers) == answers(original)
    times = read_times(files["conn-0001.c2s"][0])
    span = (times[-1][1] - times[0][1]) / 1e9
    assert paced_took >= span / 4 * 0.9  # the recorded pace, four times as fast
    # the proxy's recording (conn-0001) and the broker's own (conn-0002) hold the same bytes
    assert joined(files["conn-0002.c2s"]) == joined(files["conn-0001.c2s"]) == bytes(wire.out)
    assert joined(files["conn-0002.s2c"]) == joined(files["conn-0001.s2c"]) == bytes(wire.into)


def interrupt(process: subprocess.Popen) -> tuple:
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return process.returncode, out, err


@pytest.mark.parametrize("flag,ending", [("--gzip", ".gz"), ("--zstd", ".zst")])
def test_record_and_broker_record_commands_then_replay_command(tmp_path, flag, ending):
    if flag == "--zstd":
        require_zstd()
    broker, broker_port = start_fastframe("broker", "--port", "0", "--record", str(tmp_path / "broker"))
    try:
        proxy, proxy_port = start_fastframe(
            "record", "--listen", "127.0.0.1:0", "--upstream", f"127.0.0.1:{broker_port}",
            "--out", str(tmp_path / "proxy"), "--name", "local", flag, "--roll-size", "2k",
        )  # fmt: skip
        try:
            wire = Wire()
            run(session(proxy_port, wire))
        finally:
            code, out, err = interrupt(proxy)  # Ctrl-C
        assert code == 0, err
        assert "every file closed" in out
    finally:
        broker_code, _, broker_err = interrupt(broker)
    assert broker_code == 0, broker_err

    recorded = stomp_files(str(tmp_path / "proxy" / "local"))
    assert all(p.endswith(".stomp" + ending) for p in recorded["conn-0001.c2s"]) and len(recorded["conn-0001.s2c"]) > 1
    assert joined(recorded["conn-0001.c2s"]) == bytes(wire.out)  # every compressed piece complete
    assert joined(recorded["conn-0001.s2c"]) == bytes(wire.into)
    assert all(os.path.exists(p + ".ffidx") for p in recorded["conn-0001.s2c"])
    by_broker = stomp_files(str(tmp_path / "broker" / "fastframe-broker"))
    assert read_file(by_broker["conn-0001.c2s"][0]) == bytes(wire.out)

    async def replayed():
        async with aio.Broker(port=0) as fresh:
            return await asyncio.get_running_loop().run_in_executor(
                None,
                lambda: subprocess.run(
                    [sys.executable, "-m", "fastframe", "replay", recorded["conn-0001.c2s"][0],
                     "--to", f"127.0.0.1:{fresh.port}", "--pace", "recorded", "--speed", "10"],
                    capture_output=True, text=True, timeout=60,
                ),
            )  # fmt: skip

    done = run(replayed())
    assert done.returncode == 0, done.stderr
    assert f"from {len(recorded['conn-0001.c2s'])} file(s); the broker closed the connection" in done.stdout
    # SUBSCRIBE, 20 SENDs, UNSUBSCRIBE and DISCONNECT asked for receipts
    assert "answers: 44 frames (CONNECTED 1, MESSAGE 20, RECEIPT 23)" in done.stdout
    assert "  x-i: 19:\\" in done.stdout and "body: 7 bytes 'body\\x0019'" in done.stdout


def test_record_with_tls_on_both_sides(tmp_path, certificate):
    key, cert = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    out = tmp_path / "tls"

    async def main():
        async with aio.Broker(port=0, ssl=server_ctx) as broker:
            proxy = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "fastframe", "record", "--listen", "127.0.0.1:0",
                "--upstream", f"127.0.0.1:{broker.port}", "--out", str(out), "--name", "tls",
                "--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--ssl-upstream", "--ssl-upstream-cafile", str(cert),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                line = (await asyncio.wait_for(proxy.stdout.readline(), 30)).decode()
                port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))
                wire = Wire()
                client_ctx = ssl.create_default_context(cafile=str(cert))
                async with aio.connect(HOST, port, ssl=client_ctx, wire_hook=wire) as client:
                    async with await client.subscribe("/queue/tls") as sub:
                        await client.send("/queue/tls", b"secret\0bytes", receipt=True)
                        assert (await sub.get(timeout=5)).body == b"secret\0bytes"
                    await client.disconnect(timeout=5)
                await asyncio.sleep(0.2)
            finally:
                proxy.send_signal(signal.SIGINT)
                _, err = await asyncio.wait_for(proxy.communicate(), 30)
            assert proxy.returncode == 0, err
        return wire

    wire = run(main())
    files = stomp_files(str(out / "tls"))
    assert joined(files["conn-0001.c2s"]) == bytes(wire.out)  # the STOMP bytes, never TLS records
    assert joined(files["conn-0001.s2c"]) == bytes(wire.into)


def test_sigterm_stops_record_as_ctrl_c_does(tmp_path):
    process, port = start_fastframe("record", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--out",
                                    str(tmp_path))  # fmt: skip
    process.send_signal(signal.SIGTERM)  # right after the "listening" line: the handlers are in place
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0 and "every file closed" in out, err


def test_ctrl_c_with_connections_open_finishes_every_file(tmp_path):
    async def main():
        async with aio.Broker(port=0) as broker:
            with RecordProcess(broker.port, str(tmp_path), "--name", "open", "--gzip") as port:
                reader, writer = await asyncio.open_connection(HOST, port)
                writer.write(b"CONNECT\naccept-version:1.2\n\n\0SUBSCRIBE\nid:1\ndestination:/q\n\n\0SEND\ndestinat")
                await writer.drain()
                connected = await asyncio.wait_for(reader.readuntil(b"\0"), 10)
                await asyncio.sleep(0.2)
            # (leaving the with: Ctrl-C while the client is still connected, in the middle of a frame)
            rest = await asyncio.wait_for(reader.read(), 10)  # the proxy closed the connection
            writer.close()
        return connected + rest

    received = run(main())
    files = stomp_files(str(tmp_path / "open"))
    assert read_file(files["conn-0001.c2s"][0]).endswith(b"SEND\ndestinat")  # a complete gzip file
    assert read_file(files["conn-0001.s2c"][0]) == received
    assert all(os.path.exists(p + ".ffidx") for paths in files.values() for p in paths)
