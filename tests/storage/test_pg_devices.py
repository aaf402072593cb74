"""Devices and tokens on PostgreSQL: a device registered through one gateway logs in on another;
a wrong token is refused; unknown devices follow open enrolment (the Authenticator unchanged)."""

from __future__ import annotations

import pytest

from firmware_protocol import Hello
from gateway.config import parse_config
from gateway.devices.auth import Authenticator, AuthRefused
from gateway.storage.devices import PostgresDeviceRegistry
from gateway.storage.pool import open_pool
from tests.conftest import ROOT

STORAGE = parse_config({"storage": "postgres"}, ROOT).storage


def hello(device_id: str, token: str) -> Hello:
    return Hello(device_id=device_id, token=token)


async def test_a_device_registered_on_one_gateway_logs_in_on_another(postgres_dsn: str) -> None:
    pools = [await open_pool(postgres_dsn, STORAGE) for _ in range(2)]
    try:
        first, second = (Authenticator(PostgresDeviceRegistry(p), open_enrolment=False) for p in pools)
        assert await first.issue_token("box-1", "kitchen", "client-1") is None  # no self-enrolment when closed
        token = await PostgresDeviceRegistry(pools[0]).add_device("box-1", "kitchen")  # `gateway devices add`
        await second.check(hello("box-1", token), "peer-b")  # no AuthRefused
        assert await second.check_credentials("box-1", token) is True
        assert await second.check_credentials("box-1", "wrong") is False
        with pytest.raises(AuthRefused, match="wrong token"):
            await second.check(hello("box-1", "wrong"), "peer-b")
        with pytest.raises(AuthRefused, match="unknown device"):
            await second.check(hello("box-2", "x"), "peer-b")
        assert await second.is_registered("box-1") and not await second.is_registered("box-2")
        [(device, broker_hash)] = await second.broker_logins()
        assert device == "box-1" and broker_hash.startswith("$7$")
        record = await PostgresDeviceRegistry(pools[1]).get_device("box-1")
        assert record.name == "kitchen" and record.last_seen is not None
        open_gateway = Authenticator(PostgresDeviceRegistry(pools[1]), open_enrolment=True)
        await open_gateway.check(hello("box-3", "anything"), "peer-c")  # let in, with a warning
        enrolled = await open_gateway.issue_token("box-3", "hall", "client-3")
        assert enrolled.outcome == "registered" and await first.check_credentials("box-3", enrolled.token) is True
    finally:
        for p in pools:
            await p.close()


async def test_a_database_failure_during_the_token_check_refuses_the_hello_storage_failed(postgres_dsn: str) -> None:
    """PostgreSQL failing under the token check is a refusal the device understands (storage-failed),
    not an exception out of the session, as with SQLite's errors."""
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        registry = PostgresDeviceRegistry(pool)
        token = await registry.add_device("box-pg-down", "")
        async with pool.connection() as conn:
            await conn.execute("ALTER TABLE devices RENAME TO devices_away")
        try:
            with pytest.raises(AuthRefused) as refused:
                await Authenticator(registry, open_enrolment=False).check(hello("box-pg-down", token), "peer-d")
            assert refused.value.code == "storage-failed" and "PostgreSQL error" in str(refused.value)
        finally:
            async with pool.connection() as conn:
                await conn.execute("ALTER TABLE devices_away RENAME TO devices")
        assert await registry.check_token("box-pg-down", token) is True
    finally:
        await pool.close()
