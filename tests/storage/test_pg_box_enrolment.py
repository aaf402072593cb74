"""A xiaozhi box's self-enrolment on PostgreSQL, shared by several gateways: bound to its Client-Id at
its first registration, a new token with that Client-Id from any gateway, another Client-Id refused
(its token and name untouched); the cap on open-enrolled devices holds across gateways asked at
once; a database of schema 3 migrates and its devices are bound at their next request; an
approved activation code is claimed only with the Client-Id it was given to."""

from __future__ import annotations

import asyncio

import psycopg

from gateway.config import parse_config
from gateway.devices.auth import BOUND, FULL, NOT_ADMITTED, OTHER_CLIENT, REGISTERED, RENEWED
from gateway.storage.activations import PostgresActivations
from gateway.storage.devices import PostgresDeviceRegistry
from gateway.storage.pool import open_pool
from gateway.storage.schema import MIGRATIONS, migrate
from tests.conftest import ROOT

STORAGE = parse_config({"storage": "postgres"}, ROOT).storage


async def test_a_box_is_bound_to_its_client_id_on_every_gateway(postgres_dsn: str) -> None:
    pools = [await open_pool(postgres_dsn, STORAGE) for _ in range(2)]
    try:
        a, b = (PostgresDeviceRegistry(p) for p in pools)
        first = await a.enrol_box("xiaozhi-1", "kitchen", "uuid-1", True, 10)
        assert first.outcome == REGISTERED and await b.check_token("xiaozhi-1", first.token) is True
        await b.rename_device("xiaozhi-1", "Grandma's kitchen box")
        again = await b.enrol_box("xiaozhi-1", "xiaozhi box ...", "uuid-1", True, 10)  # it reboots, asks the other
        assert again.outcome == RENEWED and await a.check_token("xiaozhi-1", again.token) is True
        stranger = await a.enrol_box("xiaozhi-1", "attacker-laptop", "uuid-2", True, 10)
        assert (stranger.outcome, stranger.token) == (OTHER_CLIENT, None)
        assert await b.check_token("xiaozhi-1", again.token) is True
        assert (await a.get_device("xiaozhi-1")).name == "Grandma's kitchen box"

        owners = await a.add_device("xiaozhi-2", "hall")  # `gateway devices add`: no Client-Id yet
        bound = await b.enrol_box("xiaozhi-2", "x", "uuid-3", False, 10)  # not a new device: not limited
        assert bound.outcome == BOUND and await a.check_token("xiaozhi-2", owners) is False
        assert (await a.enrol_box("xiaozhi-2", "x", "uuid-4", True, 10)).outcome == OTHER_CLIENT
        await a.add_device("xiaozhi-2", "hall")  # the owner rotates its token: the binding stays
        assert (await b.enrol_box("xiaozhi-2", "x", "uuid-4", True, 10)).outcome == OTHER_CLIENT
        assert (await b.enrol_box("xiaozhi-2", "x", "uuid-3", True, 10)).outcome == RENEWED
        assert (await a.enrol_box("xiaozhi-3", "x", "uuid-5", False, 10)).outcome == NOT_ADMITTED
        assert await a.get_device("xiaozhi-3") is None
    finally:
        for p in pools:
            await p.close()


async def test_the_cap_on_open_enrolled_boxes_holds_across_gateways_asked_at_once(postgres_dsn: str) -> None:
    pools = [await open_pool(postgres_dsn, STORAGE) for _ in range(2)]
    try:
        a, b = (PostgresDeviceRegistry(p) for p in pools)
        await a.add_device("kitchen-sensor", "")  # the owner's: not counted
        results = await asyncio.gather(*((a, b)[i % 2].enrol_box(f"xiaozhi-{i}", "", f"uuid-{i}", True, 5)
                                         for i in range(12)))
        outcomes = sorted(r.outcome for r in results)
        assert outcomes == sorted([REGISTERED] * 5 + [FULL] * 7)
        assert len(await a.list_devices()) == 6
        registered = next(i for i, r in enumerate(results) if r.outcome == REGISTERED)
        again = await b.enrol_box(f"xiaozhi-{registered}", "", f"uuid-{registered}", True, 5)  # full: still boots
        assert again.outcome == RENEWED
        both = await asyncio.gather(a.enrol_box("xiaozhi-new", "", "uuid-new", True, 100),
                                    b.enrol_box("xiaozhi-new", "", "uuid-new", True, 100))
        assert sorted(r.outcome for r in both) == [REGISTERED, RENEWED]  # one box asking both at once: created once
    finally:
        for p in pools:
            await p.close()


async def test_a_database_of_schema_3_migrates_and_its_boxes_are_bound_at_their_next_request(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:  # a cluster of the previous release
        conn.execute("CREATE TABLE schema_version (version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        for number, script in enumerate(MIGRATIONS[:3], start=1):
            conn.execute(script)
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (number,))
        conn.execute("INSERT INTO devices (device_id, token_hash, name, created_at) VALUES ('xiaozhi-9', 'h', 'old', 1)")
    with psycopg.connect(postgres_dsn) as conn:
        assert migrate(conn) == len(MIGRATIONS) >= 4
        assert conn.execute("SELECT client_hash, open_enrolled FROM devices").fetchall() == [(None, 0)]
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        registry = PostgresDeviceRegistry(pool)
        assert (await registry.enrol_box("xiaozhi-9", "", "uuid-9", True, 10)).outcome == BOUND
        assert (await registry.enrol_box("xiaozhi-9", "", "uuid-0", True, 10)).outcome == OTHER_CLIENT
        assert (await registry.get_device("xiaozhi-9")).name == "old"
    finally:
        await pool.close()


async def test_an_approved_code_is_claimed_only_with_its_client_id_on_any_gateway(postgres_dsn: str) -> None:
    pools = [await open_pool(postgres_dsn, STORAGE) for _ in range(2)]
    try:
        a, b = (PostgresActivations(p, 600) for p in pools)
        await b.offer("xiaozhi-7", "MAC 7", "uuid-stranger")  # asked first with the box's MAC
        code = (await a.offer("xiaozhi-7", "MAC 7", "uuid-box")).code  # the box's own replaces it
        assert (await b.offer("xiaozhi-7", "MAC 7", "uuid-box")).code == code
        assert (await b.approve(code)).approved
        assert (await a.offer("xiaozhi-7", "MAC 7", "uuid-stranger")).code == code  # approved: kept for the box
        assert await a.claim("xiaozhi-7", "x", "uuid-stranger") is None
        claims = await asyncio.gather(a.claim("xiaozhi-7", "box", "uuid-box"), b.claim("xiaozhi-7", "box", "uuid-box"))
        [token] = [t for t in claims if t]  # handed over once
        registry = PostgresDeviceRegistry(pools[1])
        assert await registry.check_token("xiaozhi-7", token) is True
        assert (await registry.enrol_box("xiaozhi-7", "", "uuid-stranger", True, 10)).outcome == OTHER_CLIENT
    finally:
        for p in pools:
            await p.close()
