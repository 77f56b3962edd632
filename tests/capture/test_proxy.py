"""The recording proxy on 127.0.0.1: against the in-memory broker and raw test servers (every byte forwarded
and recorded unchanged, malformed streams too; flow control with bounded memory; a broker dropped mid-frame),
and against the live RabbitMQ and ActiveMQ (``tests/interop/_live.py``: a skip locally, a failure with CI=true
when they are down)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Callable, Dict, List, Tuple

import pytest

import fastframe
from _extras import require
from conftest import REPO
from fastframe import aio
from fastframe.archive import generate_stream
from fastframe.capture import Archive, serve_proxy
from interop._live import BROKERS, require_broker, unique

from .helpers import RecordProcess, joined, read_file, redacted, start_fastframe, stomp_files

HOST = "127.0.0.1"
N_LIVE = 10_000  # messages through the proxy to each live broker (issue 22)
N_STOMP_PY = 10_000


def run(coro, timeout: float = 60.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


class Wire:
    """A client ``wire_hook`` that keeps every byte, and also hands it to ``also`` (e.g. a Recorder)."""

    def __init__(self, also=None) -> None:
        self.out = bytearray()
        self.into = bytearray()
        self.also = also

    def __call__(self, direction: str, data: bytes) -> None:
        (self.out if direction == "out" else self.into).extend(data)
        if self.also is not None:
            self.also(direction, data)


def binary_body(i: int) -> bytes:
    return bytes((i * 7 + k) % 256 for k in range(i % 200)) + b"\0end"


async def exchange(port: int, destination: str, count: int, wire: Wire, **options) -> list:
    """Subscribe, send ``count`` messages with binary bodies and escaped headers (every 50th with a receipt),
    receive them all, disconnect. Returns the messages received."""
    received = []
    # a queue for every message: all are sent before any is taken. Heart-beats every 4 s: at 1 s, RabbitMQ on a
    # loaded machine drops 10,000-message runs for "missed client heart-beats" with or without the proxy
    async with aio.connect(
        HOST, port, wire_hook=wire, heartbeat=(4000, 4000), max_queue=count + 1, **options
    ) as client:
        async with await client.subscribe(destination, ack="client-individual") as sub:
            for i in range(count):
                headers = {"x-key": f"a:b\nc\\d {i}", "x-n": str(i)}
                await client.send(destination, binary_body(i), headers, receipt=i % 50 == 0, timeout=10)
            for _ in range(count):
                message = await sub.get(timeout=10)
                received.append(message)
                await message.ack()
        await client.disconnect(timeout=10)
    return received


def check_recorded(root: str, wire: Wire, connection: str = "conn-0001") -> None:
    files = stomp_files(root)
    assert joined(files[f"{connection}.c2s"]) == redacted(bytes(wire.out))
    assert joined(files[f"{connection}.s2c"]) == bytes(wire.into)


@pytest.mark.parametrize("coalesce", [0.001, 0.0])  # reads resting while a stream flows (the default), or not
def test_the_in_memory_broker_through_the_proxy(tmp_path, coalesce):
    async def main():
        with Archive(str(tmp_path / "proxy"), "mem", roll_size=16 << 10) as archive:
            in_process = Archive(str(tmp_path / "client"), "mem")
            async with aio.Broker(port=0) as broker:
                proxy = await serve_proxy(archive, HOST, 0, HOST, broker.port, coalesce=coalesce)
                with in_process.recorder() as recorder:
                    wire = Wire(also=recorder)
                    received = await exchange(proxy.port, "/queue/p", 400, wire)
                await asyncio.sleep(0.1)
                assert proxy.connections == 0  # the client's close ended the link
                await proxy.close()
            in_process.close()
        return wire, received

    wire, received = run(main())
    assert [m.body for m in received] == [binary_body(i) for i in range(400)]
    assert [m.get("x-key") for m in received][:2] == ["a:b\nc\\d 0", "a:b\nc\\d 1"]
    check_recorded(str(tmp_path / "proxy"), wire)
    check_recorded(str(tmp_path / "client"), wire)  # the same recorder as the client's wire_hook
    files = stomp_files(str(tmp_path / "proxy"))
    assert len(files["conn-0001.s2c"]) > 3  # rolled, at frames: each piece decodes on its own
    sent = [f for path in files["conn-0001.c2s"] for f in fastframe.decode(read_file(path))]
    assert [f.body for f in sent if f.command == "SEND"] == [binary_body(i) for i in range(400)]
    got = [f for path in files["conn-0001.s2c"] for f in fastframe.decode(read_file(path))]
    assert [f.body for f in got if f.command == "MESSAGE"] == [m.body for m in received]


def test_proxy_options_are_checked(tmp_path):
    async def main():
        with Archive(str(tmp_path), "x") as archive:
            for bad in ({"coalesce": -0.001}, {"coalesce": 2.0}, {"coalesce": True}, {"high_water": 0}):
                with pytest.raises(ValueError):
                    await serve_proxy(archive, HOST, 0, HOST, 9, **bad)

    run(main())


async def raw_exchange(port: int, send: bytes, wait: float = 5.0) -> bytes:
    """Send ``send`` on a plain socket, read until the other side closes (bounded)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(send)
    await writer.drain()
    got = bytearray()
    try:
        while True:
            data = await asyncio.wait_for(reader.read(65536), wait)
            if not data:
                break
            got += data
    except (ConnectionError, asyncio.TimeoutError):
        pass
    writer.close()
    return bytes(got)


