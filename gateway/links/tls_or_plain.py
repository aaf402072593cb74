"""https and http on one port: each connection's first byte says which it speaks.

A TLS connection starts with a handshake record (byte 0x16); an HTTP request with a letter. The
screen server listens once and serves both: a browser on another machine gets https (which it
needs for the microphone), this machine and the LAN screens that speak plain ws keep working.

`TlsOrPlain` is a websockets `create_connection` hook: websockets makes its connection object
as usual, and asyncio hands the accepted socket first to a `_Sniffer`, which waits (at most
`SNIFF_TIMEOUT_S`) for the first byte without reading it (MSG_PEEK on a duplicate of the
socket), lets go of the accepting transport, and starts the real connection on the duplicate
with `loop.connect_accepted_socket`, with TLS or without. Only public asyncio calls; the
websockets connection sees an ordinary (TLS or plain) transport.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection

log = logging.getLogger(__name__)

SNIFF_TIMEOUT_S = 10.0  # a client that sends nothing this long is closed
TLS_HANDSHAKE = 0x16


def is_secure(connection: ServerConnection) -> bool:
    """Did this connection come in over TLS?"""
    transport = connection.transport
    return transport is not None and transport.get_extra_info("ssl_object") is not None


class TlsOrPlain:
    """The `create_connection` of a websockets server that takes https and http on its port.
    `make` makes the websockets connection (ServerConnection or a subclass); the sniffing tasks
    are owned here and ended by `close`."""

    def __init__(self, context: ssl.SSLContext, make: Callable[..., ServerConnection] = ServerConnection) -> None:
        self._context = context
        self._make = make
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, *args: Any, **kwargs: Any) -> asyncio.Protocol:
        return _Sniffer(self, self._make(*args, **kwargs))

    def start(self, raw: asyncio.Transport, connection: ServerConnection) -> None:
        sock = raw.get_extra_info("socket").dup()  # the same connection; the transport's fd goes
        raw.abort()  # closes only the transport's own descriptor: the duplicate keeps the connection
        task = asyncio.get_running_loop().create_task(self._sniff(sock, connection))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sniff(self, sock: socket.socket, connection: ServerConnection) -> None:
        loop = asyncio.get_running_loop()
        peer, first = "%s:%s" % tuple(sock.getpeername()[:2]), b""
        try:
            readable = loop.create_future()
            loop.add_reader(sock.fileno(), lambda: readable.done() or readable.set_result(None))
            try:
                async with asyncio.timeout(SNIFF_TIMEOUT_S):
                    await readable
            finally:
                loop.remove_reader(sock.fileno())
            first = sock.recv(1, socket.MSG_PEEK)
            if not first:
                sock.close()
                return
            tls = self._context if first[0] == TLS_HANDSHAKE else None
            await loop.connect_accepted_socket(lambda: connection, sock, ssl=tls,
                                               ssl_handshake_timeout=SNIFF_TIMEOUT_S if tls else None)
        except TimeoutError:
            log.info("http %s: nothing sent within %.0f s; closed", peer, SNIFF_TIMEOUT_S)
            sock.close()
        except (OSError, ssl.SSLError) as exc:  # a refused certificate, a reset: that connection only
            log.info("http %s: %s handshake failed: %s", peer, "TLS" if first[:1] == b"\x16" else "connection", exc)
            sock.close()
        except asyncio.CancelledError:  # the server is stopping: the connection goes with it
            sock.close()
            raise

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class _Sniffer(asyncio.Protocol):
    """What asyncio's accepting transport talks to: it hands the socket over at once."""

    def __init__(self, owner: TlsOrPlain, connection: ServerConnection) -> None:
        self._owner = owner
        self._connection = connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._owner.start(transport, self._connection)  # type: ignore[arg-type]

    def connection_lost(self, exc: Exception | None) -> None:
        pass  # the accepting transport only; the connection itself lives on in its duplicate

    def data_received(self, data: bytes) -> None:  # never: the transport is aborted before reading
        pass
