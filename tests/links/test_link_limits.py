"""The configurable queue limits of the MQTT and CoAP links (bounded, with counted drops)."""

from __future__ import annotations

from firmware_protocol import Ping, Pong
from gateway.config import parse_config
from gateway.links.coap import CoapDeviceConnection, CoapLink
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_connection import MqttDeviceConnection


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
    from gateway.app_links import default_links

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


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_session_slots_are_counted_per_address_and_in_total_and_given_back():
    from gateway.links.limits import PeerLimits

    limits = PeerLimits(max_sessions=3, max_sessions_per_peer=2)
    assert limits.admit("10.0.0.1") is None and limits.admit("10.0.0.1") is None
    assert "max_sessions_per_peer" in limits.admit("10.0.0.1")
    assert limits.admit("10.0.0.2") is None
    assert "(server.max_sessions)" in limits.admit("10.0.0.3")  # full for everyone
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.3") is None and limits.sessions == 3


def test_failed_logins_lock_the_address_out_doubling_up_to_the_maximum_then_are_forgiven():
    from gateway.links.limits import PeerLimits

    clock = Clock()
    limits = PeerLimits(login_backoff_s=1.0, login_backoff_max_s=8.0, clock=clock)
    assert limits.login_wait("10.0.0.1") == 0
    assert [limits.login_failed("10.0.0.1") for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert limits.login_wait("10.0.0.1") == 8.0 and limits.login_wait("10.0.0.2") == 0  # others unaffected
    clock.now += 8.5
    assert limits.login_wait("10.0.0.1") == 0  # may try again: a failure now locks it out 8 s
    assert limits.login_failed("10.0.0.1") == 8.0
    clock.now += 8.0 + 8.0  # its lock-out, then quiet for login_backoff_max_s: forgiven
    assert limits.login_wait("10.0.0.1") == 0
    assert limits.login_failed("10.0.0.1") == 1.0


def test_the_per_address_reading_bucket_refills_over_a_minute():
    from gateway.links.limits import PeerLimits

    clock = Clock()
    limits = PeerLimits(readings_per_minute_per_peer=6, clock=clock)
    assert [limits.take_reading("10.0.0.1") for _ in range(7)] == [True] * 6 + [False]
    assert limits.take_reading("10.0.0.2")
    clock.now += 10  # one token per 10 s
    assert limits.take_reading("10.0.0.1") and not limits.take_reading("10.0.0.1")
    assert all(PeerLimits(readings_per_minute_per_peer=0).take_reading("x") for _ in range(1000))  # 0: no limit


def test_a_repeated_log_line_is_written_once_per_interval_and_then_counts_the_rest(caplog):
    import logging

    from gateway.links.limits import LogThrottle

    clock = Clock()
    throttle = LogThrottle(logging.getLogger("test.throttle"), 10.0, clock)
    with caplog.at_level(logging.WARNING, logger="test.throttle"):
        assert throttle.warning("k", "refused %s", "a")
        assert not any(throttle.warning("k", "refused %s", "a") for _ in range(99))
        assert throttle.warning("other", "refused %s", "b")  # another key has its own interval
        clock.now += 10
        assert throttle.warning("k", "refused %s", "a")
    assert [r.getMessage() for r in caplog.records] == [
        "refused a", "refused b", "refused a (and 99 more like it in the last 10 s)"]


def test_the_gateway_limits_come_from_the_config():
    cfg = parse_config({"server": {"max_sessions": 10, "max_sessions_per_peer": 3, "session_idle_s": 0},
                        "devices": {"login_backoff_s": 2, "max_readings_per_minute_per_peer": 50}})
    from gateway.app_links import default_links

    links = {link.name: link for link in default_links(cfg)}
    limits = links["websocket"].limits
    assert limits is links["coap"].limits  # one count for both links
    assert (limits.max_sessions, limits.max_sessions_per_peer, limits.login_backoff_s, limits.readings_per_minute) == (10, 3, 2.0, 50)
    assert links["websocket"].idle_s is None  # 0: idle sessions stay
