"""A device session: the hello handshake, then dispatching the device's messages.

Whatever the transport, a connection goes through `serve_device`. Bad frames are answered with
an `Error` message and a log line naming the peer and the reason; the session keeps going. A
peer that sends nothing but garbage is disconnected after `MAX_CONSECUTIVE_ERRORS`.

A failure of the gateway itself while serving a session (a database error, a bug) ends that
session alone: it is logged with its traceback, the device is sent an Error (`storage-failed` when
the database failed, else `internal-error`) and the connection is closed; the link and every other
device go on (the links run their sessions in their own TaskGroup, which one failure would end).

In cluster mode a WebSocket or CoAP session takes its device's lease once the Hello is
authenticated, before the Welcome, and speaks only under it (gateway/devices/session_lease.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from functools import partial

from firmware_protocol import (
    Capability,
    Abort,
    AudioChunk,
    AudioStart,
    AudioStop,
    Error,
    ExpressionSetup,
    Hello,
    Message,
    Ping,
    Pong,
    ProtocolError,
    ReadingAck,
    ReadingStatus,
    SensorReading,
    TextInput,
    Welcome,
)
from gateway import __version__
from gateway.bus import EventBus
from gateway.config import GatewayConfig
from gateway.devices.audio_codec import CodecConnection, plan_audio
from gateway.devices.auth import Authenticator, AuthRefused
from gateway.devices.reading_acks import ReadingAcks
from gateway.devices.reading_store import StorageFailed
from gateway.devices.readings import ReadingService
from gateway.devices.registry import SessionRegistry
from gateway.devices.session_lease import DeviceLeases, LeasedConnection
from gateway.engines.runner import EngineRunner
from gateway.expression.service import ExpressionService
from gateway.links.base import DeviceConnection, LinkClosed, ManyInFlight, Roaming
from gateway.links.limits import LogThrottle
from gateway.log_safe import log_safe
from gateway.brain.contract import Brain
from gateway.voice.conversation import Conversation
from gateway.voice.events import BargedIn, Sink, TurnEvent, TurnEvents
from gateway.voice.wire import to_device

log = logging.getLogger(__name__)

MAX_CONSECUTIVE_ERRORS = 20


@dataclass(frozen=True)
class SessionServices:
    """What a device session needs, handed in by the composition root (gateway/app.py)."""

    cfg: GatewayConfig
    runner: EngineRunner
    brain: Brain
    registry: SessionRegistry
    bus: EventBus | None = None  # where the turn events go beyond the device (screens, bench metrics)
    auth: Authenticator | None = None  # None: every device is let in (tests of the voice loop)
    readings: ReadingService | None = None  # None: SensorReading is refused with storage-failed
    expression: ExpressionService | None = None  # None: no expression packets (visemes, action...)
    # cluster mode: the node; a WebSocket / CoAP session holds its device's lease (session_lease.py)
    leases: DeviceLeases | None = None


class _Peer:
    """Sends to one connection and counts consecutive errors."""

    def __init__(self, conn: DeviceConnection) -> None:
        self.conn = conn
        self.name = conn.peer
        self.errors = 0
        self.reports = LogThrottle(log)  # the device's own Error reports: a line per 10 s at most

    async def send(self, message: Message) -> None:
        await self.conn.send(message)

    async def reject(self, code: str, text: str) -> None:
        self.errors += 1
        log.warning("%s: %s: %s", self.name, code, text)
        await self.conn.send(Error(code=code, text=text))
        if self.errors >= MAX_CONSECUTIVE_ERRORS:
            await self.conn.send(Error(code="too-many-errors", text="closing after repeated bad frames"))
            raise LinkClosed(f"{MAX_CONSECUTIVE_ERRORS} consecutive errors")


async def _await_hello(peer: _Peer, timeout: float) -> Hello:
    async with asyncio.timeout(timeout):
        while True:
            msg = await peer.conn.receive()
            if isinstance(msg, ProtocolError):
                await peer.reject(msg.code, msg.text)
            elif isinstance(msg, Hello):
                return msg
            elif isinstance(msg, Ping):
                await peer.send(Pong(nonce=msg.nonce))
            else:
                await peer.reject("hello-required", f"send hello first (got {msg.NAME})")


async def serve_device(conn: DeviceConnection, services: SessionServices) -> None:
    """Run one device connection to its end. Never raises for device misbehaviour."""
    peer = _Peer(conn)
    cfg = services.cfg
    conversation: Conversation | None = None
    try:
        try:
            hello = await _await_hello(peer, cfg.server.hello_timeout_s)
        except TimeoutError:
            log.warning("%s: hello-timeout: no hello within %.0f s", peer.name, cfg.server.hello_timeout_s)
            await conn.send(Error(code="hello-timeout", text="no hello received in time"))
            return
        peer.errors = 0
        peer.name = f"{conn.peer} ({hello.device_id})"
        if services.auth is not None:
            try:
                await services.auth.check(hello, peer.name)
            except AuthRefused as exc:
                log.warning("%s: %s: %s", peer.name, exc.code, exc)
                await conn.send(Error(code=exc.code, text=str(exc)))
                return
        if services.leases is not None and isinstance(conn, Roaming):  # the box chose this gateway
            leased = await LeasedConnection.take(conn, services.leases, hello.device_id, peer.name)
            if leased is None:
                text = "this gateway cannot take the device's lease now (PostgreSQL did not answer); say Hello later"
                log.warning("%s: storage-failed: %s", peer.name, text)
                await conn.send(Error(code="storage-failed", text=text))
                return
            conn = peer.conn = leased  # from here on every downlink checks the lease
        plan = plan_audio(hello, cfg.audio.default_sample_rate)  # PCM, or Opus either way (audio_codec.py)
        if plan.problem:
            await peer.reject("unsupported-audio-format", plan.problem)
        audio_in, audio_out = plan.pcm_in, plan.pcm_out
        peer.conn = CodecConnection.wrap(conn, plan)  # the conversation hears and speaks PCM
        vad = await services.runner.clone_vad()  # off the event loop: other devices stay served
        mode = cfg.listen.mode_for(hello.device_id, wakes_itself=bool(hello.capabilities & Capability.WAKE_WORD))
        wake = await services.runner.wake_detector() if mode in ("wake", "follow-up") else None
        session_id = uuid.uuid4().hex[:12]
        await conn.send(Welcome(session_id=session_id, audio_out=plan.wire_out, server=f"edge-voice-gateway/{__version__}"))
        # The session id is the CoAP session token: the log shows only its first characters.
        log.info("%s: hello, session %s..., mic %d Hz, speaker %d Hz", peer.name, session_id[:4], audio_in.sample_rate, audio_out.sample_rate)
        conversation = Conversation(
            hello.device_id,
            conn.peer,
            cfg,
            services.runner,
            services.brain.session(hello.device_id),  # this connection's turn state with the brain
            peer.send,
            audio_in,
            audio_out,
            _turn_events(services, hello.device_id, peer, bool(hello.capabilities & Capability.LISTEN)),
            on_sentence=services.expression.hook_for(hello.device_id, hello.capabilities) if services.expression else None,
            vad=vad,
            wake=wake,
            mode=mode,
        )
        # readings stored side by side, acked in order, where the device keeps several in flight
        acks = ReadingAcks(peer.send) if isinstance(conn, ManyInFlight) else None
        try:
            async with services.registry.register(hello.device_id, conn, conversation, hello.capabilities, hello):
                await _dispatch(peer, conversation, services, hello.device_id, acks)
        finally:
            if acks is not None:
                await acks.close()
    except LinkClosed as exc:
        log.info("%s: disconnected (%s)", peer.name, exc)
    except Exception as exc:  # session boundary: this session ends, the link and other devices go on
        await _failed(conn, peer.name, exc)
    finally:
        if conversation is not None:
            await conversation.close()
        try:
            await conn.close()
        except Exception:  # the socket may already be gone; nothing else to do
            pass


async def _failed(conn: DeviceConnection, name: str, exc: Exception) -> None:
    """The gateway failed serving this session: logged, and the device told so (if it still hears)."""
    if isinstance(exc, StorageFailed):
        code, text = "storage-failed", f"the gateway's database failed ({exc}); say Hello again later"
    else:
        code, text = "internal-error", "the gateway failed serving this session (see its log); say Hello again"
    log.exception("%s: %s: session ended by an unexpected error", name, code)
    try:
        await conn.send(Error(code=code, text=text))
    except Exception as send_exc:  # the link may be gone too: the log line above is what is left
        log.info("%s: could not send %s: %s", name, code, send_exc)


def _turn_events(services: SessionServices, device_id: str, peer: _Peer, listen_state: bool) -> TurnEvents:
    """The session's turn events: to the device first, then the expression (a barge-in that cut an
    audio stream stops the device's servo timeline), then on the bus."""
    sinks: list[Sink] = [to_device(peer.send, listen_state)]  # ListenState only to a device with LISTEN
    if (expression := services.expression) is not None:
        async def stop_servos(event: TurnEvent) -> None:
            if isinstance(event, BargedIn) and event.stream_id is not None:
                expression.reply_aborted(device_id)

        sinks.append(stop_servos)
    return TurnEvents(sinks, services.bus)


