"""The ``flowplex`` command line (typer): thin — parse, call the library, format results.

One module per command, each registering itself on the one ``app`` (``_app``, with the
``--debug`` switch and the one-line error forms): ``run``, ``dot``, ``check`` (and its
lm-flow name ``check-config``), ``schema``, ``info``, ``shm clean``, ``demo`` and ``agents``.
What ``run``, ``dot`` and ``check`` share lives beside them: ``--import`` and building the
graph (``_loading``), ``--set`` (``_overrides``), ``--timeout`` and Ctrl-C (``_watch``). The
command line reads only the library's public facade and snapshots; what its deadline watch
needs from inside the library is in ``flowplex._deadline``.
"""

from __future__ import annotations

from flowplex.packets._values import packet_value as packet_value  # moved; kept importable from here

# The command modules register their commands on `app` when imported, in the order `--help` lists them.
# isort: off
from . import _run, _dot, _check, _schema, _info, _shm, _demo, _agents, _live, _attach, _recording, _record_live  # noqa: F401
# isort: on
from ._app import StderrLog as _StderrLog  # noqa: F401  (tests attach it to a record by this name)
from ._app import app as app
from ._app import stdout_reader_may_leave
from ._loading import import_kernels as import_kernels
from ._overrides import apply_overrides as apply_overrides
from ._overrides import parse_override as parse_override
from ._watch import CHECK_TIMEOUT_S as CHECK_TIMEOUT_S
from ._watch import DEADLINE_CLOSE_S as DEADLINE_CLOSE_S
from ._watch import DEADLINE_SLACK_S as DEADLINE_SLACK_S


def main() -> None:
    """Console-script entry point.

    A reader that leaves stdout early (``flowplex run g.yaml | head -1``) ends any command
    quietly, exit 0 (see ``_app.stdout_reader_may_leave``).
    """
    with stdout_reader_may_leave():
        app()
