"""fastframe.capture: record live STOMP traffic into the archives the readers know, and replay it.

API summary::

    with Archive(out_dir, broker="rabbit-1", roll_size=64 << 20, roll_age=3600, compression=None) as archive:
        # in-process: the asyncio client's wire_hook (one recorder per connection)
        with archive.recorder() as rec:
            async with fastframe.aio.connect(host, port, wire_hook=rec) as client: ...
        # the in-memory broker: a recorder per connection
        async with fastframe.aio.Broker(port=0, wire_hook=archive.server_hook): ...
        # a recording proxy (what `fastframe record` runs)
        proxy = await serve_proxy(archive, "127.0.0.1", 61650, "127.0.0.1", 61613)  # coalesce=0.001
        ...; await proxy.close()
    result = await replay(["archive/rabbit-1/2026-11-26/conn-0003.c2s.stomp"], "127.0.0.1", 61613,
                          pace="recorded")   # result.answers: the frames the broker sent back
    read_times(path)  # [(offset, unix_ns), ...] from the arrival-time sidecar

The layout (as ``fastframe sample-archive`` writes it, and ``fastframe convert`` / Spark's ``stomp``
format read it)::

    OUT/BROKER/YYYY-MM-DD/conn-0003.c2s.stomp[.gz|.zst]        what the client sent, byte for byte
    OUT/BROKER/YYYY-MM-DD/conn-0003.s2c.stomp[.gz|.zst]        what the server sent
    OUT/BROKER/YYYY-MM-DD/conn-0003.c2s_0002.stomp[.gz|.zst]   the next piece, after a roll
    ....stomp[...].ffidx     proven frame boundaries (fastframe.spark.write_index's format), at each roll
    ....stomp[...].fftimes   arrival time of every frame (format: fastframe.archive)

(``compression="zstd"`` needs the ``zstd`` extra before Python 3.14.)

Recording never alters nor stops traffic. Bytes are recorded as they are, but for credentials: the
value of CONNECT's ``passcode`` (and ``login`` with ``Archive(redact=("passcode", "login"))``) is
replaced by ``<redacted>`` before anything is written (``redact=()`` keeps them; ``replay(...,
credentials={...})`` fills them back in). A malformed stream is recorded as it is too (its pieces
then end where the reader's error row will show it), pieces are cut only at frame
boundaries a :class:`fastframe.ColumnDecoder` proved, the disk is written by one thread per archive, and a
full or slow disk drops the recording of that connection (logged on ``fastframe.capture``), never
the connection. Memory per connection: the decoder's partial frame (its limits) and at most
``max_pending`` bytes waiting for the disk. The proxy is asyncio and the standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..archive import read_times
from ._recorder import Archive, Recorder

if TYPE_CHECKING:
    from ._proxy import Proxy, serve_proxy
    from ._replay import ReplayResult, pieces_of, replay


def __getattr__(name: str) -> Any:
    # asyncio loads when the proxy or replay is used, not for a recorder
    if name in ("Proxy", "serve_proxy"):
        from . import _proxy

        return getattr(_proxy, name)
    if name in ("ReplayResult", "replay", "pieces_of"):
        from . import _replay

        return getattr(_replay, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Archive", "Proxy", "Recorder", "ReplayResult", "pieces_of", "read_times", "replay", "serve_proxy"]
