"""What the registry needs of a connected device's conversation: something that can speak.

(Not the voice pipeline's `Speaker`, which streams replies; a `Conversation` is a `Sayer`.)
"""

from __future__ import annotations

from typing import Protocol


class Sayer(Protocol):
    """A device session that can say a sentence on its device (MCP `say`, spoken alerts)."""

    async def say(self, text: str) -> None:
        """Speak `text` on the device (synthesised and streamed like a reply)."""
        ...
