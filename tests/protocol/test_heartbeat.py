"""Heart-beat timing from a fake ``now``: no sleeping, no clock."""

from __future__ import annotations

import pytest

from fastframe.protocol import HeartbeatTimer

from .helpers import pair


def test_timer_deadlines():
    timer = HeartbeatTimer(1000, 500, startup=0.0, now=10.0)
    assert timer.send_deadline() == 11.0 and timer.receive_deadline() == 11.0  # 2 x 500 ms grace
    assert timer.next_deadline() == 11.0
    assert not timer.send_due(10.99) and timer.send_due(11.0)
    timer.sent(10.5)
    assert timer.send_deadline() == 11.5
    assert not timer.peer_silent(11.0) and timer.peer_silent(11.01)
    timer.received(11.0)
    assert not timer.peer_silent(12.0) and timer.peer_silent(12.01)


def test_timer_none_and_grace_and_clock_going_backwards():
    timer = HeartbeatTimer(0, 0)
    assert (timer.send_deadline(), timer.receive_deadline(), timer.next_deadline()) == (None, None, None)
    assert not timer.send_due(1e9) and not timer.peer_silent(1e9)
    timer = HeartbeatTimer(0, 1000, grace=3.5, startup=0.0, now=0.0)
    assert timer.receive_deadline() == 3.5
    timer.received(2.0)
    timer.received(1.0)  # an older report never moves liveness back
    assert timer.receive_deadline() == 5.5
    with pytest.raises(ValueError):
        HeartbeatTimer(0, 1000, grace=0.5)
    with pytest.raises(ValueError):
        HeartbeatTimer(-1, 0)


def test_the_first_beat_gets_one_interval_more():
    timer = HeartbeatTimer(0, 1000, now=5.0)  # ActiveMQ: the first beat after about two intervals
    assert timer.receive_deadline() == 8.0
    timer.received(7.0)
    assert timer.receive_deadline() == 9.0  # from then on, the grace alone
    with pytest.raises(ValueError):
        HeartbeatTimer(0, 1000, startup=-1)


def test_connection_sends_beats_only_when_idle():
    client, server = pair(client_beat=(1000, 0), server_beat=(0, 1000), now=0.0)
    assert client.heartbeat == (1000, 0)
    assert client.heartbeat_due(0.5) == b""
    client.data_sent(0.9)  # a frame went out: the next beat moves
    assert client.heartbeat_due(1.5) == b"" and client.next_deadline() == 1.9
    assert client.heartbeat_due(1.9) == b"\n"
    assert client.heartbeat_due(2.0) == b"" and client.next_deadline() == 2.9


def test_any_byte_counts_as_liveness_and_grace_is_configurable():
    client, server = pair(client_beat=(0, 1000), server_beat=(1000, 0), now=0.0, heartbeat_grace=1.5)
    assert client.heartbeat == (0, 1000)
    assert not client.peer_silent(2.5) and client.peer_silent(2.51)  # + 1 interval for the first beat
    client.receive_data(b"MESS", now=1.4)  # part of a frame is still a sign of life
    assert not client.peer_silent(2.9) and client.peer_silent(2.91)
    assert client.next_deadline() == 2.9


def test_slow_processing_does_not_make_the_peer_silent():
    # liveness is when bytes arrived (the transport's now), not when the program looked at them
    client, _ = pair(client_beat=(0, 1000), server_beat=(1000, 0), now=0.0)
    client.receive_data(b"\n", now=1.0)
    assert not client.peer_silent(3.0)


def test_timing_starts_lazily_without_now():
    client, server = pair(client_beat=(1000, 1000), server_beat=(1000, 1000), now=None)
    assert client.next_deadline() is None  # no time known yet
    assert client.heartbeat_due(50.0) == b"" and client.next_deadline() == 51.0
    assert not client.peer_silent(52.9) and client.peer_silent(53.01)


def test_no_beats_before_connected_or_after_close():
    client, server = pair(client_beat=(1000, 1000), server_beat=(1000, 1000), now=0.0)
    client.receive_eof()
    assert client.heartbeat_due(100.0) == b"" and not client.peer_silent(100.0)
