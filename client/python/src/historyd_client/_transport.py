"""Telling a TLS/plaintext mismatch from other failures to connect.

A client speaking TLS to a server in plaintext, or plaintext to one speaking
TLS, fails in gRPC's words for whatever broke first: ``WRONG_VERSION_NUMBER``
from the TLS library, or ``Socket closed`` when the TLS server hangs up on
the plaintext preface. Neither says what to change. So when a call fails to
connect at all, the target is asked directly, once, by a TLS handshake that
verifies nothing and is closed without a request: a TLS server answers in
TLS, a plaintext one answers with bytes that are not TLS. When that contradicts
the client's setting, the call's error says in one line which the server
speaks and which argument to change, with the code UNAVAILABLE, as the Go
and TypeScript clients do.

Only a target that names one TCP address is asked (``host:port``,
``dns:///host:port``, ``ipv4:``/``ipv6:`` addresses); a Unix socket or a
name resolved by a resolver of the host's own is left as gRPC reported it.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl

import grpc

#: How long the probe may take: a failed call waits for it.
PROBE_TIMEOUT = 2.0

#: What gRPC core says of a call whose connection could not be set up.
_CONNECT_FAILED = "failed to connect to all addresses"

#: The TLS library's reasons for a reply that is not a TLS record.
_NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LENGTH_MISMATCH", "HTTP_REQUEST"})

PLAINTEXT = "plaintext"
TLS = "tls"


def mismatch(target: str, code: grpc.StatusCode, details: str, *, plaintext: bool) -> str | None:
    """What a call that failed with ``code`` and ``details`` says instead, when the
    server at ``target`` speaks the other of TLS and plaintext; else ``None``."""
    if code != grpc.StatusCode.UNAVAILABLE or _CONNECT_FAILED not in details:
        return None
    address = host_port(target)
    if address is None:
        return None
    speaks = probe(*address)
    if speaks == PLAINTEXT and not plaintext:
        return f"historyd at {target} speaks plaintext, not TLS: pass plaintext=True"
    if speaks == TLS and plaintext:
        return (
            f"historyd at {target} speaks TLS, not plaintext: drop plaintext=True "
            "(credentials=grpc.ssl_channel_credentials(...) for a private CA)"
        )
    return None


def host_port(target: str) -> tuple[str, int] | None:
    """The one TCP address a gRPC target names, or ``None``."""
    rest = target
    for scheme in ("dns:///", "ipv4:", "ipv6:"):
        if rest.startswith(scheme):
            rest = rest[len(scheme) :].split(",")[0]
            break
    else:
        if rest.startswith("dns://"):
            rest = rest[len("dns://") :].partition("/")[2]
        elif rest.startswith("dns:"):
            rest = rest[len("dns:") :]
    if "/" in rest or rest.count(":") > 1 and not rest.startswith("["):
        return None  # another scheme (unix:, vsock:, a resolver's), or a bare IPv6 address
    if rest.startswith("["):
        host, bracket, port = rest[1:].partition("]")
        if not bracket:
            return None
        port = port[1:] if port.startswith(":") else ""
    else:
        host, _, port = rest.partition(":")
    if not host:
        return None
    if not port:
        return host, 443  # gRPC's default port
    try:
        n = int(port)
    except ValueError:
        return None
    return (host, n) if 0 < n < 65536 else None


def probe(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Whether the server at ``host:port`` speaks TLS or plaintext; ``None`` when it cannot be told."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # what is asked is the protocol, not who
    context.set_alpn_protocols(["h2"])
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None
    with raw:
        try:
            with context.wrap_socket(raw, server_hostname=None if _is_ip(host) else host):
                return TLS
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError):
            return None  # hung up: says nothing either way
        except ssl.SSLError as exc:
            reason = exc.reason or ""
            if reason in _NOT_TLS:
                return PLAINTEXT
            # An alert (a TLS server refusing this handshake) is TLS speaking.
            return TLS if "ALERT" in reason else None
        except OSError:
            return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