def _reading_ack(services: SessionServices, device_id: str, peer_name: str, msg: SensorReading
                 ) -> asyncio.Future[ReadingAck]:
    """The future of the reading's ack (ReadingService.start: no task per reading)."""
    if services.readings is None:
        refused: asyncio.Future[ReadingAck] = asyncio.get_running_loop().create_future()
        refused.set_result(ReadingAck(msg.seq, ReadingStatus.REJECTED, "storage-failed", "this gateway stores no readings"))
        return refused
    return services.readings.start(device_id, peer_name, msg)


async def _dispatch(peer: _Peer, conv: Conversation, services: SessionServices, device_id: str,
                    acks: ReadingAcks | None) -> None:
    while True:
        msg = await peer.conn.receive()
        if isinstance(msg, ProtocolError):
            await peer.reject(msg.code, msg.text)
            continue
        peer.errors = 0
        if isinstance(msg, AudioChunk):
            await conv.on_audio(msg.data)
        elif isinstance(msg, AudioStart):
            if msg.format.codec != "pcm_s16le":
                await peer.reject("unsupported-audio-format", f"codec {msg.format.codec} is not supported yet")
            else:
                conv.on_audio_start()
        elif isinstance(msg, AudioStop):
            await conv.on_audio_stop()
        elif isinstance(msg, TextInput):
            await conv.on_text(msg.text)
        elif isinstance(msg, SensorReading):
            if acks is None:  # one at a time: the answer to this message is sent before the next is read
                await peer.send(await _reading_ack(services, device_id, peer.name, msg))
            else:
                await acks.submit(partial(_reading_ack, services, device_id, peer.name, msg))
        elif isinstance(msg, ExpressionSetup):
            if services.expression is not None:
                services.expression.configure(device_id, msg)
        elif isinstance(msg, Abort):
            await conv.interrupt(f"device abort: {msg.reason or 'no reason given'}")
        elif isinstance(msg, Ping):
            await peer.send(Pong(nonce=msg.nonce))
        elif isinstance(msg, (Pong, Error)):
            if isinstance(msg, Error):
                peer.reports.warning("report", "%s: device reported %s: %s", peer.name, log_safe(msg.code),
                                     log_safe(msg.text))
        else:
            await peer.reject("bad-sequence", f"{msg.NAME} is not expected from a device here")
