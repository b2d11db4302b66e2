"""The LLM gateway's URL with its host name resolved to an address, for the pods the
controllers make: stage and rollout pods get no DNS (queries are a way out), so they are
handed the Service's IP. Resolved once per host and process."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

_resolved: dict[str, str] = {}


def by_address(url: str) -> str:
    """``url`` with its host replaced by the host's address (unchanged if it has none or
    already is one). A name that does not resolve raises: kopf retries the reconcile."""
    host = urlsplit(url).hostname or ""
    if not host or _is_address(host):
        return url
    if host not in _resolved:
        _resolved[host] = socket.gethostbyname(host)
    return url.replace(host, _resolved[host], 1)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


__all__ = ["by_address"]
