"""``ScriptedSource``: a source kernel that plays a script of values, gaps, failures and an end."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, final

from ..kernels import Context, Kernel, kernel
from ._script import Step, encode_script, parse_script

__all__ = ["ScriptedSource", "scripted"]


@final
@kernel("ScriptedSource")
class ScriptedSource(Kernel):
    """Plays ``options.script`` on output 0, one entry per invocation (see ``flowplex.testing._script``).

    Ports: no inputs → output 0 (the type of each value).
    Options: ``script`` (list of entries), ``start`` (first timestamp, default 0), ``step``
    (timestamp increment, default 1).
    Behaviour: a value is emitted at its timestamp; a gap yields for its seconds (no worker
    waits); a failure raises ``RuntimeError``; the end (or the last entry) calls
    ``source_done``. The script is checked in ``open``: a bad entry fails the start with a
    ``ConfigError`` naming it (``run_graph`` checks it at build, with the YAML path). ``close``
    rewinds, so a graph started again after ``reset`` plays it again.
    """

    def __init__(self) -> None:
        self._steps: list[Step] = []
        self._next = 0

    @staticmethod
    def node(name: str, items: Iterable[object], *, output: str = "out", start: int = 0,
             step: int = 1) -> dict[str, Any]:
        """A node dict playing ``items`` (Python values, ``At``, ``Gap``, ``Fail``, ``EndOfStream()``)."""
        return scripted(name, items, output=output, start=start, step=step)

    def open(self, cc: Context) -> None:
        self._steps = parse_script(_options(cc), "options", f" (node `{cc.node_name}`)")
        self._next = 0

    def process(self, cc: Context) -> None:
        steps = self._steps
        if self._next >= len(steps):
            cc.source_done()
            return
        step = steps[self._next]
        self._next += 1
        if step.kind == "emit":
            cc.emit(0, step.value, step.ts)
        elif step.kind == "gap":
            cc.source_yield(step.value)  # type: ignore[arg-type]  # parse_script made it a float
        elif step.kind == "fail":
            raise RuntimeError(step.value)
        else:
            self._next = len(steps)
        if self._next >= len(steps):
            cc.source_done()

    def close(self, cc: Context) -> None:
        self._next = 0


def _options(cc: Context) -> object:
    """The node's whole options tree (the context hands out typed leaves only)."""
    return json.loads(cc.options_json())


def scripted(name: str, items: Iterable[object], *, output: str = "out", start: int = 0,
             step: int = 1) -> dict[str, Any]:
    """A ``ScriptedSource`` node dict for a graph dict (``run_graph`` takes one) or ``yaml.safe_dump``.

    >>> scripted("src", [1, 2.5, "hi"])
    {'name': 'src', 'kernel': 'ScriptedSource', 'output_ports': ['out'], 'options': {'script': [1, 2.5, 'hi']}}

    Raises:
        UsageError: An item cannot be scripted (its index is named).
        ConfigError: The script is malformed (a timestamp that does not increase, ``step`` < 1).
    """
    options: dict[str, Any] = {"script": encode_script(items)}
    if start != 0:
        options["start"] = start
    if step != 1:
        options["step"] = step
    parse_script(options, "options", f" (scripted node `{name}`)")  # fail here, where the test wrote it
    return {"name": name, "kernel": "ScriptedSource", "output_ports": [output], "options": options}
