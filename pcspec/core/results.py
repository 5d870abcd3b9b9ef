"""The one result type: what a checker found, and where.

Every checker of pcspec reports the same thing: a rule it holds the subject to, the place
where the subject broke it, and a message that explains itself. Only the subject differs, and
the ``kind`` names it:

* ``violation``: the model (or a port's model-visible state) broke a property of the catalogue
  (``rule`` is its ID, ``at`` the index of the model operation);
* ``divergence``: a port or a real server did something else than the model on the same
  operations (``rule`` names the property or the record that differs, ``at`` the operation);
* ``deviation``: a real server's log shows something the spec's rules do not allow (``rule``
  is the log checker's rule ID, ``at`` the log line).

``data`` carries what a kind needs beyond that (a live finding's class and figures); it is
part of the JSON form and of equality.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["violation", "divergence", "deviation"]


@dataclass(frozen=True)
class Finding:
    kind: Kind
    rule: str
    at: int
    message: str
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    # The names each kind's reports have always used for ``rule`` and ``at``.
    @property
    def op(self) -> int:
        return self.at

    @property
    def line(self) -> int:
        return self.at

    @builtins.property  # (last: from here on ``property`` names this method in the class body)
    def property(self) -> str:
        return self.rule

    def to_json(self) -> dict[str, Any]:
        """The kind's own field names (``property``/``op``, ``rule``/``line``), as its reports
        and files have always named them."""
        if self.kind == "deviation":
            head: dict[str, Any] = {"line": self.at, "rule": self.rule}
        else:
            head = {"property": self.rule, "op": self.at}
        return {**head, "message": self.message, **self.data}


def violation(rule: str, op: int, message: str) -> Finding:
    return Finding("violation", rule, op, message)


def divergence(rule: str, op: int, message: str, **data: Any) -> Finding:
    return Finding("divergence", rule, op, message, dict(data))


def deviation(rule: str, line: int, message: str) -> Finding:
    return Finding("deviation", rule, line, message)


__all__ = ["Finding", "Kind", "deviation", "divergence", "violation"]
