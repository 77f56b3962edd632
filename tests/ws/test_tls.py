"""STOMP over WebSocket over TLS (wss://) through the caller's SSLContext: the broker serves it with ``ssl=``."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from fastframe import aio


def contexts(certificate: Any) -> Any:
    key, cert = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    return server_ctx, ssl.create_default_context(cafile=str(cert))


def test_wss_round_trip(run: Any, certificate: Any) -> None:
    server_ctx, client_ctx = contexts(certificate)

    async def main() -> None:
        async with aio.Broker(port=0, ws_port=0, ssl=server_ctx) as broker:
            url = f"wss://127.0.0.1:{broker.ws_port}/ws"
            async with aio.connect(url, ssl=client_ctx) as client:
                sub = await client.subscribe("/queue/tls")
                await client.send("/queue/tls", b"secret\0bytes", receipt=True)
                assert (await sub.get(timeout=5)).body == b"secret\0bytes"
                assert client.session.transport.get_extra_info("ssl_object") is not None

    run(main())


def test_wss_refuses_an_untrusted_certificate_and_ssl_with_ws_is_a_mistake(run: Any, certificate: Any) -> None:
    server_ctx, client_ctx = contexts(certificate)

    async def main() -> None:
        async with aio.Broker(port=0, ws_port=0, ssl=server_ctx) as broker:
            with pytest.raises(aio.ConnectionClosedError) as info:
                await aio.connect(f"wss://127.0.0.1:{broker.ws_port}/ws", connect_timeout=5)  # the system's CAs
            assert isinstance(info.value.__cause__, ssl.SSLError)
            with pytest.raises(ValueError, match="wss://"):
                await aio.connect(f"ws://127.0.0.1:{broker.ws_port}/ws", ssl=client_ctx)

    run(main())
