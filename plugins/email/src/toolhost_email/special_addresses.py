"""The IANA special-purpose address registries, kept here as data: what a one-click request
may never be sent to, whatever the running Python's ``ipaddress`` thinks is global.

``ipaddress.is_global`` changes with Python versions and lags the registries: 3.11 calls
192.0.0.8 (RFC 7600's dummy address) and the rest of 192.0.0.0/24, 3fff::/20 (RFC 9637's
documentation prefix) and 5f00::/16 (RFC 9602's SRv6 SIDs) global, and the request connected
to 192.0.0.8. Every block below is refused whole, including the few the registries mark
globally reachable (anycast for PCP, TURN, AS112, AMT): no unsubscribe server lives there.

Sources: IANA IPv4 and IPv6 Special-Purpose Address Registries (as of 2026-01), plus
multicast and the IPv4 broadcast address. An IPv6 address must also lie in 2000::/3, the
only global unicast space allocated.
"""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["GLOBAL_UNICAST_V6", "SPECIAL_V4", "SPECIAL_V6"]

SPECIAL_V4: Final = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8",          # "this network" (RFC 791)
    "10.0.0.0/8",         # private-use (RFC 1918)
    "100.64.0.0/10",      # shared address space (RFC 6598)
    "127.0.0.0/8",        # loopback (RFC 1122)
    "169.254.0.0/16",     # link-local (RFC 3927): cloud metadata lives here
    "172.16.0.0/12",      # private-use (RFC 1918)
    "192.0.0.0/24",       # IETF protocol assignments (RFC 6890): 192.0.0.8, .9, .10, .170...
    "192.0.2.0/24",       # documentation, TEST-NET-1 (RFC 5737)
    "192.31.196.0/24",    # AS112-v4 (RFC 7535)
    "192.52.193.0/24",    # AMT (RFC 7450)
    "192.88.99.0/24",     # deprecated 6to4 relay anycast (RFC 7526)
    "192.168.0.0/16",     # private-use (RFC 1918)
    "192.175.48.0/24",    # direct delegation AS112 service (RFC 7534)
    "198.18.0.0/15",      # benchmarking (RFC 2544)
    "198.51.100.0/24",    # documentation, TEST-NET-2 (RFC 5737)
    "203.0.113.0/24",     # documentation, TEST-NET-3 (RFC 5737)
    "224.0.0.0/4",        # multicast (RFC 5771)
    "240.0.0.0/4",        # reserved (RFC 1112), and 255.255.255.255, limited broadcast
))

SPECIAL_V6: Final = tuple(ipaddress.IPv6Network(n) for n in (
    "::/128",             # unspecified
    "::1/128",            # loopback
    "::ffff:0:0/96",      # IPv4-mapped (judged by the IPv4 address, before this list)
    "64:ff9b::/96",       # IPv4/IPv6 translation (RFC 6052; judged by the IPv4 address)
    "64:ff9b:1::/48",     # local-use IPv4/IPv6 translation (RFC 8215)
    "100::/64",           # discard-only (RFC 6666)
    "100:0:0:1::/64",     # dummy IPv6 prefix (RFC 9780)
    "2001::/23",          # IETF protocol assignments: TEREDO, benchmarking, ORCHID, DRIP...
    "2001:db8::/32",      # documentation (RFC 3849)
    "2002::/16",          # 6to4 (RFC 3056; judged by the IPv4 address, before this list)
    "2620:4f:8000::/48",  # direct delegation AS112 service (RFC 7534)
    "3fff::/20",          # documentation (RFC 9637)
    "5f00::/16",          # segment routing SIDs (RFC 9602)
    "fc00::/7",           # unique local (RFC 4193)
    "fe80::/10",          # link-local
    "fec0::/10",          # site-local, deprecated (RFC 3879)
    "ff00::/8",           # multicast
))

GLOBAL_UNICAST_V6: Final = ipaddress.IPv6Network("2000::/3")
