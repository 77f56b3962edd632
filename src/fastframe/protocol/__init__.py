"""fastframe.protocol: STOMP connections without I/O (sans-I/O, in the manner of h11).

Bytes in, events out; calls in, bytes out. No sockets, clocks or threads: pass ``now`` (seconds
from any monotonic clock) where time matters. API summary::

    client = ClientConnection(strict=False, escapes=None, heartbeat_grace=2.0,
                              unknown_subscriptions="deliver"|"refuse", **decoder_limits)
    wire = client.connect("host", login=..., passcode=..., heartbeat=(cx, cy), versions=(...),
                          headers=None)   # more CONNECT headers (client-id ...)
    events = client.receive_data(data, now)   # [Connected, Message, Receipt, Error, HeartbeatReceived]
    client.send(destination, body, headers, content_type=, transaction=, receipt=,
                content_length=True) -> bytes   # False: no content-length (ActiveMQ TextMessage)
    client.subscribe(id, destination, ack="auto"|"client"|"client-individual", receipt=) -> bytes
    client.unsubscribe(id) / ack(message_or_kept_id, subscription=None) / nack(...) / begin(tx)
      / commit(tx) / abort(tx)
    client.disconnect(receipt="r-1") -> bytes; client.receive_eof() -> [ConnectionClosed]
    client.route(id, inbox) / route_columns(id, inbox) / unroute(id) / take_filled()
      # a subscription's MESSAGEs straight into an Inbox: as message objects, or as one
      # fastframe.Columns per read (no object per message); frames_of(columns) /
      # message_columns(messages) turn one into the other; message_class=SlotMaker(cls, slots,
      # fixed) (the codec's, re-exported) builds each routed message without a Python call
    server = ServerConnection(versions=("1.0", "1.1", "1.2"), heartbeat=(sx, sy), **same options)
    server.receive_data(data, now) -> [ConnectRequest, Send, Subscribe, Unsubscribe, Ack, Nack,
                                       Begin, Commit, Abort, Disconnect, HeartbeatReceived]
    server.receive_frames(data, now) -> [Frame, ...]   # the frames of those events, heart-beats dropped
    server.accept(headers={"server": ...}) -> CONNECTED bytes | server.reject(message) -> ERROR bytes
    server.message(sub_id, body, headers, destination=, message_id=, ack_id=) / receipt(receipt_id)
      / error(message, body=, headers=) -> bytes; plain_error(message, text) -> RabbitMQ's ERROR shape
    server.frame(fastframe.Frame) -> bytes             # any frame, in the negotiated version
    Both: state (State.IDLE/CONNECTING/CONNECTED/DISCONNECTING/CLOSED), version, heartbeat
      (send_ms, receive_ms), pending_receipts, new_id(prefix),
      heartbeat_due(now) -> b"\\n" or b"", peer_silent(now), next_deadline(), data_sent(now),
      keepalive(now), buffered (bytes of a frame under way), frames_end (stream offset past the last
      frame). Silence = nothing for heartbeat_grace x interval (+1 interval before the first data).
      get_buffer(sizehint) -> memoryview, then buffer_updated(nbytes, now) -> the events of
      receive_data() for the bytes written into it (asyncio.BufferedProtocol; after the handshake
      the buffer is the decoder's own, so nothing is copied on the way in).
    Client only: subscriptions, transactions, unacked (the session it asked for). On the server,
      subscriptions, acks, transactions and receipts other than DISCONNECT's are the application's
      (a broker's): client frames become events looked up, not judged; the handshake, negotiation,
      escaping, heart-beat timing, limits and the CONNECTED/MESSAGE/RECEIPT/ERROR shapes stay here.
    Every frame event has .frame (a fastframe.Frame). Our misuse raises LocalProtocolError (nothing
    changes); a peer's violation raises RemoteProtocolError (fatal; .events holds what came before;
    .offset is the stream offset of undecodable bytes; a server may still send its error());
    both are fastframe.FrameError and carry .frame.
    Inbound flow control as rules (used by both clients): Inbox(bound) (put(item, gate), take(),
      take_batch(n), settle_due, settle(), release(), restart(gate, keep)) and ReadPauses (why a
      connection does not read: soft and hard reasons, a receipt wait lifts the soft ones).
"""

from __future__ import annotations

from ..codec import SlotMaker
from ._client import ClientConnection
from ._columnar import frames_of, message_columns
from ._core import Headers, State, header_list
from ._errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from ._events import (
    Abort,
    Ack,
    Begin,
    Commit,
    Connected,
    ConnectionClosed,
    ConnectRequest,
    Disconnect,
    Error,
    Event,
    FrameEvent,
    HeartbeatReceived,
    Message,
    Nack,
    Receipt,
    Send,
    Subscribe,
    Unsubscribe,
)
from ._heartbeat import DEFAULT_GRACE, HeartbeatTimer
from ._inbox import Inbox, ReadGate, ReadPauses
from ._server import ServerConnection, plain_error

__all__ = [
    "DEFAULT_GRACE", "Abort", "Headers", "header_list", "Ack", "Begin", "ClientConnection", "Commit", "ConnectRequest", "Connected",
    "ConnectionClosed", "Disconnect", "Error", "Event", "FrameEvent", "HeartbeatReceived", "HeartbeatTimer",
    "Inbox", "LocalProtocolError", "Message", "Nack", "ProtocolError", "ReadGate", "ReadPauses", "Receipt", "RemoteProtocolError", "Send",
    "ServerConnection", "SlotMaker", "State", "Subscribe", "Unsubscribe", "frames_of", "message_columns", "plain_error",
]  # fmt: skip
