"""`gateway bench-links --broker HOST:PORT`: the MQTT figures through a real mosquitto."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.bench_links import Broker, _external
from gateway.config import parse_config
from gateway.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text", ["127.0.0.1", "127.0.0.1:", ":1883", "host:99999", "host:port"])
def test_a_broker_that_is_not_host_colon_port_is_refused_with_an_example(text):
    with pytest.raises(ConfigError, match="give HOST:PORT, e.g. 127.0.0.1:1883"):
        Broker.parse(text)


def test_a_broker_address_is_parsed_with_its_login():
    assert Broker.parse("[::1]:1884", "u", "p") == Broker("::1", 1884, "u", "p")


@pytest.mark.asyncio(loop_scope="session")
async def test_readings_through_an_external_mosquitto_are_stored_and_measured(fake_runner, mosquitto, tmp_path):
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db"), "max_readings_per_minute": 0}}, ROOT)
    result = await _external(cfg, fake_runner, Broker("127.0.0.1", mosquitto.port), 100)
    assert result["broker"] == f"127.0.0.1:{mosquitto.port}" and result["readings"] == 100
    assert result["per_s"] > 0 and result["bare_paho_cpu_us_per_message"] > 0
    assert result["gateway_vs_bare_per_message"] > 0
