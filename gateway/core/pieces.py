"""Text that arrives in many small pieces (stream deltas), held in memory proportional to its length."""

from __future__ import annotations

from typing import Final

JOIN_EVERY: Final = 1024  # pieces of a text kept apart before they are joined into one string


class TextPieces:
    """A text arriving in pieces, held in memory proportional to its length however small the pieces.

    Each str costs ~50 bytes besides its characters: a list of a stream's 2-character deltas
    is ~30 times their size. Joined every JOIN_EVERY pieces, the text is its characters plus a
    string header per batch; the final join adds one copy, which replaces the batches.
    (io.StringIO would widen all it holds to 4 bytes a character at the first one past
    U+FFFF, and copy its value once more on getvalue.)
    """

    __slots__ = ("_batches", "_pieces")

    def __init__(self, text: str = "") -> None:
        self._batches: list[str] = [text] if text else []
        self._pieces: list[str] = []

    def add(self, piece: str) -> None:
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= JOIN_EVERY:
            self._batches.append("".join(pieces))
            pieces.clear()

    def text(self) -> str:
        """The whole text so far; from now on held as that one string."""
        batches = self._batches
        if self._pieces:
            batches.append("".join(self._pieces))
            self._pieces.clear()
        if len(batches) != 1:
            batches[:] = ["".join(batches)]
        return batches[0]
