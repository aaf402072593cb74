"""mosquitto's log lines as the gateway logs them (gateway/links/mosquitto_log.py), on lines as
mosquitto 2.0.11 writes them."""

from __future__ import annotations

import logging

from gateway.links.mosquitto_log import BrokerLog


def fed(log: BrokerLog, *lines: str) -> list[tuple[int, str]]:
    return [log.line(line) for line in lines]


def test_a_refused_login_is_a_warning_naming_the_address_of_its_connection():
    log = BrokerLog("gw", open_enrolment=False)
    out = fed(log, "New connection from 10.0.0.7:50586 on port 1883.", "Client <unknown> disconnected, not authorised.")
    assert out[0][0] == logging.DEBUG
    assert out[1] == (logging.WARNING, "Client <unknown> disconnected, not authorised. (peer 10.0.0.7:50586)")


def test_a_takeover_names_the_new_connection_and_an_oversized_packet_its_client():
    log = BrokerLog("gw", open_enrolment=True)
    out = fed(log, "New connection from 10.0.0.1:1000 on port 1883.",
              "New client connected from 10.0.0.1:1000 as dev-a (p2, c0, k60, u'dev-a').",
              "New connection from 10.0.0.9:2000 on port 1883.",
              "Client dev-a already connected, closing old connection.",
              "New client connected from 10.0.0.9:2000 as dev-a (p2, c1, k60).",
              "Client dev-a disconnected due to oversize packet.")
    assert out[3] == (logging.WARNING, "Client dev-a already connected, closing old connection. (peer 10.0.0.9:2000)")
    assert out[5] == (logging.WARNING, "Client dev-a disconnected due to oversize packet. (peer 10.0.0.9:2000)")


def test_subscriptions_outside_the_acl_are_warnings_and_own_ones_are_not():
    log = BrokerLog("gw", open_enrolment=True)
    log.logins("edge-gateway-1", ["dev-a", "dev-b"])
    fed(log, "New client connected from 10.0.0.1:1 as dev-a (p2, c0, k60, u'dev-a').",
        "New client connected from 10.0.0.2:2 as anon (p2, c1, k60).",
        "New client connected from 10.0.0.3:3 as dev-b (p2, c1, k60).",
        "New client connected from 127.0.0.1:4 as edge-gateway-1 (p2, c0, k30, u'edge-gateway-1').")
    assert log.line("dev-a 1 gw/dev-a/down")[0] == logging.DEBUG
    assert log.line("anon 1 gw/anon/down")[0] == logging.DEBUG
    assert log.line("edge-gateway-1 1 gw/+/up")[0] == logging.DEBUG
    level, text = log.line("dev-a 1 gw/dev-b/down")
    assert level == logging.WARNING and "client dev-a (user dev-a) subscribed to gw/dev-b/down" in text
    level, text = log.line("anon 0 #")
    assert level == logging.WARNING and "anonymous client anon subscribed to #" in text and "10.0.0.2:2" in text
    level, _ = log.line("dev-b 1 gw/dev-b/down")  # anonymous with a registered id: denied its topics
    assert level == logging.WARNING
