"""A TCP relay from the node address to a loopback service (the S3 server).

Every test-bed server listens on 127.0.0.1 only, which pods cannot reach: their packets
arrive on the bridge. The relay listens on the node address, which only this machine and its
pods can reach, and the node's firewall admits pods to this port alone (node/host.py). It stands
where a Service for the object store would be in a real cluster.

Run as `python -m coworkgym_testbed.relay LISTEN_HOST:PORT TARGET_HOST:PORT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def serve(listen: tuple[str, int], target: tuple[str, int]) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))

    server = await asyncio.start_server(handle, *listen)
    async with server:
        await server.serve_forever()


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


if __name__ == "__main__":
    asyncio.run(serve(_addr(sys.argv[1]), _addr(sys.argv[2])))
