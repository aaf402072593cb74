"""The embedded mosquitto's files: its config, its password file and its ACL (gateway/links/mosquitto.py).

Who may do what (docs/MQTT.md "The embedded broker"):
- the gateway logs in as `gateway_user` (random, kept in the broker folder) with a secret made at
  each start, and may use every topic;
- a registered device logs in with username = device id, password = its token (hashed as
  mosquitto does, gateway/devices/broker_password.py) and may publish `P/<id>/up|status` and read
  `P/<id>/down`, nothing else (so no retained status of another device reaches it);
- enrolment closed: nobody else, and `use_username_as_clientid` makes the client id the username,
  so no login can take the gateway's or another device's session;
- enrolment open: anonymous clients too (mosquitto refuses clients without a username under
  `use_username_as_clientid`, so it is off then), each confined by `pattern` lines to
  `P/<its client id>/...`, with every registered id denied to them and to the other devices.
  What remains: an anonymous client using a registered device's (or a device's using another's)
  client id takes over that session (mosquitto drops the older one) though it cannot read or write
  its topics; the gateway's own id is random, so it cannot be guessed.

The ACL grows linearly with the devices (mosquitto 2.0 src/security_default.c): a client's own
`user` section is read first and its first match decides; then the `pattern` lines, which apply
to every client, the `deny` ones first. So one `pattern deny P/<id>/#` per registered device
(a pattern without %c, which mosquitto warns about at each load: gateway/links/mosquitto.py logs
those warnings at debug level) keeps every client but that device's own login (whose section
allowed its topics already) and the gateway's (`readwrite #`) off its topics, whatever client id
it uses; the `%c` patterns then give each client its own client id's topics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BrokerSettings:
    host: str
    port: int
    prefix: str
    max_packet_size: int
    open_enrolment: bool
    gateway_user: str
    folder: Path
    run_as: str  # mosquitto's `user`: it would switch to user mosquitto when started as root


def render_config(s: BrokerSettings) -> str:
    lines = [
        "# Written by the gateway at each start (gateway/links/mosquitto_files.py); edits are lost.",
        "per_listener_settings false",
        f"allow_anonymous {'true' if s.open_enrolment else 'false'}",
        f"password_file {s.folder / 'passwd'}",
        f"acl_file {s.folder / 'acl'}",
        f"max_packet_size {s.max_packet_size}",
        "set_tcp_nodelay true",  # small publishes (acks, audio) leave at once, not after a delayed TCP ack
        "persistence true",
        f"persistence_location {s.folder}/",
        f"user {s.run_as}",
        "log_dest stderr",  # unbuffered (stdout to a pipe is block-buffered); the gateway reads the pipe
        "log_timestamp false",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "log_type information",
        "log_type subscribe",  # checked against the ACL by gateway/links/mosquitto_log.py
        "connection_messages true",
        f"listener {s.port} {s.host}" if s.host else f"listener {s.port}",
    ]
    if not s.open_enrolment:
        lines.append("use_username_as_clientid true")
    return "\n".join(lines) + "\n"


def usable_login(device_id: str) -> bool:
    """mosquitto's password file is `user:hash`: a device id with ':' cannot be a login there."""
    return ":" not in device_id


def render_passwd(gateway_user: str, gateway_hash: str, logins: Sequence[tuple[str, str | None]]) -> str:
    rows = [f"{gateway_user}:{gateway_hash}"]
    rows += [f"{device_id}:{hashed}" for device_id, hashed in logins
             if hashed and device_id != gateway_user and usable_login(device_id)]
    return "\n".join(rows) + "\n"


def deny_pattern(prefix: str, device_id: str) -> str:
    """The topic of a registered device's `pattern deny` line (open enrolment)."""
    return f"{prefix}/{device_id}/#"


def render_acl(s: BrokerSettings, registered: Sequence[str]) -> str:
    """Linear in the number of devices (see the module's docstring for why it confines as it does)."""
    p = s.prefix
    out = ["# Written by the gateway (gateway/links/mosquitto_files.py) from the device registry."]
    if s.open_enrolment:
        out.append("# every client (devices.open_enrolment): its own client id's topics, no registered id's; a")
        out.append("# device's own login is allowed its topics by its user section, read before these patterns")
        out += [f"pattern deny {deny_pattern(p, device_id)}" for device_id in registered]
        out += [f"pattern write {p}/%c/up", f"pattern write {p}/%c/status", f"pattern read {p}/%c/down"]
    out += ["", f"user {s.gateway_user}", "topic readwrite #"]
    for device_id in registered:
        out += ["", f"user {device_id}", f"topic write {p}/{device_id}/up", f"topic write {p}/{device_id}/status",
                f"topic read {p}/{device_id}/down"]
    return "\n".join(out) + "\n"
