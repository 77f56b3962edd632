"""The server role: CONNECT in, CONNECTED (or ERROR) out; client frames in, MESSAGE/RECEIPT/ERROR out.

A broker is built on it: every event carries the client's frame, and the connection tracks the
client's subscriptions, transactions, pending receipts and the messages it has not acknowledged.
With ``bookkeeping=False`` the broker keeps that state itself (``fastframe.broker`` does) and the
connection keeps the rest: the handshake, the negotiated version, heart-beats and escaping, the
decoder's limits, DISCONNECT's receipt and the shape of CONNECTED, RECEIPT and ERROR.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from .. import DecodeError, Heartbeat, spec
from .._constants import VERSIONS
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

__all__ = ["ServerConnection"]

_OPEN = (State.CONNECTED, State.DISCONNECTING)


class ServerConnection(ConnectionCore):
    """A STOMP server connection without I/O: every method returns the bytes to write.

    Feed the client's bytes to :meth:`receive_data`; the first event is a :class:`ConnectRequest`:
    answer it with :meth:`accept` (CONNECTED) or :meth:`reject` (ERROR). Frames the client sent
    before the answer are held and come out of the next :meth:`receive_data` call (``b""`` will do).
    ``versions`` are those we support; ``heartbeat=(sx, sy)`` our heart-beat offer in ms.

    ``bookkeeping=False`` leaves subscriptions, acknowledgements, transactions and receipts other than
    DISCONNECT's to the application: after the handshake every client frame becomes its event
    unchecked (a command no client sends: a plain :class:`FrameEvent`), :attr:`subscriptions`,
    :attr:`unacked` and :attr:`transactions` stay empty, and :meth:`receipt` answers any id. With it,
    :meth:`receive_frames` hands over the decoded frames without building events.
    """

    our_side = "server"
    peer_side = "client"

    def __init__(
        self,
        *,
        versions: Sequence[str] = VERSIONS,
        heartbeat: Tuple[int, int] = (0, 0),
        bookkeeping: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.bookkeeping = bookkeeping
        self.versions = check_versions(versions)
        self.offered_heartbeat = heartbeat
        #: The client's CONNECT (or STOMP) event, once it arrived.
        self.request: Optional[ConnectRequest] = None
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
        (heart-beats only count as liveness). With ``bookkeeping=False`` and not ``strict``, frames
        after the handshake come straight from the decoder, no event built (DISCONNECT excepted).
        A :class:`RemoteProtocolError`'s ``events`` are events, as ever."""
        if (
            self.bookkeeping or self.strict or self.state is not State.CONNECTED or self._backlog
            or self._error is not None or self._ready
        ):  # fmt: skip
            return [event.frame for event in self.receive_data(data, now) if isinstance(event, FrameEvent)]
        timer = self._note_now(now)
        if timer is not None and now is not None and data:
            timer.received(now)
        try:
            items = self._decoder.feed(data)
        except DecodeError as exc:
            self._undecodable(exc, [])
        self.frames_received += len(items)
        frames: List[Any] = [item for item in items if type(item) is not Heartbeat]
        if "DISCONNECT" not in [frame.command for frame in frames]:
            return frames  # nothing here changes the state
        for index, frame in enumerate(frames):
            if frame.command == "DISCONNECT" or self.state is not State.CONNECTED:
                # the state changes (or, after DISCONNECT, the frame is refused: with the events before)
                self._on_frame(frame, [self._unchecked(before) for before in frames[:index]])
        return frames

    # ------------------------------------------------------------------ handshake

    def accept(self, *, version: Optional[str] = None, headers: Headers = None, now: Optional[float] = None) -> bytes:
        """CONNECTED with the negotiated (or given) ``version`` and heart-beat; extra ``headers`` (server, session)."""
        request = self._pending_request()
        if version is None:
            version = spec.negotiate_version(request.accept_version, self.versions)
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
        """ERROR refusing the connection (bad login, no common version); the state becomes CLOSED."""
        request = self._pending_request()
        data = self._error_frame(message, body, headers, None, version="1.0", state=State.CONNECTING)
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
            self.state = State.CONNECTING
            return self.request
        if self.state is not State.CONNECTED:
            self._fail(f"{command} in state {self.state.value}", frame, events)
        if not self.bookkeeping:
            return self._unchecked(frame)
        receipt = frame.get("receipt")
        if receipt is not None:
            if receipt in self.pending_receipts:
                self._fail(f"receipt id {receipt!r} is already pending", frame, events)
        event = self._client_frame(frame, events)
        if receipt is not None:
            self.pending_receipts[receipt] = command
        return event

    def _client_frame(self, frame: Any, events: List[Event]) -> Event:
        command = frame.command
        get = frame.get
        if command == "SEND":
            (destination,) = self._require(frame, events, "destination")
            return Send(frame, destination, self._known_tx(frame, events))
        if command == "SUBSCRIBE":
            (destination,) = self._require(frame, events, "destination")
            sub_id = get("id") if self.version != "1.0" or get("id") is not None else destination
            if sub_id is None:
                self._fail("SUBSCRIBE frame without an 'id' header", frame, events)
            ack = get("ack", "auto")
            if ack not in spec.ACK_MODES[self.version or "1.2"]:
                self._fail(f"SUBSCRIBE with unknown ack mode {ack!r}", frame, events)
            if sub_id in self.subscriptions:
                self._fail(f"subscription id {sub_id!r} is already in use", frame, events)
            self.subscriptions[sub_id] = (destination, ack)
            return Subscribe(frame, sub_id, destination, ack)
        if command == "UNSUBSCRIBE":
            sub_id = get("id") if self.version != "1.0" or get("id") is not None else get("destination")
            if sub_id is None or sub_id not in self.subscriptions:
                self._fail(f"UNSUBSCRIBE of unknown subscription {sub_id!r}", frame, events)
            self._forget_subscription(sub_id)
            return Unsubscribe(frame, sub_id)
        if command in ("ACK", "NACK"):
            if command == "NACK" and self.version == "1.0":
                self._fail("NACK does not exist in STOMP 1.0", frame, events)
            (ack_id,) = self._require(frame, events, "id" if self.version == "1.2" else "message-id")
            if ack_id not in self.unacked:
                self._fail(f"{command} of unknown message {ack_id!r}", frame, events)
            tx = self._known_tx(frame, events)
            sub_id = self.unacked[ack_id][0]
            self._settle(ack_id)
            return (Ack if command == "ACK" else Nack)(frame, ack_id, sub_id, tx)
        if command == "BEGIN":
            (tx,) = self._require(frame, events, "transaction")
            if tx in self.transactions:
                self._fail(f"transaction {tx!r} is already open", frame, events)
            self.transactions[tx] = None
            return Begin(frame, tx)
        if command in ("COMMIT", "ABORT"):
            tx = self._known_tx(frame, events, required=True) or ""
            del self.transactions[tx]
            return (Commit if command == "COMMIT" else Abort)(frame, tx)
        if command == "DISCONNECT":
            self.state = State.DISCONNECTING if get("receipt") is not None else State.CLOSED
            return Disconnect(frame)
        self._fail(f"a client must not send {command} (state {self.state.value})", frame, events)

    def _unchecked(self, frame: Any) -> Event:
        """The event of a client frame, looked up but not checked (``bookkeeping=False``)."""
        command, get = frame.command, frame.get
        if command == "SEND":
            return Send(frame, get("destination") or "", get("transaction"))
        if command == "SUBSCRIBE":
            return Subscribe(frame, get("id") or "", get("destination") or "", get("ack", "auto"))
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

    def _known_tx(self, frame: Any, events: List[Event], required: bool = False) -> Optional[str]:
        tx = frame.get("transaction")
        if tx is None and required:
            self._fail(f"{frame.command} frame without a 'transaction' header", frame, events)
        if tx is not None and tx not in self.transactions:
            self._fail(f"unknown transaction {tx!r}", frame, events)
        return None if tx is None else str(tx)

    # ------------------------------------------------------------------ sending

    def message(
        self,
        subscription: str,
        body: Union[bytes, str] = b"",
        headers: Headers = None,
        *,
        destination: Optional[str] = None,
        message_id: Optional[str] = None,
        content_type: Optional[str] = None,
    ) -> bytes:
        """MESSAGE for ``subscription`` (its destination unless given; a fresh message-id unless given).

        Messages of ``client`` and ``client-individual`` subscriptions wait in :attr:`unacked`
        for the client's ACK or NACK.
        """
        if not self._answering() or subscription not in self.subscriptions:
            raise misuse(f"no subscription {subscription!r} to deliver to", "MESSAGE", ("subscription", subscription))
        sub_destination, mode = self.subscriptions[subscription]
        message_id = message_id or self.new_id("m-")
        if isinstance(body, str):
            body = body.encode("utf-8")
            content_type = content_type or "text/plain;charset=utf-8"
        pairs = [
            ("destination", destination or sub_destination), ("message-id", message_id), ("subscription", subscription),
        ]  # fmt: skip
        if mode != "auto" and self.version == "1.2":
            pairs.append(("ack", message_id))
        if content_type is not None:
            pairs.append(("content-type", content_type))
        pairs += header_list(headers)
        data = self._build("MESSAGE", pairs, bytes(body), state=None, broken_ok=True)[1]
        if mode != "auto":
            self.unacked[message_id] = (subscription, message_id)
        return data

    def receipt(self, receipt_id: str) -> bytes:
        """RECEIPT for a frame the client sent with ``receipt:<receipt_id>``."""
        if self._told:  # (any state else: the frames of one read are answered after a DISCONNECT among them)
            raise misuse("cannot send RECEIPT after ERROR", "RECEIPT", ("receipt-id", receipt_id))
        if receipt_id not in self.pending_receipts and self.bookkeeping:
            raise misuse(f"no pending receipt {receipt_id!r}", "RECEIPT", ("receipt-id", receipt_id))
        data = self._build("RECEIPT", [("receipt-id", receipt_id)], state=None, broken_ok=True)[1]
        if self.pending_receipts.pop(receipt_id, None) == "DISCONNECT":
            self.state = State.CLOSED
        return data

    def frame(self, frame: Any) -> bytes:
        """Any frame (a :class:`fastframe.Frame`), encoded in the negotiated version and validated as
        the other sending methods do; nothing is tracked (for ``bookkeeping=False`` brokers)."""
        if not self._answering():
            raise LocalProtocolError(f"cannot send {frame.command} in state {self.state.value}", frame)
        return self._build(frame.command, list(frame.headers), bytes(frame.body), state=None, broken_ok=True)[1]

    def error(
        self, message: str, *, body: Union[bytes, str] = b"", headers: Headers = None, receipt_id: Optional[str] = None
    ) -> bytes:
        """ERROR with a short ``message`` header (the spec says close the connection after it).

        Also after the client broke the protocol (a :class:`RemoteProtocolError`), to tell it why.
        """
        if self.state is State.CONNECTING:
            return self.reject(message, body=body, headers=headers)
        data = self._error_frame(message, body, headers, receipt_id, version=None, state=None, broken_ok=True)
        if receipt_id is not None:
            self.pending_receipts.pop(receipt_id, None)
        self.state = State.CLOSED
        self._told = True
        return data

    def _error_frame(
        self, message: str, body: Union[bytes, str], headers: Headers, receipt_id: Optional[str], *,
        version: Optional[str], state: Optional[State], broken_ok: bool = False,
    ) -> bytes:  # fmt: skip
        pairs = [("message", message)]
        if receipt_id is not None:
            pairs.append(("receipt-id", receipt_id))
        if isinstance(body, str):
            body = body.encode("utf-8")
            pairs.append(("content-type", "text/plain;charset=utf-8"))
        pairs += header_list(headers)
        return self._build("ERROR", pairs, bytes(body), state=state, version=version, broken_ok=broken_ok)[1]
