"""The server role: CONNECT in, CONNECTED (or ERROR) out; client frames in, MESSAGE/RECEIPT/ERROR out.

A broker is built on it. The connection owns the handshake, the negotiated version, heart-beat
timing and escaping, the decoder's limits, DISCONNECT's receipt and the shape of CONNECTED,
MESSAGE, RECEIPT and ERROR; the broker owns the session's meaning (subscriptions, acknowledgements,
transactions: :mod:`fastframe.broker`). Every event carries the client's frame.
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence, Tuple, Union

from ..codec import VERSIONS, Heartbeat
from . import spec
from ._core import ConnectionCore, Headers, State, check_versions, header_list, misuse
from ._errors import LocalProtocolError
from ._events import (
    Abort,
    Ack,
    Begin,
    Commit,
    ConnectRequest,
    Disconnect,
    Event,
    FrameEvent,
    Nack,
    Send,
    Subscribe,
    Unsubscribe,
)

__all__ = ["ServerConnection", "plain_error"]

_VERSION_LIST = ",".join(VERSIONS)


def plain_error(message: str, text: str) -> Tuple[str, bytes, Tuple[Tuple[str, str], ...]]:
    """``(message, body, headers after message)`` of an ERROR whose body is ``text``, shaped as
    RabbitMQ shapes its ERRORs (``content-type:text/plain``, ``version`` listing the versions it
    speaks, ``content-length``): what :meth:`ServerConnection.error` takes as ``(message, body=,
    headers=)``. The broker's errors and the asyncio server's own (its limits, time-outs, shutdown)
    both have this shape."""
    data = text.encode("utf-8")
    return (
        message,
        data,
        (("content-type", "text/plain"), ("version", _VERSION_LIST), ("content-length", str(len(data)))),
    )


_OPEN = (State.CONNECTED, State.DISCONNECTING)
# what each version cannot carry in a header (name, value): an ERROR's become spaces, so it always goes out
_UNWRITABLE = {
    "1.0": (re.compile("[\r\n\0:]"), re.compile("[\r\n\0]")),  # no escapes at all
    "1.1": (re.compile("[\r\0]"), re.compile("[\r\0]")),  # no \r escape
    "1.2": (re.compile("\0"), re.compile("\0")),
}


class ServerConnection(ConnectionCore):
    """A STOMP server connection without I/O: every method returns the bytes to write.

    Feed the client's bytes to :meth:`receive_data`; the first event is a :class:`ConnectRequest`:
    answer it with :meth:`accept` (CONNECTED) or :meth:`reject` (ERROR). Frames the client sent
    before the answer are held and come out of the next :meth:`receive_data` call (``b""`` will do).
    ``versions`` are those we support; ``heartbeat=(sx, sy)`` our heart-beat offer in ms.

    After the handshake every client frame becomes its event, its fields looked up, not checked
    against a session: subscriptions, acknowledgements, transactions and receipts other than
    DISCONNECT's are the application's (a command no client sends: a plain :class:`FrameEvent`).
    :meth:`receive_frames` hands over the decoded frames without building events.
    """

    our_side = "server"
    peer_side = "client"

    def __init__(
        self,
        *,
        versions: Sequence[str] = VERSIONS,
        heartbeat: Tuple[int, int] = (0, 0),
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.versions = check_versions(versions)
        self.offered_heartbeat = heartbeat
        #: The client's CONNECT (or STOMP) event, once it arrived.
        self.request: Optional[ConnectRequest] = None
        #: The version :meth:`accept` answers in, negotiated once when CONNECT arrived: the highest
        #: of ``versions`` the client accepts (``None``: none in common, or no CONNECT yet). The
        #: connection speaks it (:attr:`version`) from CONNECTED on.
        self.common_version: Optional[str] = None
        self._told = False  # ERROR (or a rejection) was sent: nothing else goes out

    def _answering(self) -> bool:
        # frames may go out while the session is open, and after the client broke the protocol
        # until error() tells it why: the frames it sent before the violation (the error's events)
        # are answered first, in order, so what the client sent well is not lost
        return self.state in _OPEN or (self._error is not None and self.version is not None and not self._told)

    def _after_handshake(self, frame: Any) -> None:
        self._held = bytearray()  # the version is unknown until accept(): keep what follows

    def receive_frames(self, data: bytes, now: Optional[float] = None) -> List[Any]:
        """:meth:`receive_data` for a broker that wants the frames: those its events carry, in order
        (heart-beats only count as liveness). Unless ``strict``, frames after the handshake come
        straight from the decoder, no event built (DISCONNECT excepted).
        A :class:`RemoteProtocolError`'s ``events`` are events, as ever."""
        if self.strict or self.state is not State.CONNECTED or self._backlog or self._error is not None or self._ready:
            return [event.frame for event in self.receive_data(data, now) if isinstance(event, FrameEvent)]
        self._heard(now, len(data))
        items = self._decode(self._decoder.feed, data, [])
        frames: List[Any] = [item for item in items if type(item) is not Heartbeat]
        if "DISCONNECT" not in [frame.command for frame in frames]:
            return frames  # nothing here changes the state
        for index, frame in enumerate(frames):
            if frame.command == "DISCONNECT" or self.state is not State.CONNECTED:
                # the state changes (or, after DISCONNECT, the frame is refused: with the events before)
                self._on_frame(frame, [self._client_frame(before) for before in frames[:index]])
        return frames

    # ------------------------------------------------------------------ handshake

    def accept(self, *, version: Optional[str] = None, headers: Headers = None, now: Optional[float] = None) -> bytes:
        """CONNECTED with the negotiated (:attr:`common_version`, or given) ``version`` and heart-beat;
        extra ``headers`` (server, session)."""
        request = self._pending_request()
        if version is None:
            version = self.common_version
            if version is None:
                raise LocalProtocolError(
                    f"no common version with accept-version {request.accept_version!r}: reject() instead", request.frame
                )
        elif version not in self.versions:
            raise LocalProtocolError(f"version {version!r} is not one we support", request.frame)
        sx, sy = self.offered_heartbeat
        pairs = [("version", version), ("heart-beat", f"{sx},{sy}"), *header_list(headers)]
        _, data = self._build("CONNECTED", pairs, state=State.CONNECTING, version=version)
        to_server, to_client = spec.negotiate_heartbeat(request.heartbeat, (sx, sy))
        self.heartbeat = (to_client, to_server)
        self._switch_codec(version)
        self.state = State.CONNECTED
        self._backlog, self._held = bytes(self._held or b""), None
        self._note_now(now)
        return data

    def reject(self, message: str, *, body: Union[bytes, str] = b"", headers: Headers = None) -> bytes:
        """ERROR refusing the connection (bad login, no common version); the state becomes CLOSED.

        Written as :meth:`error` writes it before CONNECTED: by STOMP 1.0's rules."""
        request = self._pending_request()
        data = self._error_frame(message, body, headers, None, state=State.CONNECTING)
        self.request = request
        self.state = State.CLOSED
        self._told = True
        return data

    def _pending_request(self) -> ConnectRequest:
        if self.state is not State.CONNECTING or self.request is None:
            raise misuse(f"no CONNECT to answer (state {self.state.value})", "CONNECTED")
        return self.request

    # ------------------------------------------------------------------ receiving

    def _on_frame(self, frame: Any, events: List[Event]) -> Event:
        command = frame.command
        if self.state is State.IDLE:
            if command not in ("CONNECT", "STOMP"):
                self._fail(f"{command} before CONNECT", frame, events)
            try:
                beat = spec.parse_heartbeat(frame.get("heart-beat"))
            except ValueError as exc:
                self._fail(f"bad heart-beat header in {command}: {exc}", frame, events, exc)
            get = frame.get
            self.request = ConnectRequest(
                frame, get("accept-version"), get("host"), get("login"), get("passcode"), beat
            )
            self.common_version = spec.negotiate_version(self.request.accept_version, self.versions)
            self.state = State.CONNECTING
            return self.request
        if self.state is not State.CONNECTED:
            self._fail(f"{command} in state {self.state.value}", frame, events)
        return self._client_frame(frame)

    def _client_frame(self, frame: Any) -> Event:
        """The event of a client frame, its fields looked up, not checked against a session."""
        command, get = frame.command, frame.get
        if command == "SEND":
            return Send(frame, get("destination") or "", get("transaction"))
        if command == "SUBSCRIBE":
            destination = get("destination") or ""
            sub_id = get("id") or (destination if self.version == "1.0" else "")  # 1.0: the id is optional
            return Subscribe(frame, sub_id, destination, get("ack", "auto"))
        if command == "UNSUBSCRIBE":
            return Unsubscribe(frame, get("id") or get("destination") or "")
        if command in ("ACK", "NACK"):
            ack_id = get("id") if self.version == "1.2" else get("message-id")
            return (Ack if command == "ACK" else Nack)(frame, ack_id or "", get("subscription"), get("transaction"))
        if command in ("BEGIN", "COMMIT", "ABORT"):
            event = {"BEGIN": Begin, "COMMIT": Commit, "ABORT": Abort}[command]
            return event(frame, get("transaction") or "")
        if command == "DISCONNECT":
            receipt = get("receipt")
            if receipt is not None:
                self.pending_receipts[receipt] = command
            self.state = State.DISCONNECTING if receipt is not None else State.CLOSED
            return Disconnect(frame)
        return FrameEvent(frame)  # the application answers what no client should send

    # ------------------------------------------------------------------ sending

    def message(
        self,
        subscription: Optional[str],
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        destination: str,
        message_id: Optional[str] = None,
        ack_id: Optional[str] = None,
        content_type: Optional[str] = None,
    ) -> bytes:
        """MESSAGE to ``destination`` for ``subscription`` (``None``: no subscription header, as 1.0
        allows); a fresh message-id unless given. ``ack_id``, for a subscription whose messages
        the client acknowledges, is sent as the ``ack`` header in 1.2 (the other versions name the
        message-id in ACK)."""
        if not self._answering():
            raise misuse(f"cannot send MESSAGE in state {self.state.value}", "MESSAGE", ("destination", destination))
        message_id = message_id or self.new_id("m-")
        if isinstance(body, str):
            body = body.encode("utf-8")
            content_type = content_type or "text/plain;charset=utf-8"
        pairs = [("destination", destination), ("message-id", message_id)]
        if subscription is not None:
            pairs.append(("subscription", subscription))
        if ack_id is not None and self.version == "1.2":
            pairs.append(("ack", ack_id))
        if content_type is not None:
            pairs.append(("content-type", content_type))
        pairs += header_list(headers)
        return self._build("MESSAGE", pairs, bytes(body), state=None, broken_ok=True)[1]

    def receipt(self, receipt_id: str) -> bytes:
        """RECEIPT for a frame the client sent with ``receipt:<receipt_id>``."""
        if self._told:  # (any state else: the frames of one read are answered after a DISCONNECT among them)
            raise misuse("cannot send RECEIPT after ERROR", "RECEIPT", ("receipt-id", receipt_id))
        data = self._build("RECEIPT", [("receipt-id", receipt_id)], state=None, broken_ok=True)[1]
        if self.pending_receipts.pop(receipt_id, None) == "DISCONNECT":
            self.state = State.CLOSED
        return data

    def frame(self, frame: Any) -> bytes:
        """Any frame (a :class:`fastframe.Frame`), encoded in the negotiated version and validated as
        the other sending methods do; nothing is tracked."""
        if not self._answering():
            raise LocalProtocolError(f"cannot send {frame.command} in state {self.state.value}", frame)
        return self._build(frame.command, list(frame.headers), bytes(frame.body), state=None, broken_ok=True)[1]

    def error(
        self, message: str, *, body: Union[bytes, str] = b"", headers: Headers = None, receipt_id: Optional[str] = None
    ) -> bytes:
        """ERROR with a short ``message`` header (the spec says close the connection after it).

        In every state, also after the client broke the protocol (a :class:`RemoteProtocolError`), to
        tell it why. One escaping rule: the negotiated version's once CONNECTED was sent; before that
        (a fresh connection, a CONNECT not answered yet) STOMP 1.0's, which has no escapes. What the
        version cannot carry in a header becomes a space (in 1.0 CR, LF and NUL, and a colon in a
        name; in 1.1 CR and NUL; in 1.2 NUL), so the ERROR always goes out.
        """
        if self.state is State.CONNECTING:
            return self.reject(message, body=body, headers=headers)
        data = self._error_frame(message, body, headers, receipt_id, state=None, broken_ok=True)
        if receipt_id is not None:
            self.pending_receipts.pop(receipt_id, None)
        self.state = State.CLOSED
        self._told = True
        return data

    def _error_frame(
        self, message: str, body: Union[bytes, str], headers: Headers, receipt_id: Optional[str], *,
        state: Optional[State], broken_ok: bool = False,
    ) -> bytes:  # fmt: skip
        pairs = [("message", message)]
        if receipt_id is not None:
            pairs.append(("receipt-id", receipt_id))
        if isinstance(body, str):
            body = body.encode("utf-8")
            pairs.append(("content-type", "text/plain;charset=utf-8"))
        pairs += header_list(headers)
        version = self.version or "1.0"  # before CONNECTED: 1.0's rules
        names, values = _UNWRITABLE[self.escapes or version]  # (an escape set given as an option rules)
        pairs = [(names.sub(" ", name), values.sub(" ", value)) for name, value in pairs]
        return self._build("ERROR", pairs, bytes(body), state=state, version=version, broken_ok=broken_ok)[1]
