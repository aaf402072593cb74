"""Starting the MQTT link's embedded brokers, with the log line that says what to change when
one cannot start.

- mosquitto (gateway/links/mosquitto.py) for the gateway's own topics, its device logins from
  the registry; the link then logs in to it with the gateway's own login.
- a small amqtt broker (gateway/links/mqtt_broker.py) for the extensions (the xiaozhi boxes'
  MQTT+UDP), whose clients need the broker to subscribe them, which mosquitto cannot do.

Each broker is stopped by the exit stack it is started in.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gateway.links.base import LinkServices
from gateway.links.mosquitto import MosquittoBroker, MosquittoMissing
from gateway.links.mqtt_broker import EmbeddedBroker
from gateway.links.mqtt_extension import MqttExtension

log = logging.getLogger("gateway.links.mqtt")  # the link's log lines, as before the split

PACKET_OVERHEAD = 1024  # mosquitto's max_packet_size counts the header and topic beside the payload


async def start_mosquitto(folder: Path | None, host: str, port: int, prefix: str, max_frame_bytes: int,
                          services: LinkServices, stack: contextlib.AsyncExitStack) -> MosquittoBroker:
    """The embedded mosquitto on host:port with its files in `folder` (None: a temporary one)."""
    if folder is None:  # served on its own (tests, benchmarks): a folder of its own
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gateway-mosquitto-")))
    open_enrolment = services.enrolment.open_enrolment if services.enrolment is not None else True
    broker = MosquittoBroker(folder, host, port, prefix, max_frame_bytes + PACKET_OVERHEAD,
                             services.broker_logins, open_enrolment)
    try:
        await broker.start()
    except MosquittoMissing as exc:
        log.error("mqtt: %s (or set mqtt.host to an external broker, or mqtt.enabled: false)", exc)
        raise
    except OSError as exc:  # the gateway's start-up names the port, its key and its holder
        log.error("mqtt: the embedded broker cannot listen on %s:%d (%s); change mqtt.port or set "
                  "mqtt.host to an external broker", host, port, exc.strerror or exc)
        raise
    stack.push_async_callback(broker.stop)
    return broker


async def start_extension_broker(host: str, port: int, prefix: str, extensions: Sequence[MqttExtension],
                                 services: LinkServices, stack: contextlib.AsyncExitStack) -> EmbeddedBroker:
    """The extensions' own amqtt broker on host:port, its logins checked by `services.check_credentials`."""
    broker = EmbeddedBroker(host, port, prefix, services.check_credentials, extensions, own_topics=False)
    try:
        await broker.start()
    except OSError as exc:
        log.error("mqtt: the extensions' broker (xiaozhi MQTT+UDP) cannot listen on %s:%d (%s); change "
                  "xiaozhi.mqtt_port", host, port, exc.strerror or exc)
        raise
    stack.push_async_callback(broker.stop)
    return broker
