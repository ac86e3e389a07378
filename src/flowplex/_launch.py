"""The ``flowplex`` console script: ``ps``, ``top NAME --once`` and ``attach NAME`` start at once,
the rest by the CLI.

Loading the command-line framework (typer, click, rich) takes longer than asking ten live graphs
how they are, or than drawing an attached terminal's first frame: the commands scripts and
status bars poll, and ``attach``, are parsed here in their plain forms and do what
``flowplex.cli`` would do. Any other form (``--help``, an option, a typo, another command) goes
to ``flowplex.cli.main``, which owns the command line.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    """Console-script entry point."""
    args = sys.argv[1:]
    code = _fast(args)
    if code is None:
        from flowplex.cli import main as cli_main

        cli_main()
        return
    sys.stdout.flush()
    raise SystemExit(code)


def _fast(args: list[str]) -> int | None:
    """The exit code of ``ps [--json]`` or ``top NAME --once [--json]``; None for any other form."""
    from flowplex.errors import ControlError

    flags = {a for a in args[1:] if a.startswith("-")}
    if args[:1] == ["attach"] and len(args) == 2 and not flags:
        from flowplex.control._paths import NAME_RE

        if NAME_RE.fullmatch(args[1]):
            from flowplex.terminal._attach import attach

            return attach(args[1])
    try:
        if args[:1] == ["ps"] and len(args) == 1 + len(flags) and flags <= {"--json"}:
            from flowplex.control._client import live_graphs
            from flowplex.control._text import ps_text

            infos = [{k: v for k, v in i.items() if k != "ok"} for i in live_graphs()]
            _out(json.dumps(infos) + "\n" if "--json" in flags else ps_text(infos))
            return 0
        names = [a for a in args[1:] if not a.startswith("-")]
        if (args[:1] == ["top"] and len(names) == 1 and "--once" in flags and flags <= {"--once", "--json"}
                and len(args) == 2 + len(flags)):
            from flowplex.control._client import connect
            from flowplex.control._paths import NAME_RE
            from flowplex.control._text import top_text

            if not NAME_RE.fullmatch(names[0]):
                return None  # the CLI says what is wrong with it
            with connect(names[0]) as client:
                answer = {k: v for k, v in client.request("top").items() if k != "ok"}
            _out(json.dumps(answer) + "\n" if "--json" in flags else top_text(names[0], answer))
            return 0
    except ControlError as exc:
        from flowplex.terminal._sanitize import visible_controls

        where = f"{names[0]}: " if args[:1] == ["top"] and "no live graph" not in str(exc) else ""
        sys.stderr.write(visible_controls(f"flowplex: error: {where}{exc}") + "\n")
        return 1
    return None


def _out(text: str) -> None:
    from flowplex.terminal._sanitize import visible_controls

    try:
        sys.stdout.write(visible_controls(text))
    except BrokenPipeError:  # `flowplex ps | head`
        sys.stderr.close()
