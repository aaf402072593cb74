"""Console API for the memory through the MemoryService the MCP tools and
`gateway memory` use (the same user, tag and count rules).

    GET people                                   {"people": [...]}: the memory's users and memory.users
    GET memory?person=P&q=TEXT&type=T&tag=X&n=N  search (with q, best first) or browse (newest first)
    GET conversations?person=P&device=D&n=N      the recent conversation turns, newest first
    POST memory/delete {"person", "id"}          forget one memory (a rule: it no longer fires)
    POST memory/update {"person", "id", "content", "tags", "importance"}
                                                 change one memory in place, checked as `remember` is
                                                 (its id, type and time kept; a rule: on the rules page)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gateway.console.routes import ApiError, ApiRequest, Routes
from gateway.memory.errors import MemoryInputError
from gateway.memory.service import MemoryService

log = logging.getLogger(__name__)


def _n(request: ApiRequest, default: int = 50) -> int:
    n = request.query.get("n", str(default))
    if not n.isdigit() or not 1 <= int(n) <= 200:
        raise ApiError(400, "n: a number from 1 to 200", "n")
    return int(n)


def _person(request: ApiRequest) -> str:
    person = request.query.get("person", "")
    if not person:
        raise ApiError(400, "person: whose memory (see GET people)", "person")
    return person


class MemoryApi:
    def __init__(self, memory: MemoryService | None, mapped: Mapping[str, str]) -> None:
        self._memory = memory
        self._mapped = mapped

    def routes(self) -> Routes:
        return {("GET", "people"): self.people, ("GET", "memory"): self.browse,
                ("GET", "conversations"): self.conversations, ("POST", "memory/delete"): self.delete,
                ("POST", "memory/update"): self.update}

    def _service(self) -> MemoryService:
        if self._memory is None:
            raise ApiError(404, "the memory is off (memory.enabled in gateway.yaml)")
        return self._memory

    async def people(self, request: ApiRequest) -> dict[str, Any]:
        known = await self._memory.known_users() if self._memory is not None else []
        return {"people": sorted(set(known) | set(self._mapped.values()))}

    async def browse(self, request: ApiRequest) -> dict[str, Any]:
        memory, person, n = self._service(), _person(request), _n(request)
        q, kind, tag = request.query.get("q", "").strip(), request.query.get("type", ""), request.query.get("tag", "")
        tags = [tag] if tag else []
        try:
            if q:
                found = await memory.search(person, q, n, all_of=tags)
                nodes = [r.as_dict() for r in found if not kind or r.node.type == kind]
            else:
                nodes = [node.as_dict() for node in await memory.recent(person, n, all_of=tags, types=[kind] if kind else [])]
        except MemoryInputError as exc:
            raise ApiError(400, str(exc)) from None
        return {"person": person, "query": q, "nodes": nodes}

    async def conversations(self, request: ApiRequest) -> dict[str, Any]:
        memory, person, n = self._service(), _person(request), _n(request, 30)
        device = request.query.get("device", "")
        try:
            nodes = await memory.recent(person, n, types=["conversation"], all_of=[f"source:{device}"] if device else [])
        except MemoryInputError as exc:
            raise ApiError(400, str(exc)) from None
        turns = []
        for node in nodes:
            said, _, answered = node.content.partition("\nAssistant: ")
            source = next((t.split(":", 1)[1] for t in node.tags if t.startswith("source:")), "")
            turns.append({"id": node.id, "ts": node.ts, "device_id": source,
                          "said": said.removeprefix("User: "), "answered": answered})
        return {"person": person, "device": device, "turns": turns}

    async def delete(self, request: ApiRequest) -> dict[str, Any]:
        memory, body = self._service(), request.body
        if not isinstance(body, dict) or not isinstance(body.get("person"), str) or not body["person"]:
            raise ApiError(400, "person: whose memory", "person")
        node_id = body.get("id")
        if not isinstance(node_id, int) or isinstance(node_id, bool) or node_id < 1:
            raise ApiError(400, "id: the memory's number", "id")
        try:
            gone = await memory.forget(body["person"], node_id)
        except MemoryInputError as exc:
            raise ApiError(400, str(exc), "person") from None
        if not gone:
            raise ApiError(404, f"{body['person']} has no memory #{node_id}", "id")
        log.info("%s: memory #%d of %s deleted", request.peer, node_id, body["person"])
        return {"deleted": node_id}

    async def update(self, request: ApiRequest) -> dict[str, Any]:
        memory, body = self._service(), request.body
        if not isinstance(body, dict) or not isinstance(body.get("person"), str) or not body["person"]:
            raise ApiError(400, "person: whose memory", "person")
        person, node_id = body["person"], body.get("id")
        if not isinstance(node_id, int) or isinstance(node_id, bool) or node_id < 1:
            raise ApiError(400, "id: the memory's number", "id")
        content, tags, importance = body.get("content"), body.get("tags"), body.get("importance")
        if not isinstance(content, str):
            raise ApiError(400, "content: the memory's text", "content")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ApiError(400, "tags: a list of namespace:value strings", "tags")
        if importance is not None and (not isinstance(importance, int) or isinstance(importance, bool)):
            raise ApiError(400, "importance: an integer 0-10", "importance")
        try:
            if any(r.id == node_id for r in await memory.rules(person)):
                raise ApiError(400, "a rule is changed under Rules and alerts (its condition is checked there)", "id")
            node = await memory.rewrite(person, node_id, content, extra_tags=tags, importance=importance)
        except MemoryInputError as exc:
            message = str(exc)
            raise ApiError(400, message, "tags" if "tag" in message or "kind" in message else "content") from None
        if node is None:
            raise ApiError(404, f"{person} has no memory #{node_id}", "id")
        log.info("%s: memory #%d of %s changed", request.peer, node_id, person)
        return {"node": node.as_dict()}
