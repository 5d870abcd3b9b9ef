"""Content identities as state tags: the small integers a port writes into its buffers.

The model's buffers carry what a fill wrote (a ``StateImage``: the state of a token prefix in
one scope; or a speculative stash of a prefix). A port never sees those: the lowering names
each distinct content by a tag, 1, 2, ... in order of first use within a trace, and keeps what
each tag describes (the token prefix) for the judge. Tag 0 is every content that is no state
(a slot-file payload that does not decode); loading it fails. ``content`` goes back: the
content a tag stands for, which the judge puts into the buffers of a port's state
(``pcspec.conform.judge``).
"""

from __future__ import annotations

from pcspec.model.config import MemoryKind
from pcspec.model.memory import FULL, StateImage, Tokens

GARBAGE = 0


class Tags:
    def __init__(self) -> None:
        self.by_content: dict[object, int] = {}
        self.prefix: dict[int, Tokens | None] = {GARBAGE: None}
        self.by_buffer: dict[tuple[int, int], int] = {}  # (buffer id, version) -> tag, for speed
        self._contents: dict[int, object] = {}  # tag -> content (``content``)

    def tag(self, content: object) -> int:
        """The tag of a content (assigned at its first use)."""
        if isinstance(content, StateImage):
            described: Tokens | None = content.describes()
        elif isinstance(content, tuple) and len(content) == 2 and content[0] == "spec":
            described = tuple(content[1])
        else:
            return GARBAGE
        t = self.by_content.get(content)
        if t is None:
            t = len(self.by_content) + 1
            self.by_content[content] = t
            self.prefix[t] = described
        return t

    def content(self, tag: int | None) -> object:
        """What a buffer whose bytes decode to ``tag`` holds, as a model buffer holds it (None:
        no whole state): the content the tag was given to; for a tag read from a case file, a
        state image of the prefix it describes; a tag that describes nothing is no state."""
        if tag is None:
            return None
        if len(self._contents) != len(self.by_content):
            self._contents = {t: c for c, t in self.by_content.items()}
        got = self._contents.get(tag)
        if got is not None:
            return got
        prefix = self.prefix.get(tag)
        return ("no state", tag) if prefix is None else StateImage(MemoryKind.KV, FULL, prefix, None, 0)

    def table(self) -> dict[str, list[int] | None]:
        """What each tag describes, for trace files (JSON keys are strings)."""
        return {str(t): (list(p) if p is not None else None) for t, p in self.prefix.items()}

    @classmethod
    def from_table(cls, table: dict[str, list[int] | None]) -> Tags:
        out = cls()
        out.prefix = {int(k): (tuple(v) if v is not None else None) for k, v in table.items()}
        return out
