"""paho-mqtt 2.x driven by the asyncio event loop: no `loop_start()` thread, no locks.

paho's socket is watched with the loop's reader callback (`_read`: every packet the socket holds,
not paho's one per call when nothing of ours is in flight); what paho has to send is
written at the end of the loop pass that queued it (`loop_write`; the writer callback only when
the socket did not take it all), and a small task runs `loop_misc` (keep-alive pings, retries)
once a second. So paho's callbacks run on the event loop thread, in order, and can touch asyncio objects directly. Only paho's
`connect` (name lookup + TCP connect, up to paho's 5 s connect timeout when the broker is
unreachable) runs on a worker thread; the socket callbacks it makes there are handed to the
loop. Used by the gateway's MQTT link and by MQTT devices (the simulator, tests).
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import logging
import socket
import termios
import threading
from collections.abc import Callable
from dataclasses import dataclass

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


log = logging.getLogger(__name__)

SESSION_EXPIRY_S = 24 * 3600  # MQTT 5: how long the broker keeps a persistent session
READS_PER_PASS = 64  # paho reads per wake-up at most: a busy connection leaves the loop to the others


class MqttConnectError(Exception):
    """The broker refused or could not be reached; str() says why."""


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = True


OnMessage = Callable[[paho.MQTTMessage], None]


class AsyncPaho:
    def __init__(
        self,
        client_id: str,
        on_message: OnMessage,
        *,
        protocol: str = "3.1.1",
        username: str | None = None,
        password: str | None = None,
        persistent: bool = True,
        will: Will | None = None,
        on_connect: Callable[[], None] | None = None,
        max_queued: int = 1000,
        resend_on_reconnect: bool = True,
    ) -> None:
        """`resend_on_reconnect` False: QoS 1 publishes not acknowledged (or queued) when the
        connection was lost are dropped, not sent on the next connection (cluster mode: a downlink
        may leave only under the lease it was checked against, not seconds later)."""
        self._loop = asyncio.get_running_loop()
        self._v5 = protocol == "5"
        kwargs = {} if self._v5 else {"clean_session": not persistent}
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=paho.MQTTv5 if self._v5 else paho.MQTTv311,
            **kwargs,
        )
        self.persistent = persistent
        self._resend = resend_on_reconnect
        self.client.max_queued_messages_set(max_queued)  # QoS 1 messages kept while offline (bounded)
        if username:
            self.client.username_pw_set(username, password)
        if will is not None:
            self.client.will_set(will.topic, will.payload, will.qos, will.retain)
        self._on_user_connect = on_connect
        self.client.on_message = lambda c, u, msg: on_message(msg)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_socket_open = self._on_socket_open
        self.client.on_socket_close = self._on_socket_close
        self.client.on_socket_register_write = lambda c, u, sock: self._on_loop(self._write_soon, c, sock)
        self.client.on_socket_unregister_write = lambda c, u, sock: self._on_loop(self._unwatch_write)
        self._loop_thread = threading.get_ident()
        self._write_scheduled = False
        self._writer_fd: int | None = None  # watched for writability: a write the socket did not take whole
        self._corked: socket.socket | None = None  # a TCP socket: corked while a pass's packets are written
        self._unread = array.array("i", [0])  # FIONREAD's answer: bytes waiting in the socket
        self._connack: asyncio.Future[str | None] | None = None
        self.disconnected = asyncio.Event()
        self._misc: asyncio.Task[None] | None = None

    # -- paho callbacks (on the loop thread; the socket ones also from `connect`'s worker) --------

    def _on_loop(self, fn: Callable[..., object], *args: object) -> None:
        if threading.get_ident() == self._loop_thread:
            fn(*args)
        else:
            self._loop.call_soon_threadsafe(fn, *args)

    def _write_soon(self, client: paho.Client, sock: socket.socket) -> None:
        """paho has packets to send: written at the end of this loop pass, all the pass's publishes
        and acks in one go, without registering the socket for writability each time; only what
        the socket did not take waits for it to be writable."""
        if not self._write_scheduled:
            self._write_scheduled = True
            self._loop.call_soon(self._write_now, client, sock)

    def _write_now(self, client: paho.Client, sock: socket.socket) -> None:
        self._write_scheduled = False
        if client.socket() is not sock:  # closed meanwhile
            return
        if self._corked is sock:  # the pass's packets leave in one segment, not one each
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            try:
                client.loop_write()
            finally:
                if client.socket() is sock:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        else:
            client.loop_write()
        if client.want_write() and client.socket() is sock and self._writer_fd is None:
            self._writer_fd = sock.fileno()
            self._loop.add_writer(self._writer_fd, client.loop_write)

    def _unwatch_write(self) -> None:
        if self._writer_fd is not None:
            self._loop.remove_writer(self._writer_fd)
            self._writer_fd = None

    def _on_socket_open(self, client: paho.Client, userdata: object, sock: socket.socket) -> None:
        try:  # paho leaves Nagle on: each small publish then waits for the previous one's TCP ack,
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # ~5x fewer messages/s
            self._corked = sock if hasattr(socket, "TCP_CORK") else None  # Linux: see _write_now
        except (AttributeError, OSError):  # not a TCP socket (a unix socket, paho's WebSocket wrapper)
            self._corked = None
        self._on_loop(self._watch, client, sock)

    def _watch(self, client: paho.Client, sock: socket.socket) -> None:
        self._loop.add_reader(sock, self._read, client, sock)
        self._misc = self._loop.create_task(self._misc_loop())

    def _read(self, client: paho.Client, sock: socket.socket) -> None:
        """Read every packet the socket holds (up to READS_PER_PASS calls). paho's `loop_read`
        reads as many packets as it has QoS 1/2 publishes of its own in flight, so a client that
        mostly receives (the gateway's) read one publish per wake-up: a device's burst of readings
        took one loop pass each, with a PUBACK write each, instead of one pass for the burst."""
        unread = self._unread
        for _ in range(READS_PER_PASS):
            if client.loop_read() != paho.MQTT_ERR_SUCCESS or client.socket() is not sock:
                return  # connection lost: paho has closed the socket (`_unwatch`)
            try:
                fcntl.ioctl(sock, termios.FIONREAD, unread)
            except OSError:
                return
            if not unread[0]:
                return

    def _on_socket_close(self, client: paho.Client, userdata: object, sock: socket.socket) -> None:
        self._on_loop(self._unwatch, sock.fileno())  # the number: the socket is closed right after

    def _unwatch(self, fd: int) -> None:
        if fd >= 0:
            self._loop.remove_reader(fd)
            self._loop.remove_writer(fd)
        self._writer_fd = None
        if self._misc is not None:
            self._misc.cancel()

    def _on_connect(self, client: paho.Client, userdata: object, flags: object, reason: object, props: object) -> None:
        failed = getattr(reason, "is_failure", False)
        if self._connack is not None and not self._connack.done():
            self._connack.set_result(str(reason) if failed else None)
        if not failed and self._on_user_connect is not None:
            self._on_user_connect()

    def _on_disconnect(self, client: paho.Client, userdata: object, flags: object, reason: object, props: object) -> None:
        if self._connack is not None and not self._connack.done():
            self._connack.set_result(f"disconnected: {reason}")
        self.disconnected.set()

    async def _misc_loop(self) -> None:
        while self.client.loop_misc() == paho.MQTT_ERR_SUCCESS:
            await asyncio.sleep(1)  # paho's timer tick: keep-alive pings and QoS retries

    # -- API ----------------------------------------------------------------------------------------

    async def connect(self, host: str, port: int, keepalive: int = 30, timeout: float = 10) -> None:
        """Connect and wait for the CONNACK; raises MqttConnectError."""
        self.disconnected.clear()
        self._connack = self._loop.create_future()
        if not self._resend:  # paho has no public call for it: its queue of unsent/unacked publishes
            with self.client._out_message_mutex:
                self.client._out_messages.clear()
        kwargs: dict[str, object] = {}
        if self._v5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = SESSION_EXPIRY_S if self.persistent else 0
            kwargs = {"clean_start": not self.persistent, "properties": props}
        try:  # on a worker: an unreachable broker holds it for paho's connect timeout (5 s)
            await asyncio.to_thread(self.client.connect, host, port, keepalive, **kwargs)
        except OSError as exc:
            raise MqttConnectError(f"cannot reach {host}:{port}: {exc.strerror or exc}") from None
        try:
            async with asyncio.timeout(timeout):
                refused = await self._connack
        except TimeoutError:
            self.client.disconnect()
            raise MqttConnectError(f"no CONNACK from {host}:{port} within {timeout:.0f} s") from None
        if refused:
            self.client.disconnect()
            raise MqttConnectError(f"{host}:{port} refused the connection: {refused}")

    def subscribe(self, topic: str, qos: int = 1) -> None:
        self.client.subscribe(topic, qos)

    def publish(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False,
                properties: Properties | None = None) -> None:
        """`properties`: MQTT 5 publish properties (message expiry, user properties), else None."""
        self.client.publish(topic, payload, qos, retain, properties=properties)

    def unsubscribe(self, topic: str) -> None:
        self.client.unsubscribe(topic)

    def flush(self) -> None:
        """Write what is queued to the socket now, not at the loop's next turn (never call it from
        a paho callback). Cluster mode: a downlink leaves the process while its lease is checked."""
        self.client.loop_write()

    async def disconnect(self) -> None:
        if self.client.is_connected():
            self.client.disconnect()
            await asyncio.wait_for(self.disconnected.wait(), 5)
        if self._misc is not None:  # the timer task of the last socket: ended (cancelled) with it
            self._misc.cancel()
            await asyncio.wait([self._misc])
