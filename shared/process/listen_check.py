"""Whether the listen address is free: `serve --check` (supervisor/cli/preflight.py), and
`hookline serve` before it starts several ingest processes on one port (supervisor/serve.py)."""

from __future__ import annotations

import socket

from hookline.shared.config_checks import listen_host_port


def unbindable(listen: str) -> str | None:
    """Why `listen` (HOST:PORT) cannot be bound, as a single ingest binds it (SO_REUSEADDR,
    no SO_REUSEPORT: a port another process listens on, in any way, is refused), or None."""
    host, port = listen_host_port(listen)
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"cannot resolve {host!r} ({exc})"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                return (f"{exc.strerror or exc} (another process holds it, or the address "
                        "is not on this host)")
    return None
