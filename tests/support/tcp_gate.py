"""A TCP forwarder on 127.0.0.1 that a test can close and open again: a database that goes down
and comes back, as its clients see it (connections cut, new ones refused by being closed at once)."""

from __future__ import annotations

import asyncio
import contextlib


class TcpGate:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.up = True
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        """Down: every open connection cut, every new one closed on arrival."""
        self.up = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def open(self) -> None:
        self.up = True

    async def stop(self) -> None:
        self.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.transport.abort()
            return
        try:
            target_reader, target_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, target_writer))
        try:
            await asyncio.gather(_pipe(reader, target_writer), _pipe(target_reader, writer))
        finally:
            for one in (writer, target_writer):
                self._writers.discard(one)
                one.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
