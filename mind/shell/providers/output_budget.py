"""One round's model output counted against its cap (docs/design/providers.md §1)."""

from __future__ import annotations

from mind.conversation import DEFAULT_MAX_OUTPUT_BYTES
from mind.errors import ProviderError


class OutputBudget:
    """Counts one round's model output against its cap (docs/design/providers.md §1).

    Every piece of answer text, reasoning and tool-call argument text a parser
    keeps is charged *before* it is kept, so nothing is accumulated past the
    cap: the charge that goes over raises and the stream is closed.

    Args:
        limit_bytes: the most UTF-8 bytes allowed (``ModelRequest.max_output_bytes``).
    """

    def __init__(self, limit_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0

    def charge(self, text: str) -> None:
        """Count ``text`` (its UTF-8 length in bytes).

        Raises:
            ProviderError: ``output_limit`` once more than ``limit_bytes`` were
                charged in total; its detail names the cap and the setting.
        """
        self.used_bytes += len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
        if self.used_bytes > self.limit_bytes:
            raise ProviderError(
                "output_limit",
                detail=f"more than {self.limit_bytes} bytes of model output in this turn "
                "(max_output_mib)",
            )
