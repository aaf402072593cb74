"""Does the gateway holding a port answer? One small probe per kind of port, as a client would ask.

Each probe returns what answered and how fast ("answers ping and hello in 4 ms") or raises
`ProbeFailed` with the reason. Nothing is changed on the gateway: the WebSocket probe is a device
that says hello with no capabilities and leaves, the MQTT probe connects and disconnects.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import socket
import ssl
import time

from firmware_protocol import Error, Hello, Ping, Pong, ProtocolError, Welcome, decode, encode

TIMEOUT_S = 5.0
PROBE_DEVICE = "gateway-doctor"


class ProbeFailed(Exception):
    """The port is open but what holds it did not answer as the gateway does; str = the reason."""


def connect_host(host: str) -> str:
    """Where a client on this machine reaches a listener bound to `host`."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    return "::1" if host == "::" else host


def _ms(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:.0f} ms"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _hello(url: str) -> str:
    from gateway.links.device_side import open_device  # the links own the WebSocket client

    start = time.perf_counter()
    conn = await open_device("ws", url, PROBE_DEVICE)
    async with conn:
        nonce = int.from_bytes(os.urandom(4), "big")
        await conn.send(encode(Ping(nonce=nonce)))
        pong = decode(await conn.recv())
        if not isinstance(pong, Pong) or pong.nonce != nonce:
            raise ProbeFailed(f"sent a ping, got {pong.NAME} instead of its pong")
        await conn.send(encode(Hello(device_id=PROBE_DEVICE, capabilities=0)))
        reply = decode(await conn.recv())
        took = _ms(start)  # the closing handshake is not part of the answer
    if isinstance(reply, Welcome):
        return f"answers ping and hello in {took} ({reply.server})"
    if isinstance(reply, Error) and reply.code == "auth-failed":  # enrolment is closed: it answered
        return f"answers ping in {took} (hello refused without a device token, as configured)"
    raise ProbeFailed(f"sent hello, got {reply.NAME}" + (f" {reply.code}: {reply.text}" if isinstance(reply, Error) else ""))


def websocket(host: str, port: int, path: str) -> str:
    """Ping and hello over the WebSocket link, as a device (firmware_protocol)."""
    url = f"ws://{_url_host(connect_host(host))}:{port}{path}"
    try:
        return asyncio.run(asyncio.wait_for(_hello(url), TIMEOUT_S))
    except ProbeFailed:
        raise
    except (TimeoutError, asyncio.TimeoutError):
        raise ProbeFailed(f"no answer from {url} within {TIMEOUT_S:.0f} s") from None
    except ProtocolError as exc:
        raise ProbeFailed(f"{url} sent a frame that is not our protocol ({exc})") from None
    except Exception as exc:  # the probe is a boundary: any client error is the finding
        raise ProbeFailed(f"{url}: {type(exc).__name__}: {exc}") from None


def http_page(host: str, port: int, tls: bool) -> str:
    """GET / of the screens server (its page); TLS without certificate checks (often self-signed)."""
    where = connect_host(host)
    start = time.perf_counter()
    if tls:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            where, port, timeout=TIMEOUT_S, context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(where, port, timeout=TIMEOUT_S)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise ProbeFailed(f"GET / failed: {exc}") from None
    finally:
        conn.close()
    if response.status != 200:
        raise ProbeFailed(f"GET / answered {response.status} {response.reason}")
    return f"answers GET / in {_ms(start)}"


def _mqtt_connect_packet(client_id: str) -> bytes:
    """MQTT 3.1.1 CONNECT: clean session, keep-alive 10 s, no credentials."""
    cid = client_id.encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x0a" + len(cid).to_bytes(2, "big") + cid
    return bytes([0x10, len(body)]) + body


def mqtt(host: str, port: int) -> str:
    """An MQTT CONNECT to the embedded broker; any CONNACK (even 'not authorised') means it answers."""
    start = time.perf_counter()
    try:
        with socket.create_connection((connect_host(host), port), timeout=TIMEOUT_S) as s:
            s.sendall(_mqtt_connect_packet(PROBE_DEVICE))
            connack = s.recv(4)
            if len(connack) == 4 and connack[0] == 0x20:
                s.sendall(b"\xe0\x00")  # DISCONNECT
    except OSError as exc:
        raise ProbeFailed(f"MQTT CONNECT failed: {exc}") from None
    if len(connack) != 4 or connack[0] != 0x20:
        raise ProbeFailed(f"MQTT CONNECT got {connack!r} instead of a CONNACK")
    accepted = "accepted" if connack[3] == 0 else f"refused without credentials, code {connack[3]}"
    return f"answers MQTT CONNECT in {_ms(start)} ({accepted})"


def coap(host: str, port: int) -> str:
    """A CoAP ping (an empty confirmable message), which a CoAP server answers with a reset."""
    where = connect_host(host)
    message_id = os.urandom(2)
    start = time.perf_counter()
    family = socket.AF_INET6 if ":" in where else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.settimeout(TIMEOUT_S)
            s.sendto(b"\x40\x00" + message_id, (where, port))
            reply = s.recv(64)
    except OSError as exc:  # TimeoutError included
        raise ProbeFailed(f"CoAP ping got no answer: {exc or 'timed out'}") from None
    if len(reply) < 4 or reply[0] >> 4 != 0x7 or reply[2:4] != message_id:
        raise ProbeFailed(f"CoAP ping got {reply[:8]!r} instead of a reset")
    return f"answers a CoAP ping in {_ms(start)}"
