"""Expression messages as JSON events (for `gateway simulate --json` and tools).

Each event names the sentence it belongs to (the ReplyText with the same stream id).
"""

from __future__ import annotations

from typing import Any

from firmware_protocol import Action, Message, Mouth, Sentiment, ServoKeyframes, Visemes, to_dict

EXPRESSION_MESSAGES = (Visemes, Mouth, Action, Sentiment, ServoKeyframes)
_EVENT = {Visemes: "visemes", Mouth: "mouth", Action: "action", Sentiment: "sentiment", ServoKeyframes: "servo"}


def expression_event(msg: Message, sentence: str) -> dict[str, Any]:
    body = to_dict(msg)
    body.pop("type", None)
    if isinstance(msg, Visemes):
        body["total_ms"] = sum(v[2] for v in msg.visemes)
    elif isinstance(msg, Sentiment):
        body["value"] = msg.tenths / 10
    elif isinstance(msg, Action):
        body["intensity"] = msg.intensity / 100
    return {"event": _EVENT[type(msg)], "sentence": sentence, **body}
