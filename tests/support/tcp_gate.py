"""A TCP forwarder on 127.0.0.1 that a test can close and open again: a database that goes down
and comes back, as its clients see it (connections cut, new ones refused by being closed at once).
It also counts the round trips a PostgreSQL client asks for (`PgRoundTrips`)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable


class TcpGate:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.up = True
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        #: what the clients sent, read as PostgreSQL's protocol
        self.round_trips = PgRoundTrips()

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
            await asyncio.gather(_pipe(reader, target_writer, self.round_trips.parser()),
                                 _pipe(target_reader, writer))
        finally:
            for one in (writer, target_writer):
                self._writers.discard(one)
                one.transport.abort()


class PgRoundTrips:
    """PostgreSQL's frontend protocol as clients send it: each Sync ('S', the end of an extended
    query) and each simple Query ('Q') is one round trip the client waits on."""

    def __init__(self) -> None:
        self.count = 0

    def parser(self) -> Callable[[bytes], None]:
        buffer = bytearray()
        started = False  # the startup packets (SSLRequest, StartupMessage) have no type byte

        def feed(data: bytes) -> None:
            nonlocal started
            buffer.extend(data)
            while True:
                if not started:
                    if len(buffer) < 8:
                        return
                    length, code = struct.unpack("!ii", buffer[:8])
                    if len(buffer) < length:
                        return
                    del buffer[:length]
                    started = code == 196608  # protocol 3.0's StartupMessage (not an SSL or GSS request)
                    continue
                if len(buffer) < 5:
                    return
                kind, length = buffer[0:1], struct.unpack("!i", buffer[1:5])[0]
                if len(buffer) < 1 + length:
                    return
                del buffer[:1 + length]
                if kind in (b"S", b"Q"):
                    self.count += 1

        return feed


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                seen: Callable[[bytes], None] | None = None) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            if seen is not None:
                seen(data)
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
