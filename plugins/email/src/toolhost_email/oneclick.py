"""The RFC 8058 one-click request, sent to an address that was checked, and only to it.

The destination's name is resolved once here; every address it resolves to must be a public
one (loopback, private, link-local, shared, reserved and multicast are refused) unless the
operator's test setting allows them. The request then connects to one of exactly those checked
addresses, with the name kept for TLS (SNI and certificate check) and the Host header, so a
second resolution (DNS rebinding) cannot send it anywhere else.

The request is a constant: ``POST`` with ``Content-Type: application/x-www-form-urlencoded``
and the body ``List-Unsubscribe=One-Click``; no cookies (a fresh client per request), no
credentials, no redirect followed, bounded in time, and the response body is never read.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from typing import Final, Literal

import httpx

from toolhost_email.census import ONE_CLICK
from toolhost_email.special_addresses import GLOBAL_UNICAST_V6, SPECIAL_V4, SPECIAL_V6

__all__ = ["BODY", "SendOutcome", "is_public", "send_one_click"]

BODY: Final = ONE_CLICK.encode()
SendOutcome = Literal["requested", "rejected", "unreachable", "refused_destination"]
ClientFactory = Callable[[float], httpx.AsyncClient]


#: IPv6 prefixes that carry an IPv4 address in their last 32 bits, which a NAT64 gateway or
#: translator reaches (RFC 6052's well-known prefix, RFC 4291's IPv4-compatible and RFC 2765's
#: IPv4-translated forms): the embedded address is the one that must be public.
_EMBEDDING = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("::/96"),
              ipaddress.IPv6Network("::ffff:0:0/96"), ipaddress.IPv6Network("::ffff:0:0:0/96"))
#: Never public whatever they embed: RFC 8215's local-use NAT64 prefix (the embedding
#: position depends on the operator's prefix length) and the deprecated site-local fec0::/10.
_REFUSED = (ipaddress.IPv6Network("64:ff9b:1::/48"), ipaddress.IPv6Network("fec0::/10"))


def is_public(address: str) -> bool:
    """True for an address in no IANA special-purpose block (``special_addresses``, data
    kept here, not the running Python's ``is_global``); IPv6 must also be global unicast
    (2000::/3). IPv6 forms embedding IPv4 (mapped, compatible, translated, NAT64, 6to4) are
    judged by the IPv4 address they embed."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in net for net in _REFUSED):
            return False
        embedded = ip.sixtofour
        if embedded is None and any(ip in net for net in _EMBEDDING):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return _public_v4(embedded)
        return ip in GLOBAL_UNICAST_V6 and not any(ip in net for net in SPECIAL_V6)
    return _public_v4(ip)


def _public_v4(ip: ipaddress.IPv4Address) -> bool:
    return not any(ip in net for net in SPECIAL_V4)


async def _resolve(host: str, port: int) -> list[str]:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [host]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in seen:
            seen.append(address)
    return seen


async def send_one_click(destination: str, client_for: ClientFactory, *, seconds: float,
                         allow_private: bool) -> SendOutcome:
    """The outcome of one request, within ``seconds`` overall: resolution and every address
    tried share one deadline, so a name with many addresses cannot stretch it."""
    try:
        async with asyncio.timeout(seconds):
            return await _send(destination, client_for, seconds, allow_private)
    except TimeoutError:
        return "unreachable"


async def _send(destination: str, client_for: ClientFactory, seconds: float,
                allow_private: bool) -> SendOutcome:
    try:
        url = httpx.URL(destination)
        host = url.raw_host.decode("ascii")  # IDNA-encoded: what DNS, SNI and Host carry
    except (httpx.InvalidURL, UnicodeError):
        return "unreachable"  # the census refuses these; a cache edited since is no request
    port = url.port or 443
    try:
        addresses = await _resolve(host, port)
    except (OSError, UnicodeError):
        return "unreachable"
    if not addresses:
        return "unreachable"
    if not allow_private and not all(is_public(a) for a in addresses):
        return "refused_destination"
    literal = f"[{host}]" if ":" in host else host
    host_header = literal if url.port is None else f"{literal}:{url.port}"
    for address in addresses:
        try:
            pinned = url.copy_with(host=address)
            async with client_for(seconds) as client:
                request = client.build_request(
                    "POST", pinned, content=BODY,
                    headers={"Host": host_header,
                             "Content-Type": "application/x-www-form-urlencoded"},
                    extensions={"sni_hostname": host},
                )
                response = await client.send(request, stream=True)
                await response.aclose()  # the body is never read
        except httpx.ConnectError:
            continue  # nothing was sent over this address: try the next checked one
        except (httpx.HTTPError, httpx.InvalidURL, OSError):
            return "unreachable"
        return "requested" if 200 <= response.status_code < 300 else "rejected"
    return "unreachable"
