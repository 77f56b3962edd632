"""TLS through the caller's SSLContext, with a self-signed certificate made by the openssl CLI."""

from __future__ import annotations

import ssl

import pytest

from fastframe import aio

from .fake_server import FakeServer


def test_tls_round_trip(run, certificate):
    key, cert = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    client_ctx = ssl.create_default_context(cafile=str(cert))

    async def main():
        async with FakeServer(ssl_context=server_ctx) as server:
            async with aio.connect("127.0.0.1", server.port, ssl=client_ctx) as client:
                sub = await client.subscribe("/q")
                await client.send("/q", b"secret\0bytes", receipt=True)
                assert (await sub.get(timeout=5)).body == b"secret\0bytes"
                assert client.session.transport.get_extra_info("ssl_object") is not None

    run(main())


def test_tls_refuses_an_untrusted_certificate(run, certificate):
    key, cert = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))

    async def main():
        async with FakeServer(ssl_context=server_ctx) as server:
            with pytest.raises(aio.ConnectionClosedError) as info:
                await aio.connect("127.0.0.1", server.port, ssl=ssl.create_default_context(), connect_timeout=5)
            assert isinstance(info.value.__cause__, ssl.SSLError)

    run(main())
