"""A broker whose decoder keeps header bytes that are not UTF-8 (``keep_invalid_utf8``) routes them as they came.

RabbitMQ passes such a header value on to its subscribers unchanged; the in-memory broker does the same when
asked, so the Spark source's poison-message test runs against it (tests/spark/test_stream_brokers.py).
"""

from __future__ import annotations

import socket
import time

import pytest

from fastframe.broker._encoding import message_tail
from fastframe.testing import TestBroker


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_the_message_template_writes_kept_bytes_back(version: str) -> None:
    _, tail = message_tail(version, (("x-bad", "a\udcffb\udcc3"),), b"hi")
    assert tail == b"x-bad:a\xffb\xc3\ncontent-length:2\n\nhi\0"


def _read_until(sock: socket.socket, marker: bytes, count: int) -> bytes:
    received = b""
    deadline = time.monotonic() + 10
    while received.count(marker) < count and time.monotonic() < deadline:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    return received


@pytest.mark.parametrize("destination", [b"/queue/q", b"/amq/queue/s"])
def test_a_send_with_a_header_that_is_not_utf8_is_delivered_byte_exact(destination: bytes) -> None:
    with TestBroker(decoder_options={"keep_invalid_utf8": True}) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
            _read_until(sock, b"CONNECTED", 1)
            declare = b"x-queue-type:stream\ndurable:true\nauto-delete:false\n" if b"amq" in destination else b""
            subscribe = b"/queue/s" if b"amq" in destination else destination
            sock.sendall(
                b"SUBSCRIBE\nid:0\ndestination:%s\nack:client\nprefetch-count:9\n%b\n\0" % (subscribe, declare)
            )
            for value in (b"a\xffb\xc3", b"ok"):
                sock.sendall(b"SEND\ndestination:%s\nx-bad:%s\nreceipt:r\n\nhi\0" % (destination, value))
            received = _read_until(sock, b"RECEIPT", 2)
        logged = [entry.frame.get("x-bad") for entry in broker.received()]  # the log keeps them too
    assert [value.encode("utf-8", "surrogateescape") for value in logged] == [b"a\xffb\xc3", b"ok"]
    assert b"\nx-bad:a\xffb\xc3\n" in received and b"\nx-bad:ok\n" in received  # and the connection lived on
    assert received.count(b"MESSAGE\n") == 2
