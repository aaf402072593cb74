"""The live member list, from the retained member records every gateway publishes on the broker.

Each gateway publishes `P/$cluster/members/<id>` (retained) every heartbeat; its Last Will is an
empty retained message on the same topic, which deletes it. A record not refreshed within the
member timeout counts as gone even before the broker fires the Will (that takes 1.5 x the MQTT
keep-alive). Times are this gateway's monotonic clock at receipt, so clock skew between machines
does not matter.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberRecord:
    id: str
    since: float  # unix time the member joined
    capacity: int  # devices it is configured to serve (informative)

    def encode(self) -> bytes:
        return json.dumps({"id": self.id, "since": self.since, "capacity": self.capacity}).encode()

    @classmethod
    def decode(cls, payload: bytes) -> "MemberRecord":
        """Raises ValueError naming what is wrong."""
        try:
            data = json.loads(payload)
            record = cls(str(data["id"]), float(data["since"]), int(data["capacity"]))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"not a member record ({exc.__class__.__name__}: {exc})") from None
        return record


class MemberList:
    def __init__(self, me: str, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.me = me
        self.timeout_s = timeout_s
        self._clock = clock
        self._heard: dict[str, tuple[MemberRecord, float]] = {}  # id -> record, when heard

    def heard(self, member_id: str, payload: bytes) -> str | None:
        """A publish on `members/<member_id>`: "joined" or "left" when the list changed, else None.
        An empty payload removes the member (its Will, or its clean leave); a bad one is logged
        and ignored."""
        if not payload:
            known = self._heard.pop(member_id, None) is not None
            return "left" if known and member_id != self.me else None
        try:
            record = MemberRecord.decode(payload)
        except ValueError as exc:
            log.warning("cluster: ignored the member record on members/%s: %s", member_id, exc)
            return None
        if record.id != member_id:
            log.warning("cluster: ignored the member record on members/%s: it names member %r", member_id, record.id)
            return None
        known = member_id in self._heard
        self._heard[member_id] = (record, self._clock())
        return "joined" if not known and member_id != self.me else None

    def expire(self) -> list[str]:
        """Drop the members not heard within the timeout (never this gateway); returns their ids."""
        now = self._clock()
        gone = [m for m, (_, at) in self._heard.items() if m != self.me and now - at > self.timeout_s]
        for member_id in gone:
            del self._heard[member_id]
        return gone

    def live(self) -> tuple[str, ...]:
        """This gateway and every member heard within the timeout, sorted."""
        return tuple(sorted({self.me, *self._heard}))

    def records(self) -> list[MemberRecord]:
        return [record for record, _ in self._heard.values()]
