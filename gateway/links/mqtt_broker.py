"""A small in-process MQTT broker (amqtt, pure-Python asyncio, MQTT 3.1.1) with per-device auth + ACL.

Not the gateway's embedded broker (that is mosquitto, gateway/links/mosquitto.py): this one serves
only the MQTT link's extensions (the xiaozhi boxes' MQTT+UDP) on a port of their own, because it
can subscribe a login to topics when it connects, which mosquitto cannot (`own_topics=False`:
the gateway's `P/<id>/...` topics are refused here). Known weakness (docs/XIAOZHI.md): amqtt
handles a CONNECT's client id before it checks the login, so a CONNECT reusing a box's client id
drops that box's session even with a wrong password; the gateway's own client id here is random
per start, so its session cannot be targeted. Devices log in with username = device id and password = the device's token
(`gateway devices add`); the gateway itself logs in with a random secret made at start-up. A
device may only publish `P/<its id>/up|status` and subscribe `P/<its id>/down`. With open
enrolment an unregistered device (or an anonymous client) is let in, still confined to its own
prefix when it gives a username. Extensions (gateway/links/mqtt_extension.py) add their own
topic rules, and topics the broker subscribes a login to when it connects (xiaozhi boxes never
subscribe: the broker pushes their downlink), and learn when a login leaves.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from amqtt.broker import Broker
from amqtt.errors import BrokerError
from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session

from gateway.links.base import CredentialCheck
from gateway.links.mqtt_extension import MqttExtension

log = logging.getLogger(__name__)


class DeviceAuthPlugin(BaseAuthPlugin):
    @dataclass
    class Config:
        check: Any = None  # a CredentialCheck, handed in by EmbeddedBroker

    async def authenticate(self, *, session: Session) -> bool | None:
        ok = await self.context.config.check(session.username, session.password)
        if not ok:
            log.warning("mqtt broker: auth-failed: client %s (user %s) refused", session.client_id, session.username)
        return ok


class DeviceTopicPlugin(BaseTopicPlugin):
    @dataclass
    class Config:
        prefix: str = "gw"
        gateway_user: str = ""
        own_topics: bool = True  # False: only the extensions' topics
        extensions: Any = ()  # MqttExtensions, handed in by EmbeddedBroker

    async def topic_filtering(
        self, *, session: Session | None = None, topic: str | None = None, action: Action | None = None
    ) -> bool | None:
        cfg = self.context.config
        user = session.username if session is not None else None
        if user == cfg.gateway_user:
            return True
        if topic is None:
            return False
        for extension in cfg.extensions:
            verdict = extension.allows(user, topic, action == Action.PUBLISH)
            if verdict is not None:
                if not verdict:
                    log.warning("mqtt broker: client %s (user %s) may not %s %s", getattr(session, "client_id", "?"),
                                user, action, topic)
                return verdict
        parts = topic.split("/")
        if not cfg.own_topics or len(parts) != 3 or parts[0] != cfg.prefix or (user is not None and parts[1] != user):
            allowed = False
        elif action == Action.PUBLISH:
            allowed = parts[2] in ("up", "status")
        else:  # SUBSCRIBE / RECEIVE
            allowed = parts[2] == "down"
        if not allowed:
            log.warning("mqtt broker: client %s (user %s) may not %s %s", getattr(session, "client_id", "?"), user, action, topic)
        return allowed

    async def on_broker_client_connected(self, *, client_id: str, client_session: Session) -> None:
        for extension in self.context.config.extensions:
            for topic in extension.pushed_topics(client_session.username):
                await self.context.add_subscription(client_id, topic, 0)

    async def on_broker_client_disconnected(self, *, client_id: str, client_session: Session) -> None:
        for extension in self.context.config.extensions:
            extension.client_left(client_session.username)


class EmbeddedBroker:
    def __init__(self, host: str, port: int, prefix: str, device_check: CredentialCheck,
                 extensions: Sequence[MqttExtension] = (), own_topics: bool = True) -> None:
        self.host, self.port = host, port
        self.gateway_user = f"edge-gateway-{secrets.token_hex(8)}"  # also its client id: not guessable
        self.gateway_password = secrets.token_urlsafe(24)
        self._device_check = device_check
        self._broker = Broker(
            {
                "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
                "plugins": {
                    f"{__name__}.DeviceAuthPlugin": {"check": self._check},
                    f"{__name__}.DeviceTopicPlugin": {"prefix": prefix, "gateway_user": self.gateway_user,
                                                      "extensions": tuple(extensions), "own_topics": own_topics},
                },
            }
        )

    async def _check(self, username: str | None, password: str | None) -> bool:
        if username == self.gateway_user:
            return hmac.compare_digest(password or "", self.gateway_password)
        return await self._device_check(username, password)

    async def start(self) -> None:
        """Listen; raises OSError when the port cannot be bound (amqtt's own traceback muted)."""
        amqtt_log = logging.getLogger("amqtt.broker")
        mute = _StartupFailure()
        amqtt_log.addFilter(mute)
        try:
            await self._broker.start()
        except BrokerError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, OSError):
                raise cause from None
            raise
        finally:
            amqtt_log.removeFilter(mute)
        server = self._broker._servers["default"]  # the bound port, when port 0 was asked for
        self.port = server.instance.sockets[0].getsockname()[1]
        log.info("mqtt broker (embedded) listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        await self._broker.shutdown()


class _StartupFailure(logging.Filter):
    """Drops amqtt's "Broker startup failed" traceback: the error is raised and reported once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Broker startup failed")
