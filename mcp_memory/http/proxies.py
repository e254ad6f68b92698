"""Which address a request comes from: the connected peer, or — only when that peer is one of the
configured `[http] trusted_proxies` — the client that `X-Forwarded-For` names.

Anyone can send `X-Forwarded-For`, so it is read only from a proxy the operator listed (addresses or
CIDR networks; none by default: the header is then ignored, loopback included). The header is read
from the right: each proxy appends the address it received the request from, so the rightmost
address that is not itself a trusted proxy is the client; what lies to the left of it was written by
the client and is not believed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOPS = 32  # addresses read from one header, so a huge header costs nothing


def parse_networks(values: Iterable[object], *, what: str = "http.trusted_proxies") -> tuple[Network, ...]:
    """`["10.0.0.5", "192.168.0.0/16", "::1"]` → networks; ValueError naming `what` and the bad entry."""
    networks = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{what} must list addresses or CIDR networks as strings, got {value!r}")
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{what}: {value!r} is not an IP address or CIDR network (e.g. 10.0.0.0/8)") from None
    return tuple(networks)


class TrustedProxies:
    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self.networks = tuple(networks)

    def trusts(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip.version == net.version and ip in net for net in self.networks)

    def client(self, peer: str, forwarded_for: str | None) -> str:
        """The client address of a request from `peer` carrying this X-Forwarded-For value (or None)."""
        if not forwarded_for or not self.trusts(peer):
            return peer
        hops = [h.strip() for h in forwarded_for.split(",")[-MAX_HOPS:]]
        for hop in reversed(hops):
            if not _is_address(hop):
                return peer  # a proxy we trust would not write this: the header is not believed
            if not self.trusts(hop):
                return str(ipaddress.ip_address(hop))
        return str(ipaddress.ip_address(hops[0]))  # every hop is a trusted proxy: the first one it names


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
