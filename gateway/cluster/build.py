"""The cluster node `gateway run` serves with `cluster.enabled` (composed in gateway/app.py)."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Mapping

from gateway.cluster.leases import PgLeases
from gateway.cluster.node import ClusterNode
from gateway.config import GatewayConfig
from gateway.storage.dsn import postgres_dsn

MAX_CLIENT_ID = 23  # MQTT 3.1.1's guaranteed client id length (mqtt.client_id's limit)


def member_id(cfg: GatewayConfig) -> str:
    """cluster.id, or the host name: unique per gateway of a cluster."""
    return cfg.cluster.id or socket.gethostname().split(".")[0]


def client_id(member: str) -> str:
    """The member's MQTT client id: its id when short enough, else a stable shortened one (two
    gateways sharing a client id would throw each other off the broker)."""
    if len(member) <= MAX_CLIENT_ID:
        return member
    return f"{member[:10]}-{hashlib.sha256(member.encode()).hexdigest()[:12]}"


def build_node(cfg: GatewayConfig, environ: Mapping[str, str]) -> ClusterNode:
    c = cfg.cluster
    me = member_id(cfg)
    leases = PgLeases(postgres_dsn(cfg.storage, environ), me, c.lease_ttl_s,
                      timeout_s=min(cfg.storage.connect_timeout_s, c.lease_ttl_s / 3))
    return ClusterNode(me, cfg.mqtt.topic_prefix, leases, heartbeat_s=c.heartbeat_s,
                       member_timeout_s=c.member_timeout_s, lease_ttl_s=c.lease_ttl_s,
                       capacity=cfg.server.max_sessions, client_id=client_id(me))
