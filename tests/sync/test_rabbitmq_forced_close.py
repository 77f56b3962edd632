"""RabbitMQ closing a connection by force (``rabbitmqctl close_all_connections``, what an operator or a
maintenance script does) says ERROR "AMQP channel died", AMQP's 320 in the body: the server going away,
not a refusal, so a client with a ``Reconnect`` policy reconnects and re-subscribes. A private node started
here (tests/capture/rabbitmq_node.py; the shared broker is never touched). Needs RabbitMQ installed: a skip
locally without it, a failure with CI=true."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Iterator

import pytest

import fastframe.sync
from capture.rabbitmq_node import PrivateRabbitMQ, require_rabbitmq
from fastframe import aio

RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRabbitMQ]:
    require_rabbitmq()
    running = PrivateRabbitMQ(tmp_path_factory.mktemp("rabbitmq-node"))
    try:
        running.start()
        yield running
    finally:
        running.close()


def close_all_connections(node: PrivateRabbitMQ, reason: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
    env.update(HOME=str(node.folder), ERL_EPMD_ADDRESS="127.0.0.1")  # the node's own cookie
    subprocess.run(
        [RABBITMQCTL, "-n", node.node, "close_all_connections", reason], env=env, check=True, capture_output=True,
        timeout=60,
    )  # fmt: skip


@pytest.mark.interop
def test_a_forced_close_is_reconnected_after(node: PrivateRabbitMQ) -> None:
    errors = []
    policy = aio.Reconnect(initial_delay=0.05, max_delay=0.5, attempts=20)
    hook = lambda direction, frame: errors.append(frame) if frame is not None and frame.command == "ERROR" else None  # noqa: E731
    options = {"login": "guest", "passcode": "guest", "host_header": "/", "escapes": "1.2", "timeout": 10}
    with fastframe.sync.connect("127.0.0.1", node.stomp_port, reconnect=policy, frame_hook=hook, **options) as client:
        sub = client.subscribe("/queue/forced")
        client.send("/queue/forced", b"before", receipt=True)
        assert sub.get(timeout=10).body == b"before"
        close_all_connections(node, "closed by fastframe's test")
        deadline = time.monotonic() + 20
        while client.connections < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.connections == 2 and client.is_connected
        client.send("/queue/forced", b"after", receipt=True)
        assert sub.get(timeout=10).body == b"after"  # the same subscription, re-established
    assert errors, "RabbitMQ closed the connection without an ERROR"
    error = aio.ServerError(errors[0].get("message") or "", errors[0])
    assert policy.retries(error), errors[0]  # what made the client reconnect
