"""RabbitMQ killed mid-stream behind ``fastframe record`` (issue 22): a private node started here (rabbitmq_node.py;
the shared broker on 127.0.0.1:61613 stays up), its beam.smp killed with SIGKILL while messages stream both ways.
The same scenario and checks as test_proxy.py's ``fastframe broker`` kill. Needs RabbitMQ installed, not running:
a skip locally without it, a failure with CI=true."""

from __future__ import annotations

import time

import pytest

from interop._live import BROKERS, stomp_answers

from .helpers import RecordProcess, joined, stomp_files
from .rabbitmq_node import PrivateRabbitMQ, require_rabbitmq
from .test_proxy import check_recorded_to_the_drop, run, sidecars_written, stream_until_killed


@pytest.fixture(scope="module")
def rabbitmq_node(tmp_path_factory):
    require_rabbitmq()
    node = PrivateRabbitMQ(tmp_path_factory.mktemp("rabbitmq-node"))
    try:
        node.start()
        yield node
    finally:
        node.close()  # killed and its folder removed, whatever the test did


@pytest.mark.interop
def test_rabbitmq_killed_mid_stream(tmp_path, rabbitmq_node):
    """The client sees the drop; ``fastframe record`` closes both directions' files by itself (each with its
    sidecars, before any Ctrl-C), each readable to its last byte. The shared RabbitMQ, when up, stays up."""
    rabbitmq = BROKERS["rabbitmq"]  # the shared broker: its port, and client options that fit any RabbitMQ
    shared_up = stomp_answers(rabbitmq.port)
    with RecordProcess(rabbitmq_node.stomp_port, str(tmp_path), "--name", "rabbitmq", "--roll-size", "64k") as port:
        wire, sent = run(stream_until_killed(port, rabbitmq_node.kill, **rabbitmq.common), timeout=60)
        deadline = time.monotonic() + 10  # the proxy's writer thread closes the pieces: bounded
        files = stomp_files(str(tmp_path))
        # every piece closed is not yet the end: a piece rolled is closed before the next one opens, at
        # the next write, so the wait is also for the pieces to hold all the client got (or the deadline)
        while not (sidecars_written(files) and holds_what_the_client_got(files, wire)) and time.monotonic() < deadline:
            time.sleep(0.05)
            files = stomp_files(str(tmp_path))
        assert sidecars_written(files), files  # while fastframe record still runs: closed by the drop
    deadline = time.monotonic() + 10
    while rabbitmq_node.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not rabbitmq_node.alive()
    assert stomp_answers(rabbitmq.port) or not shared_up
    check_recorded_to_the_drop(files, wire, sent)


def holds_what_the_client_got(files, wire) -> bool:
    """The recording of what the server sent is at least as long as what the client received."""
    return len(joined(files.get("conn-0001.s2c", []))) >= len(wire.into)
