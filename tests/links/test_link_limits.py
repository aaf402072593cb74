"""The configurable queue limits of the MQTT and CoAP links (bounded, with counted drops)."""

from __future__ import annotations

from firmware_protocol import Ping, Pong
from gateway.config import parse_config
from gateway.links.coap import CoapDeviceConnection, CoapLink
from gateway.links.mqtt import MqttDeviceConnection, MqttLink


async def test_an_mqtt_device_inbox_holds_the_configured_number_of_messages_then_drops_and_counts():
    link = MqttLink("127.0.0.1", 0, inbox_messages=8)
    conn = MqttDeviceConnection(link, "box-1")
    for n in range(12):
        conn.deliver(Ping(nonce=n))
    assert conn.dropped == 4
    assert [(await conn.receive()).nonce for _ in range(8)] == list(range(8))  # oldest kept, in order


async def test_a_coap_outbox_nobody_fetches_stops_growing_at_the_configured_size():
    conn = CoapDeviceConnection("box-2", "127.0.0.1:5683", outbox_bytes=4096)
    while conn.dropped == 0:
        await conn.send(Pong(nonce=1))
    kept = len(conn.outbox)
    await conn.send(Pong(nonce=2))
    assert len(conn.outbox) == kept and conn.dropped == 2
    assert 4096 <= kept < 4096 + 64  # at most one frame past the limit


def test_the_limits_come_from_the_config():
    cfg = parse_config({"mqtt": {"inbox_messages": 16, "offline_queue": 5}, "coap": {"outbox_bytes": 8192}})
    from gateway.app import default_links

    links = {link.name: link for link in default_links(cfg)}
    assert links["mqtt"].inbox_messages == 16 and links["mqtt"].offline_queue == 5
    assert isinstance(links["coap"], CoapLink) and links["coap"].outbox_bytes == 8192


def _publish(topic: str, payload: bytes, qos: int, dup: bool):
    import paho.mqtt.client as paho

    msg = paho.MQTTMessage(mid=1, topic=topic.encode())
    msg.payload, msg.qos, msg.dup = payload, qos, dup
    return msg


async def test_a_qos1_redelivery_of_a_processed_publish_is_dropped_but_a_new_identical_one_is_not():
    from firmware_protocol import TextInput, encode

    link = MqttLink("127.0.0.1", 0)
    conn = link.connections["box-3"] = MqttDeviceConnection(link, "box-3")
    payload = encode(TextInput(text="turn on the light"))
    link._on_message(_publish("gw/box-3/up", payload, qos=1, dup=False))
    link._on_message(_publish("gw/box-3/up", payload, qos=1, dup=True))  # broker missed our PUBACK
    link._on_message(_publish("gw/box-3/up", payload, qos=1, dup=False))  # the user said it again
    got = [await conn.receive(), await conn.receive()]
    assert got == [TextInput(text="turn on the light")] * 2
    assert conn._inbox == type(conn._inbox)()  # nothing else queued: the DUP copy was dropped
    assert link._redeliveries.dropped == 1


def test_qos0_publishes_are_never_treated_as_redeliveries():
    from gateway.links.mqtt_dedup import RedeliveryFilter

    f = RedeliveryFilter(size=2)
    assert not f.is_redelivery("t", b"x", qos=0, dup=True)
    assert not f.is_redelivery("t", b"x", qos=0, dup=True)
    assert not f.is_redelivery("t", b"a", qos=1, dup=False)
    assert not f.is_redelivery("t", b"b", qos=1, dup=False)
    assert not f.is_redelivery("t", b"c", qos=1, dup=False)
    assert not f.is_redelivery("t", b"a", qos=1, dup=True)  # forgotten: only the last 2 are kept
