"""fastframe.server: serve and Broker over loopback TCP with a raw-socket client."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
from _broker_wire import Wire, wait_for

import fastframe
from fastframe.protocol import LocalProtocolError
from fastframe.server import Broker, serve


def run(test: Callable[[], Awaitable[None]], timeout: float = 20.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(test(), timeout)

    asyncio.run(bounded())


def test_round_trip_and_pipelined_frames_use_the_negotiated_escapes() -> None:
    async def test() -> None:
        async with Broker() as broker:
            sub = await Wire.connected(broker.port)
            sub.write(b"SUBSCRIBE\nid:s\ndestination:/queue/a\nreceipt:r\n\n\0")
            assert (await sub.read(1))[0].get("receipt-id") == "r"
            # a 1.0 producer pipelines SEND behind CONNECT: its literal backslash stays a backslash
            old = await Wire.open(broker.port, "1.0")
            old.write(b"CONNECT\n\n\0SEND\ndestination:/queue/a\nx:a\\nb\n\nbody\0")
            (connected,) = await old.read(1)
            assert connected.get("version") == "1.0"
            (message,) = await sub.read(1)
            assert message.get("x") == "a\\nb" and message.body == b"body"
            # and a 1.2 producer's escaped LF reaches the 1.2 subscriber as a LF
            sub.write(b"SEND\ndestination:/queue/a\nx:a\\nb\n\nbody\0")
            assert (await sub.read(1))[0].get("x") == "a\nb"
            await sub.close()
            await old.close()

    run(test)


def test_malformed_input_gets_error_with_offset_then_close() -> None:
    async def test() -> None:
        async with Broker() as broker:
            bad = await Wire.connected(broker.port)
            good = await Wire.connected(broker.port)
            bad.write(b"SEND\ndestination:/queue/a\nx:tab\\there\n\n\0")
            (error,) = await bad.until_eof()
            connect_size = len(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
            assert error.command == "ERROR" and error.get("message") == "Malformed frame"
            assert f"at offset {connect_size + 31}" in error.body.decode()
            assert "undefined escape sequence" in error.body.decode()
            good.write(b"SEND\ndestination:/queue/a\nreceipt:still\n\n\0")
            assert (await good.read(1))[0].get("receipt-id") == "still"
            await bad.close()
            await good.close()

    run(test)


def test_protocol_refusals_get_rabbitmq_shaped_errors() -> None:
    # the protocol layer refuses these before the broker sees them; the ERROR keeps the broker's shape
    async def test() -> None:
        async with Broker() as broker:
            early = await Wire.open(broker.port)
            early.write(b"SEND\ndestination:/queue/a\n\nx\0")
            (error,) = await early.until_eof()
            assert (error.get("message"), error.get("version")) == ("Illegal command", "1.0,1.1,1.2")
            assert error.body == b"You must log in using CONNECT first"
            beat = await Wire.open(broker.port)
            beat.write(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:soon\n\n\0")
            (error,) = await beat.until_eof()
            assert error.get("message") == "Malformed frame" and b"heart-beat" in error.body
            assert error.get("content-type") == "text/plain" and error.get("receipt-id") is None
            for wire in (early, beat):
                await wire.close()
            assert broker.core.stats()["sessions"] == 0

    run(test)


def test_a_handler_frame_the_version_cannot_carry_goes_out_in_the_1_2_escapes() -> None:
    class Echo:
        def connection_made(self, conn: Any) -> None:
            pass

        def frame_received(self, conn: Any, frame: Any) -> None:
            if frame.command == "CONNECT":
                conn.accept("1.1")
            else:  # CR cannot be written in 1.1: RabbitMQ's way out is the 1.2 escapes
                conn.send(fastframe.Frame("MESSAGE", [("destination", "/q"), ("message-id", "1"), ("x", "a\rb")]))
                with pytest.raises(LocalProtocolError):  # refused for another reason: the handler hears it
                    conn.send(fastframe.Frame("MESSAGE", [("destination", "/q")]))
                with pytest.raises(ValueError, match="receipt"):  # RECEIPT, CONNECTED, ERROR: their calls
                    conn.send(fastframe.Frame("RECEIPT", [("receipt-id", "r")]))

        def connection_lost(self, conn: Any, cause: Any) -> None:
            pass

    async def test() -> None:
        async with await serve(Echo()) as server:
            wire = await Wire.connected(server.port, "1.1")
            wire.decoder = fastframe.Decoder("1.1", escapes="1.2", heartbeat_events=True)  # as RabbitMQ's clients
            wire.write(b"SEND\ndestination:/q\n\n\0")
            (message,) = await wire.read(1)
            assert message.get("x") == "a\rb"
            await wire.close()

    run(test)


def test_slow_loris_cut_at_frame_deadline() -> None:
    async def test() -> None:
        async with Broker(frame_timeout=0.4) as broker:
            loris = await Wire.connected(broker.port)
            loop = asyncio.get_running_loop()
            started = loop.time()
            reading = asyncio.ensure_future(loris.until_eof())
            for byte in b"SEND\ndestination:/queue/a\n\nbody":
                if reading.done() or loop.time() - started > 3:
                    break
                try:
                    loris.write(bytes([byte]))
                    await loris.writer.drain()
                except ConnectionError:
                    break
                await asyncio.sleep(0.1)
            frames = await reading
            assert [f.get("message") for f in frames] == ["Timeout"]
            assert loop.time() - started < 3
            await loris.close()
            assert broker.core.stats()["sessions"] == 0

    run(test)


def test_a_steady_stream_whose_reads_end_mid_frame_is_not_cut() -> None:
    async def test() -> None:
        async with Broker(frame_timeout=0.3) as broker:
            wire = await Wire.connected(broker.port)
            frame = b"SEND\ndestination:/queue/steady\nreceipt:r\n\nbody\0"
            wire.write(frame[:10])
            for _ in range(12):  # 1.2 s in all, four times the deadline; each write ends mid-frame
                await asyncio.sleep(0.1)
                wire.write(frame[10:] + frame[:10])
            wire.write(frame[10:])
            receipts = await wire.read(13)
            assert {f.get("receipt-id") for f in receipts} == {"r"}
            assert broker.core.stats()["queued"] == 13
            await wire.close()

    run(test)


def test_handshake_deadline_and_heartbeat_silence() -> None:
    async def test() -> None:
        async with Broker(handshake_timeout=0.3, heartbeat=(100, 100)) as broker:
            mute = await Wire.open(broker.port)
            assert [f.get("message") for f in await mute.until_eof()] == ["Timeout"]
            # the client promises a beat every 100 ms, then stays silent: closed without an ERROR
            silent = await Wire.connected(broker.port, headers="heart-beat:100,100\n")
            assert await silent.until_eof() == [] and silent.heartbeats >= 1
            await mute.close()
            await silent.close()

    run(test)


def test_server_heartbeats_while_idle_and_client_beats_keep_it_alive() -> None:
    async def test() -> None:
        async with Broker(heartbeat=(50, 50), heartbeat_grace=20) as broker:
            wire = await Wire.connected(broker.port, headers="heart-beat:50,50\n")
            assert wire.decoder.heartbeats == 0
            for _ in range(6):
                wire.write(b"\n")
                await asyncio.sleep(0.05)
            wire.frame("DISCONNECT", {"receipt": "bye"})
            frames = await wire.until_eof()
            assert [f.get("receipt-id") for f in frames] == ["bye"] and wire.heartbeats >= 1
            await wire.close()

    run(test)


def test_max_connections() -> None:
    async def test() -> None:
        async with Broker(max_connections=2) as broker:
            first, second = await Wire.connected(broker.port), await Wire.connected(broker.port)
            third = await Wire.open(broker.port)
            assert [f.get("message") for f in await third.until_eof()] == ["Too many connections"]
            for wire in (first, second, third):
                await wire.close()

    run(test)


def test_shutdown_tells_clients() -> None:
    async def test() -> None:
        broker = Broker()
        await broker.start()
        wire = await Wire.connected(broker.port)
        await broker.close(timeout=2)
        assert [f.get("message") for f in await wire.until_eof()] == ["Server shutting down"]
        await wire.close()
        with pytest.raises(OSError):
            await Wire.open(broker.port)

    run(test)


def test_stopped_reader_is_dropped_and_its_messages_go_to_others() -> None:
    async def test() -> None:
        bound = 256 * 1024
        async with Broker(max_outbound_bytes=bound, outbound_high_water=64 * 1024, slow_consumer_timeout=0.5) as b:
            stuck = await Wire.connected(b.port)
            stuck.write(b"SUBSCRIBE\nid:s\ndestination:/queue/flood\nack:client-individual\nreceipt:r\n\n\0")
            await stuck.read(1)
            stuck.writer.transport.pause_reading()  # the client stops reading
            producer = await Wire.connected(b.port)
            body = b"x" * 4096
            sent = 0
            while b.core.stats()["sessions"] == 2 and sent < 5000:
                producer.frame("SEND", {"destination": "/queue/flood"}, body)
                sent += 1
                if sent % 16 == 0:
                    await asyncio.wait_for(producer.writer.drain(), 10)
            await wait_for(lambda: b.core.stats()["sessions"] == 1, message="the stuck client was not dropped")
            assert sent < 5000
            assert b.core.stats()["unacked"] == 0  # its deliveries went back to the queue
            producer.frame("SEND", {"destination": "/queue/flood", "receipt": "alive"})
            assert (await producer.read(1))[0].get("receipt-id") == "alive"
            await stuck.close()
            await producer.close()

    run(test)


def test_a_producer_paused_for_a_stuck_consumer_is_not_taken_for_silent() -> None:
    async def test() -> None:
        async with Broker(
            heartbeat=(0, 500), outbound_high_water=64 * 1024, max_outbound_bytes=64 * 1024 * 1024,
            slow_consumer_timeout=3.0, max_waiting_bytes=128 * 1024,
        ) as b:  # fmt: skip
            stuck = await Wire.connected(b.port)
            stuck.frame("SUBSCRIBE", {"id": "s", "destination": "/topic/flood", "receipt": "r"})
            await stuck.read(1)
            stuck.writer.transport.pause_reading()
            # the producer promises a beat every 500 ms (1 s with grace); the broker stops reading it for
            # about 3 s while the stuck client waits for more than max_waiting_bytes, and must not take
            # that for the producer's silence
            producer = await Wire.connected(b.port, headers="heart-beat:500,0\n")
            body = b"x" * 4096
            sent = 0
            while not b.server._holding_producers and sent < 20_000:  # type: ignore[union-attr]
                producer.frame("SEND", {"destination": "/topic/flood"}, body)
                sent += 1
                if sent % 16 == 0:
                    await asyncio.wait_for(producer.writer.drain(), 10)
            assert b.server._holding_producers  # type: ignore[union-attr]
            await wait_for(lambda: b.core.stats()["sessions"] == 1, message="the stuck client was not dropped")
            producer.write(b"\n")
            producer.frame("SEND", {"destination": "/topic/flood", "receipt": "alive"})
            frames = await producer.read(1)
            assert frames[0].get("receipt-id") == "alive"
            await stuck.close()
            await producer.close()

    run(test)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: Any) -> Path:
    folder: Path = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return folder


def test_tls(tls_files: Path) -> None:
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tls_files / "cert.pem", tls_files / "key.pem")
    client_ctx = ssl.create_default_context(cafile=str(tls_files / "cert.pem"))
    client_ctx.check_hostname = False

    async def test() -> None:
        async with Broker(ssl=server_ctx) as broker:
            wire = await Wire.open(broker.port, ssl=client_ctx)
            wire.write(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0DISCONNECT\nreceipt:bye\n\n\0")
            frames = await wire.until_eof()
            assert [f.command for f in frames] == ["CONNECTED", "RECEIPT"]
            await wire.close()

    run(test)


def test_bad_decoder_options_are_refused_before_listening() -> None:
    handler: Any = None  # never reached

    async def test() -> None:
        with pytest.raises(TypeError, match="chooses the decoder's version and heart-beat events"):
            await serve(handler, decoder_options={"heartbeat_events": True})
        with pytest.raises(ValueError, match="max_frame_size"):
            await serve(handler, decoder_options={"max_frame_size": -1})

    run(test)
