"""Network helpers shared by the server and the stores."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; any other name or address is public."""
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