def test_a_malformed_client_stream_is_forwarded_and_recorded_unchanged(tmp_path):
    # content-length shorter than the body: no NUL where it must be (missing-null), then bytes no frame has
    garbage = b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:/q\ncontent-length:2\n\nshort\0\xff\xfe GARBAGE\r\r"

    async def main():
        with Archive(str(tmp_path), "mem") as archive:
            async with aio.Broker(port=0) as broker:
                async with await serve_proxy(archive, HOST, 0, HOST, broker.port) as proxy:
                    direct = await raw_exchange(broker.port, garbage)
                    through = await raw_exchange(proxy.port, garbage)
                    await asyncio.sleep(0.1)
        return direct, through

    direct, through = run(main())
    assert b"ERROR" in through and through.split(b"session:")[0] == direct.split(b"session:")[0]
    files = stomp_files(str(tmp_path))
    assert joined(files["conn-0001.c2s"]) == garbage
    assert joined(files["conn-0001.s2c"]) == through


class Blaster:
    """A raw upstream: sends ``data`` to whoever connects (then, with ``cut``, drops the connection)."""

    def __init__(self, data: bytes, cut: bool = False) -> None:
        self.data = data
        self.cut = cut
        self.port = 0

    async def __aenter__(self):
        async def handle(reader, writer):
            writer.write(self.data)
            if self.cut:
                writer.transport.abort()  # a broker killed: no FIN after the last byte, a reset
                return
            await writer.drain()
            await reader.read()  # until the proxy closes
            writer.close()

        self.server = await asyncio.start_server(handle, HOST, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()


def test_a_slow_client_holds_the_broker_back_not_the_proxy_memory(tmp_path):
    stream = generate_stream(40_000, seed=3)  # about 20 MB of broker frames
    high_water = 64 * 1024

    async def main():
        # room for the whole stream waiting for the disk: this test is about the sockets' flow control (on a
        # loaded machine the writer thread can fall 8 MB behind a 20 MB burst, and the recording is dropped)
        with Archive(str(tmp_path), "blast", max_pending=2 * len(stream)) as archive:
            async with Blaster(stream) as upstream:
                proxy = await serve_proxy(archive, HOST, 0, HOST, upstream.port, high_water=high_water)
                sock = socket.create_connection((HOST, proxy.port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
                sock.setblocking(False)
                peak = 0
                for _ in range(40):  # the client reads nothing for a second
                    await asyncio.sleep(0.025)
                    peak = max(peak, proxy.buffered)
                loop = asyncio.get_running_loop()
                got = bytearray()
                while len(got) < len(stream):
                    data = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 10)
                    if not data:
                        break
                    got += data
                    peak = max(peak, proxy.buffered)
                sock.close()
                await asyncio.sleep(0.1)
                await proxy.close()
        return peak, bytes(got)

    peak, got = run(main())
    assert got == stream
    # one direction's write buffer stops the other side's reading at high_water: at most that plus a read or two
    assert peak < high_water + 2 * 256 * 1024 and peak < len(stream) // 10
    assert joined(stomp_files(str(tmp_path))["conn-0001.s2c"]) == stream


def test_a_broker_dropped_mid_frame(tmp_path):
    stream = generate_stream(50, seed=1)
    cut = stream[: len(stream) - 10]  # inside the last frame

    async def main():
        with Archive(str(tmp_path), "cut") as archive:
            async with Blaster(cut, cut=True) as upstream:
                async with await serve_proxy(archive, HOST, 0, HOST, upstream.port) as proxy:
                    got = await raw_exchange(proxy.port, b"CONNECT\n\n\0")
                    await asyncio.sleep(0.1)
                    assert proxy.connections == 0
        return got

    got = run(main())
    assert got == cut  # the client saw every byte, then the end of the connection
    (path,) = stomp_files(str(tmp_path))["conn-0001.s2c"]
    assert read_file(path) == cut  # closed and readable up to the last byte
    assert os.path.exists(path + ".ffidx") and os.path.exists(path + ".fftimes")
    with pytest.raises(fastframe.TruncatedError):
        fastframe.decode(read_file(path))


KILL_AT = 3025  # SENDs before the broker is killed: between two receipts, so SENDs are in flight
DROP_DEADLINE = 10.0  # seconds from the kill to the client's ConnectionClosedError


async def stream_until_killed(port: int, kill: Callable[[], None], **options) -> Tuple[Wire, int]:
    """Through the proxy on ``port``: a client streams SENDs (binary bodies, escaped headers, a receipt every 50th)
    while its consumer takes the MESSAGEs; after KILL_AT SENDs, once MESSAGEs flow back, ``kill()`` kills the
    broker. Returns what crossed the client's wire and how many SENDs it made, once it saw the drop."""
    wire, sent, got = Wire(), 0, []
    killed_at = None

    async def consume(sub):
        while True:
            got.append(await sub.get(timeout=30))

    with pytest.raises(aio.ConnectionClosedError):  # the client sees the drop
        async with aio.connect(HOST, port, wire_hook=wire, heartbeat=(0, 0), **options) as client:
            consumer = asyncio.ensure_future(consume(await client.subscribe("/queue/killed")))
            try:
                for i in range(100_000):
                    headers = {"x-key": f"a:b\nc\\d {i}"}
                    await client.send("/queue/killed", binary_body(i), headers, receipt=i % 50 == 0)
                    sent += 1
                    if i == KILL_AT:
                        for _ in range(1000):  # both directions flowing (bounded: 10 s)
                            if got:
                                break
                            await asyncio.sleep(0.01)
                        kill()  # mid-stream: no DISCONNECT, no FIN from STOMP's side
                        killed_at = time.monotonic()
            finally:
                consumer.cancel()
                await asyncio.gather(consumer, return_exceptions=True)  # its drop or its cancel, retrieved
    assert killed_at is not None and time.monotonic() - killed_at < DROP_DEADLINE
    return wire, sent


def sidecars_written(files: Dict[str, List[str]]) -> bool:
    """Every recorded piece has its sidecars: a piece gets them when it is closed."""
    pieces = [p for paths in files.values() for p in paths]
    return bool(pieces) and all(os.path.exists(p + ".ffidx") and os.path.exists(p + ".fftimes") for p in pieces)


def check_recorded_to_the_drop(files: Dict[str, List[str]], wire: Wire, sent: int) -> None:
    """conn-0001 of ``stream_until_killed``, as recorded: rolled before the kill, every byte the client got and
    only those, each file closed after its last byte (its sidecar says so) and decoding to whole frames, then at
    most the one the kill cut; the MESSAGEs are the first bodies sent, in order."""
    assert KILL_AT < sent < 100_000 and len(files["conn-0001.c2s"]) > 1
    recorded_in, recorded_out = joined(files["conn-0001.s2c"]), joined(files["conn-0001.c2s"])
    assert recorded_in == bytes(wire.into)  # everything the client got, and only that
    assert redacted(bytes(wire.out)).startswith(recorded_out) and len(recorded_out) > KILL_AT * 100
    for paths in files.values():
        for path in paths:
            with open(path + ".ffidx", "rb") as sidecar:
                index = json.loads(sidecar.read())
            assert index["size"] == os.path.getsize(path) == len(read_file(path))  # closed after its last byte
        decoder = fastframe.Decoder()
        frames = [f for path in paths for f in decoder.feed(read_file(path))]  # no DecodeError
        assert frames and decoder.buffered < 1024  # whole frames, then at most the one the kill cut
    messages = [f for f in fastframe.Decoder().feed(recorded_in) if f.command == "MESSAGE"]
    assert [f.body for f in messages] == [binary_body(i) for i in range(len(messages))] and messages


def test_the_broker_process_killed_mid_stream(tmp_path):
    """A real broker process (a private ``fastframe broker``: the shared ones stay up) killed with SIGKILL while
    messages stream both ways through the proxy: the client sees the drop, and the proxy closes both directions'
    files on its own (sidecars written), each readable to its last byte. The same against a private RabbitMQ
    node: test_rabbitmq_killed.py."""
    broker, broker_port = start_fastframe("broker", "--port", "0")
    try:

        async def main():
            with Archive(str(tmp_path), "killed", roll_size=64 << 10) as archive:
                async with await serve_proxy(archive, HOST, 0, HOST, broker_port) as proxy:
                    wire, sent = await stream_until_killed(proxy.port, broker.kill)
                    for _ in range(500):  # the proxy ends the link by itself (bounded: 5 s)
                        if proxy.connections == 0:
                            break
                        await asyncio.sleep(0.01)
                    assert proxy.connections == 0
                    assert archive.flush(10)
                    # checked while the proxy still runs: the drop closed the files, not a Ctrl-C
                    files = stomp_files(str(tmp_path))
                    sidecars = sidecars_written(files)
            return wire, sent, files, sidecars

        wire, sent, files, sidecars = run(main(), timeout=90)
    finally:
        broker.kill()
        broker.communicate(timeout=10)
    assert broker.returncode == -signal.SIGKILL and sidecars
    check_recorded_to_the_drop(files, wire, sent)


def test_an_unreachable_broker_closes_the_client(tmp_path):
    free = socket.socket()
    free.bind((HOST, 0))
    port = free.getsockname()[1]
    free.close()

    async def main():
        with Archive(str(tmp_path), "none") as archive:
            async with await serve_proxy(archive, HOST, 0, HOST, port, connect_timeout=2) as proxy:
                return await raw_exchange(proxy.port, b"CONNECT\n\n\0")

    assert run(main()) == b""
    assert stomp_files(str(tmp_path)) == {}


@pytest.mark.interop
@pytest.mark.parametrize("name", ["rabbitmq", "activemq"])
def test_a_live_broker_through_the_proxy(tmp_path, name):
    broker = BROKERS[name]
    require_broker(broker)
    destination = unique("capture", broker)

    # the proxy in a process of its own, as users run it (sharing the client's interpreter, the two take
    # turns with the GIL and a 10,000-frame burst can hold the client's heart-beats past RabbitMQ's check)
    with RecordProcess(broker.port, str(tmp_path), "--name", name, "--roll-size", "256k") as port:
        wire = Wire()
        received = run(exchange(port, destination, N_LIVE, wire, **broker.options("1.2")), timeout=120)
        time.sleep(0.2)
    assert [m.body for m in received] == [binary_body(i) for i in range(N_LIVE)]
    assert [m.get("x-key") for m in received] == [f"a:b\nc\\d {i}" for i in range(N_LIVE)]
    check_recorded(str(tmp_path), wire)
    files = stomp_files(str(tmp_path))
    got = [f for path in files["conn-0001.s2c"] for f in fastframe.decode(read_file(path))]
    assert [f.body for f in got if f.command == "MESSAGE"] == [m.body for m in received]
    assert [f.get("x-key") for f in got if f.command == "MESSAGE"] == [m.get("x-key") for m in received]


@pytest.mark.interop
@pytest.mark.parametrize("name", ["rabbitmq", "activemq"])
def test_stomp_py_through_the_proxy(tmp_path, name):
    """A client nobody here wrote (stomp.py, threads), heart-beats on, binary bodies and escaped headers: it
    sees what it would see without the proxy, and the archive holds exactly the frames each side sent."""
    stomp = require("stomp", "bench")
    broker = BROKERS[name]
    require_broker(broker)
    destination = unique("capture-stomppy", broker)
    bodies = [binary_body(i) for i in range(N_STOMP_PY)]
    got, done = [], threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            got.append((frame.body, frame.headers.get("x-key")))
            if len(got) == len(bodies):
                done.set()

    with RecordProcess(broker.port, str(tmp_path)) as port:
        conn = stomp.Connection12([(HOST, port)], heartbeats=(500, 500), auto_decode=False, vhost="/")
        conn.set_listener("t", Listener())
        conn.connect("guest", "guest", wait=True)
        conn.subscribe(destination, id="1", ack="auto")
        for i, body in enumerate(bodies):
            conn.send(destination, body, headers={"x-key": f"a:b\nc\\{i}"})
        assert done.wait(60)
        conn.disconnect()
    assert got == [(body, f"a:b\nc\\{i}") for i, body in enumerate(bodies)]
    files = stomp_files(str(tmp_path))
    sent = fastframe.decode(joined(files["conn-0001.c2s"]))
    received = fastframe.decode(joined(files["conn-0001.s2c"]))
    assert [f.body for f in sent if f.command == "SEND"] == bodies
    assert [(f.body, f.get("x-key")) for f in received if f.command == "MESSAGE"] == got
    assert sent[0].command in ("CONNECT", "STOMP") and received[0].command == "CONNECTED"
    assert sent[0].get("heart-beat") == "500,500" and received[0].get("heart-beat") not in (None, "0,0")


@pytest.mark.interop
@pytest.mark.parametrize("name", ["rabbitmq", "activemq"])
def test_stompman_through_the_proxy(tmp_path, name):
    """stompman (asyncio, another client nobody here wrote), a producer and a consumer connection, heart-beats on:
    every body arrives, and the archive holds what each connection sent and received."""
    require("stompman", "bench")
    if str(REPO) not in sys.path:  # bench/ is a package at the repository root, not an installed one
        sys.path.insert(0, str(REPO))
    from bench.clients import Collector, body_for, run_stompman

    broker = BROKERS[name]
    require_broker(broker)
    token = os.urandom(4).hex().encode() + b":"
    payloads = [body_for(token, i, 300) for i in range(N_LIVE)]
    got = Collector(token, len(payloads))
    with RecordProcess(broker.port, str(tmp_path)) as port:
        run_stompman(HOST, port, unique("capture-stompman", broker), payloads, got, 30.0, heartbeat=(1000, 1000))
    assert sorted(got.bodies) == sorted(payloads) and got.current == len(payloads)
    sent, received = [], []
    for key, paths in stomp_files(str(tmp_path)).items():
        frames = fastframe.decode(joined(paths))
        if key.endswith(".c2s"):
            assert frames[0].command in ("CONNECT", "STOMP") and frames[0].get("heart-beat") == "1000,1000"
            sent += [f.body for f in frames if f.command == "SEND"]
        else:
            received += [f.body for f in frames if f.command == "MESSAGE"]
    assert sent == payloads and received == got.bodies
