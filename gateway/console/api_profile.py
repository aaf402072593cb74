"""Console API for what the memory made of a person: the daily reflection's insights and the
portrait (gateway/memory/reflection.py, through the MemoryService, as `gateway memory reflect`
and the MCP tools memory_get_reflections / memory_get_user_profile).

    GET  profile?person=P&n=N     {"portrait", "updated", "extra_info", "reflections": [...] newest first}
    POST profile/reflect {"person"}   run the reflection and the portrait now (as the scheduler does
                                      daily at memory.reflection_time / portrait_time)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from gateway.console.routes import ApiError, ApiRequest, Routes
from gateway.memory.errors import MemoryInputError
from gateway.memory.reflection import portrait, reflect
from gateway.memory.service import MemoryService

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now().astimezone()


class ProfileApi:
    def __init__(self, memory: MemoryService | None, now: Callable[[], datetime] = _now) -> None:
        self._memory = memory
        self._now = now

    def routes(self) -> Routes:
        return {("GET", "profile"): self.show, ("POST", "profile/reflect"): self.reflect}

    def _service(self) -> MemoryService:
        if self._memory is None:
            raise ApiError(404, "the memory is off (memory.enabled in gateway.yaml)")
        return self._memory

    async def show(self, request: ApiRequest) -> dict[str, Any]:
        memory, person = self._service(), request.query.get("person", "")
        n = request.query.get("n", "10")
        if not person:
            raise ApiError(400, "person: whose portrait (see GET people)", "person")
        if not n.isdigit() or not 1 <= int(n) <= 100:
            raise ApiError(400, "n: a number from 1 to 100", "n")
        try:
            profile = await memory.profile(person)
            insights = await memory.reflections(person, int(n))
        except MemoryInputError as exc:
            raise ApiError(400, str(exc), "person") from None
        return {"person": person, "portrait": profile["portrait"], "updated": profile["updated"],
                "extra_info": profile["extra_info"],
                "reflections": [{"id": i.id, "ts": i.ts, "content": i.content, "tags": list(i.tags)} for i in insights]}

    async def reflect(self, request: ApiRequest) -> dict[str, Any]:
        memory, body = self._service(), request.body
        person = body.get("person") if isinstance(body, dict) else None
        if not isinstance(person, str) or not person:
            raise ApiError(400, "person: whose reflection", "person")
        now = self._now()
        try:
            insights = await reflect(memory, person, now)
            text = await portrait(memory, person, now)
        except MemoryInputError as exc:
            raise ApiError(400, str(exc), "person") from None
        log.info("%s: reflection of %s run now: %d insights, portrait rebuilt", request.peer, person, len(insights))
        return {"person": person, "insights": [i.content for i in insights], "portrait": text}
