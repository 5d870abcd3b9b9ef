"""Diff what the server did with what the model predicts, for one operation.

Both sides are streams of the same records (``pcspec.model.logged``): the model's
events give theirs (``Event.logged``), the log checker's line events theirs
(``pcspec.logcheck.logged``). Records of each kind are compared in order (the order within a
kind is the server's order of calls, which the model follows); a field ``None`` on either side
matches anything. A kind whose lists differ in length or in a field is a ``Difference``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.model.logged import LOGGED_TYPES, Logged

SHOWN = 8  # records per side in a one-line report


def _cut(recs: tuple[str, ...], limit: int) -> str:
    if len(recs) <= limit:
        return ", ".join(recs)
    return ", ".join(recs[:limit]) + f", ... {len(recs) - limit} more"


@dataclass(frozen=True)
class Difference:
    kind: str
    server: tuple[str, ...]
    model: tuple[str, ...]

    def show(self, limit: int = SHOWN) -> str:
        """One line; a side of more than ``limit`` records (a livelock repeats one record
        hundreds of times) shows its first ``limit`` and how many more. ``to_json`` keeps all."""
        return f"{self.kind}: server [{_cut(self.server, limit)}] vs model [{_cut(self.model, limit)}]"

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "server": list(self.server), "model": list(self.model)}


def _by_kind(recs: list[Logged]) -> dict[str, list[Logged]]:
    out: dict[str, list[Logged]] = {}
    for rec in recs:
        out.setdefault(rec.kind, []).append(rec)
    return out


def diff(server: list[Logged], model: list[Logged], ignore: frozenset[str] = frozenset()) -> list[Difference]:
    a, b = _by_kind(server), _by_kind(model)
    out: list[Difference] = []
    for kind in [t.kind for t in LOGGED_TYPES]:
        if kind in ignore:
            continue
        xs, ys = a.get(kind, []), b.get(kind, [])
        if len(xs) != len(ys) or not all(x.matches(y) for x, y in zip(xs, ys, strict=True)):
            out.append(Difference(kind, tuple(x.show() for x in xs), tuple(y.show() for y in ys)))
    return out
