"""A private RabbitMQ node that a test may kill: its own node name, STOMP and distribution ports, data, logs, pid
file and Erlang cookie, all in one folder. The shared broker on 127.0.0.1:61613 (``.ci/brokers``) and epmd,
which every node on the machine registers with, are never touched.

The node runs as the user running the tests, from Debian's ``/usr/lib/rabbitmq/bin/rabbitmq-server``: the
``/usr/sbin`` wrapper would switch to the ``rabbitmq`` user, whose home holds the shared node's cookie. HOME is
the node's folder, so its cookie is a fresh one there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest

from _shared import IN_CI
from interop._live import HOST, stomp_answers

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
START_TIMEOUT = 30.0  # seconds to the first CONNECTED (about 7 s on the shared 2-core machine)
STOP_TIMEOUT = 10.0


def require_rabbitmq() -> None:
    """Skip (locally) or fail (CI=true) when RabbitMQ is not installed."""
    if not os.access(RABBITMQ_SERVER, os.X_OK):
        reason = f"RabbitMQ is not installed ({RABBITMQ_SERVER}; .ci/brokers install)"
        if IN_CI:
            pytest.fail(reason + "; CI=true installs it", pytrace=False)
        pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _proc(pid: int, name: str) -> bytes:
    with open(f"/proc/{pid}/{name}", "rb") as stream:
        return stream.read()


class PrivateRabbitMQ:
    """``start()`` boots the node in ``folder`` and waits for its STOMP listener; ``kill()`` sends SIGKILL to its
    beam.smp only; ``close()`` (always call it) kills whatever is left and removes ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.node = f"ff-kill-{os.getpid()}@localhost"
        self.stomp_port = 0
        self.beam_pid = 0
        self.started_in = 0.0
        self.process: Optional[subprocess.Popen] = None

    def start(self, timeout: float = START_TIMEOUT) -> None:
        folder = self.folder
        self.stomp_port = free_port()
        # no AMQP listener, no management: only STOMP and Erlang distribution, on 127.0.0.1
        (folder / "rabbitmq.conf").write_text(
            f"listeners.tcp = none\nstomp.listeners.tcp.1 = {HOST}:{self.stomp_port}\n"
            "distribution.listener.interface = 127.0.0.1\n"
        )
        (folder / "enabled_plugins").write_text("[rabbitmq_stomp].\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_", "NOTIFY_SOCKET"))}
        env.update(
            HOME=str(folder),  # the Erlang cookie
            RABBITMQ_CONF_ENV_FILE=str(folder / "rabbitmq-env.conf"),  # absent: not /etc/rabbitmq's
            RABBITMQ_CONFIG_FILE=str(folder / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(folder / "advanced.config"),  # absent
            RABBITMQ_ENABLED_PLUGINS_FILE=str(folder / "enabled_plugins"),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS=HOST,
            RABBITMQ_DIST_PORT=str(free_port()),
            ERL_EPMD_ADDRESS=HOST,
            RABBITMQ_MNESIA_BASE=str(folder / "mnesia"),
            RABBITMQ_LOG_BASE=str(folder / "log"),
            RABBITMQ_PID_FILE=str(folder / "pid"),
            RABBITMQ_PLUGINS_EXPAND_DIR=str(folder / "plugins-expand"),
        )
        began = time.monotonic()
        with open(folder / "server.out", "wb") as out:
            # in the foreground: a shell that waits for beam.smp (its child), in a session of its own
            self.process = subprocess.Popen(
                [RABBITMQ_SERVER], cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        while not stomp_answers(self.stomp_port, timeout=2.0):
            if self.process.poll() is not None:
                raise AssertionError(f"{self.node} exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() - began > timeout:
                raise AssertionError(f"{self.node} did not answer CONNECT within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)
        self.started_in = time.monotonic() - began
        self.beam_pid = int((folder / "pid").read_text().strip())  # written by the node itself
        assert self.is_ours(self.beam_pid), f"pid {self.beam_pid} is not {self.node}'s beam.smp"

    def is_ours(self, pid: int) -> bool:
        """``pid`` is this node's beam.smp: the child of the shell started here, with this node's name."""
        try:
            comm = _proc(pid, "comm").strip()
            parent = int(_proc(pid, "stat").rsplit(b")", 1)[1].split()[1])
            environ = _proc(pid, "environ").split(b"\0")
        except (OSError, ValueError, IndexError):
            return False
        own = self.process is not None and parent == self.process.pid
        return comm == b"beam.smp" and own and f"RABBITMQ_NODENAME={self.node}".encode() in environ

    def alive(self) -> bool:
        return self.beam_pid > 0 and self.is_ours(self.beam_pid)

    def kill(self) -> None:
        """SIGKILL to this node's beam.smp (checked again first: a pid is never reused while its parent waits)."""
        assert self.alive(), f"{self.node} is not running"
        os.kill(self.beam_pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill what is left of the node (bounded) and remove its folder."""
        try:
            if self.alive():
                os.kill(self.beam_pid, signal.SIGKILL)
            if self.process is not None:
                try:
                    self.process.wait(STOP_TIMEOUT)  # the shell ends with beam.smp
                except subprocess.TimeoutExpired:
                    # no beam pid known (a failed start): the node's own session, started here, not epmd's
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(STOP_TIMEOUT)
                self._wait_session_gone()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _wait_session_gone(self) -> None:
        """erl_child_setup, beam.smp's helper, leaves by itself once beam.smp is gone (bounded)."""
        assert self.process is not None
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.killpg(self.process.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 40) -> str:
        texts = []
        for path in [self.folder / "server.out", *sorted((self.folder / "log").glob("*.log"))]:
            try:
                texts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
            except OSError:
                pass
        return "\n".join(texts)
