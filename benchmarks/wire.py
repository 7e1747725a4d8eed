"""A counting proxy between a client and Postgres: what a call costs on the wire.

`WireCounter(dsn)` listens on a Unix socket of its own and forwards every byte, untouched, to the
server `dsn` names (a Unix socket directory or a TCP host). It reads the client's side of the
protocol as it passes: every message is one type byte and a length, so it counts the messages by
type without decoding anything in them (no statement text or parameter is read, stored or shown).
Two counts follow from those:

- round trips: `Sync` (the end of one extended-protocol exchange) plus `Query` (a simple-protocol
  statement); the client waits for the server after each, so each is one network round trip;
- statements: `Execute` plus `Query`.

It also counts the connections opened through it (startup packets). `proxied(dsn)` is the same
DSN pointed at the proxy. It serves the benchmarks and the tests that count what a verb sends;
TLS cannot be read, so the proxied DSN asks for none.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator

from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = ["WireCounter"]

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102


class WireCounter:
    """A transparent proxy to the server of `dsn` that counts the client's messages by type."""

    def __init__(self, dsn: str):
        params = conninfo_to_dict(dsn)
        host = str(params.get("host") or "/tmp")
        self._port = int(params.get("port") or 5432)
        first = host.split(",")[0]
        if first.startswith("/"):
            self._upstream: tuple | str = os.path.join(first, f".s.PGSQL.{self._port}")
        else:
            self._upstream = (first, self._port)
        self._dir = tempfile.mkdtemp(prefix="pymem-wire-")
        self._path = os.path.join(self._dir, f".s.PGSQL.{self._port}")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self._path)
        self._listener.listen(64)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="pymem-wire", daemon=True)
        self._thread.start()

    # -- what a caller uses ----------------------------------------------------------------------

    def proxied(self, dsn: str) -> str:
        """`dsn` pointed at this proxy (same login, database and options; no TLS, no GSS)."""
        params = conninfo_to_dict(dsn)
        params.update(host=self._dir, port=str(self._port), sslmode="disable", gssencmode="disable")
        params.pop("hostaddr", None)
        return make_conninfo("", **params)

    def counts(self) -> dict[str, int]:
        """Messages by type so far, plus `round_trips`, `statements` and `connections`."""
        with self._lock:
            counts = dict(self._counts)
        out = {"round_trips": counts.get("S", 0) + counts.get("Q", 0),
               "statements": counts.get("E", 0) + counts.get("Q", 0),
               "connections": counts.get("startup", 0)}
        out.update({f"message_{k}": v for k, v in counts.items() if k != "startup"})
        return out

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def close(self) -> None:
        self._closed = True
        try:
            self._listener.close()
        finally:
            with self._lock:
                open_sockets, self._sockets = list(self._sockets), set()
            for sock in open_sockets:
                _close(sock)
            with contextlib.suppress(OSError):
                os.unlink(self._path)
            with contextlib.suppress(OSError):
                os.rmdir(self._dir)

    def __enter__(self) -> WireCounter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the proxy -------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                family = socket.AF_UNIX if isinstance(self._upstream, str) else socket.AF_INET
                server = socket.socket(family, socket.SOCK_STREAM)
                server.connect(self._upstream)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets.update((client, server))
            threading.Thread(target=self._client_side, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _client_side(self, client: socket.socket, server: socket.socket) -> None:
        """Forward the client's bytes, counting its messages as whole frames pass."""
        buffer = bytearray()
        started = False
        try:
            self._relay(client, server, buffer, started)
        except OSError:
            pass
        finally:
            self._forget(client, server)

    def _relay(self, client: socket.socket, server: socket.socket, buffer: bytearray, started: bool) -> None:
        if True:
            for chunk in _chunks(client):
                server.sendall(chunk)
                buffer += chunk
                while True:
                    if not started:
                        if len(buffer) < 8:
                            break
                        length, code = struct.unpack("!ii", buffer[:8])
                        if len(buffer) < length:
                            break
                        del buffer[:length]
                        if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                            continue  # the server answers one byte; the real startup follows
                        if code != _CANCEL_REQUEST:
                            self._count("startup")
                        started = True
                        continue
                    if len(buffer) < 5:
                        break
                    length = struct.unpack("!i", buffer[1:5])[0]
                    if len(buffer) < 1 + length:
                        break
                    self._count(chr(buffer[0]))
                    del buffer[:1 + length]

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            for chunk in _chunks(source):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            self._forget(source, target)

    def _count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def _forget(self, *sockets: socket.socket) -> None:
        with self._lock:
            for sock in sockets:
                self._sockets.discard(sock)
        for sock in sockets:
            _close(sock)


def _chunks(sock: socket.socket) -> Iterator[bytes]:
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        yield data


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
