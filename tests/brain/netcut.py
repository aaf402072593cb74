"""A TCP proxy on 127.0.0.1 in front of a local server, that a test can cut like a pulled cable.

`blackhole()`: from now on every byte in either direction is dropped; connections stay open (no
FIN, no RST: the peers only see silence) and new connections are accepted but never answered.
`reset()`: every open connection is aborted (the client sees a connection error at once).
`heal()`: traffic flows again for new connections.
"""

from __future__ import annotations

import asyncio


class CuttableProxy:
    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._dark = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def blackhole(self) -> None:
        self._dark = True

    def heal(self) -> None:
        self._dark = False

    def reset(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        if self._dark:
            await self._pipe(reader, None)  # swallow the request, never answer
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        self._writers.add(up_writer)
        both = [asyncio.create_task(self._pipe(reader, up_writer)), asyncio.create_task(self._pipe(up_reader, writer))]
        self._tasks.update(both)
        try:
            await asyncio.gather(*both, return_exceptions=True)
        finally:
            self._tasks.difference_update(both)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter | None) -> None:
        try:
            while data := await src.read(65536):
                if self._dark or dst is None:
                    continue  # a pulled cable: the bytes go nowhere, nobody is told
                dst.write(data)
                await dst.drain()
        except ConnectionError:
            pass
        if dst is not None and not self._dark:
            dst.close()  # the other side ended normally: pass the end on
