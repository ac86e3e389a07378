"""The agents file of ``flowplex agents -f agents.yaml``: YAML in, frozen :class:`AgentEntry` out.

Like mprocs' config and Procfiles, the file lists the programs to run side by side::

    agents:
      repl:   {cmd: [python3, -i], agent_type: assistant}
      ticker: {cmd: "while true; do date; sleep 1; done", restart: on_failure}

``agents`` is a list of mappings (each with a ``name``) or a mapping from name to spec (or to a
bare command, Procfile style). A ``cmd`` list is the argv; a ``cmd`` string runs as
``/bin/sh -c STRING``. Relative ``cwd`` paths are relative to the file's directory. Every error
is one :class:`~flowplex.errors.ConfigError` line, ``file:LINE: agents[2].cmd: what; hint``.

pydantic validates each agent (and gives the JSON Schema); the rest of flowplex only sees the
frozen entries. :class:`RestartPolicy` decides, as a pure function, whether and when an agent
that exited is started again.
"""

from __future__ import annotations

import os
import shlex
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, NoReturn

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from .._suggest import did_you_mean, suggest
from ..agents._restart import (
    DEFAULT_RESTART_DELAY_S,
    DEFAULT_RESTART_LIMIT,
    MAX_RESTART_DELAY_S,
    MIN_RESTART_DELAY_S,
    RESTART_MODES,
    STABLE_AFTER_S,
    RestartDecision,
    RestartPolicy,
)
from ..config._include import read_text
from ..config._marks import parse_document
from ..config._paths import Source, YamlPath, format_path
from ..config._validation import describe_value
from ..errors import ConfigError
from ..transport import AgentType

__all__ = [
    "DEFAULT_RESTART_DELAY_S",
    "DEFAULT_RESTART_LIMIT",
    "MAX_RESTART_DELAY_S",
    "RESTART_MODES",
    "SHELL",
    "STABLE_AFTER_S",
    "AgentEntry",
    "RestartDecision",
    "RestartPolicy",
    "agents_json_schema",
    "entries_from_commands",
    "load_agents_file",
    "parse_agents_yaml",
    "unique_names",
]

SHELL: Final = ("/bin/sh", "-c")
"""A ``cmd`` string runs as ``SHELL + (string,)``."""

_AgentTypeName = Literal["system", "user", "assistant", "error", "warning", "info", "debug", "trace"]
_AGENT_TYPES: Final = tuple(t.name.lower() for t in AgentType)
"""The names of ``_AgentTypeName``, in ``AgentType`` order (a test pins that they agree)."""
_TOP_KEYS: Final = ("agents",)
_ERROR_KIND: Final = "flowplex_agents"
"""The pydantic error type of our validators' errors; their ``ctx`` holds message and sub-path."""
# Keys other tools use for the same thing: the hint names ours.
_RENAMED: Final = {
    "shell": "use `cmd: STRING`: a string runs through /bin/sh -c",
    "command": "use `cmd`: a list of arguments or a shell string",
    "argv": "use `cmd`: a list of arguments or a shell string",
    "args": "use `cmd`: a list of arguments or a shell string",
    "environment": "use `env`",
    "working_dir": "use `cwd`",
    "dir": "use `cwd`",
    "type": "use `agent_type`",
}


# --- the entries -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """One agent to run: a parsed, checked line of the agents file (or of ``-- CMD``)."""

    name: str
    """Unique among the file's agents; the pane title."""
    argv: tuple[str, ...]
    """What to execute (``SHELL + (string,)`` for a shell string); never empty."""
    cwd: str | None = None
    """Working directory (relative paths already joined to the file's directory); ``None``: the
    current one."""
    env: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    """Variables to set on top of the inherited environment; ``None`` unsets one."""
    autostart: bool = True
    """Start with the others; ``False``: the pane waits until the user starts it."""
    agent_type: AgentType = AgentType.INFO
    restart: str = "never"
    """One of ``RESTART_MODES``; see :class:`RestartPolicy`."""
    restart_limit: int | None = DEFAULT_RESTART_LIMIT
    restart_delay_s: float = DEFAULT_RESTART_DELAY_S
    shell: bool = False
    """``cmd`` was a string (``argv[-1]`` is it): show that rather than ``/bin/sh -c ...``."""

    @property
    def command_text(self) -> str:
        """The command as the user wrote it, for titles and messages.

        >>> AgentEntry("ls", ("ls", "-l", "my file")).command_text
        "ls -l 'my file'"
        """
        return self.argv[-1] if self.shell else shlex.join(self.argv)

    @property
    def restart_policy(self) -> RestartPolicy:
        """This entry's :class:`RestartPolicy`."""
        return RestartPolicy(self.restart, self.restart_limit, self.restart_delay_s)

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (e.g. ``os.environ``) with this entry's ``env`` applied: set, or unset for ``None``.

        >>> AgentEntry("a", ("true",), env={"A": "1", "HOME": None}).environ({"HOME": "/h", "X": "x"})
        {'X': 'x', 'A': '1'}
        """
        out = dict(base)
        for key, value in self.env.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out


def unique_names(names: Iterable[str], *, taken: Iterable[str] = ()) -> list[str]:
    """``names`` made unique by numbering repeats: ``python3``, ``python3#2``, ``python3#3``.

    A name is never one of ``taken`` nor an earlier output (``a, a, a#2`` gives ``a, a#2, a#2#2``
    rather than a second ``a#2``).

    >>> unique_names(["python3", "bash", "python3"])
    ['python3', 'bash', 'python3#2']
    """
    used = set(taken)
    out: list[str] = []
    for name in names:
        candidate, n = name, 1
        while candidate in used:
            n += 1
            candidate = f"{name}#{n}"
        used.add(candidate)
        out.append(candidate)
    return out


def entries_from_commands(commands: list[list[str]]) -> list[AgentEntry]:
    """The entries of ``flowplex agents -- CMD1 ARGS -- CMD2 ARGS``: named after each program.

    >>> [e.name for e in entries_from_commands([["python3"], ["/bin/bash"], ["python3", "-q"]])]
    ['python3', 'bash', 'python3#2']
    """
    for i, cmd in enumerate(commands):
        if not cmd or not cmd[0]:
            msg = f"command {i + 1} is empty; give a program after each `--`"
            raise ConfigError(msg)
    names = unique_names(os.path.basename(cmd[0]) or cmd[0] for cmd in commands)
    return [AgentEntry(name, tuple(cmd)) for name, cmd in zip(names, commands, strict=True)]


# --- the pydantic model of one agent -----------------------------------------------------------


def _reject(message: str, *sub: str | int) -> NoReturn:
    """Fail validation with our message; ``sub`` extends the field's path (``cmd[1]``)."""
    raise PydanticCustomError(_ERROR_KIND, "{message}", {"message": message, "sub": list(sub)})


def _as_text_hint(value: object) -> str:
    if isinstance(value, bool | int | float) or value is None:
        return "; quote it to pass it as text"
    return ""


def _check_text(value: str, *sub: str | int) -> None:
    if "\0" in value:
        _reject("contains a NUL character, which no program can receive", *sub)


def _check_name(value: object) -> object:
    if not isinstance(value, str):
        _reject(f"expected a string, got {describe_value(value)}{_as_text_hint(value)}")
    if not value.strip():
        _reject("expected a non-empty name")
    if any(unicodedata.category(c) == "Cc" for c in value):
        _reject(f"{value!r} contains a control character; names are shown in pane titles")
    return value


def _check_cmd(value: object) -> object:
    if isinstance(value, str):
        if not value.strip():
            _reject("expected a command, got an empty string")
        _check_text(value)
        return value
    if isinstance(value, list):
        if not value:
            _reject("expected at least the program, got an empty list")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                _reject(f"expected a string, got {describe_value(item)}{_as_text_hint(item)}", i)
            _check_text(item, i)
        if not value[0]:
            _reject("the program is an empty string", 0)
        return value
    got = describe_value(value)
    _reject(f'expected a list of arguments ([python3, -i]) or a shell command string ("make test"), got {got}')


def _check_cwd(value: object) -> object:
    if not isinstance(value, str):
        _reject(f"expected a directory path, got {describe_value(value)}{_as_text_hint(value)}")
    if not value:
        _reject("expected a directory path, got an empty string (leave `cwd` out for the current one)")
    _check_text(value)
    return value


def _check_env(value: object) -> object:
    if value is None:
        return {}
    if not isinstance(value, dict):
        got = describe_value(value)
        _reject(f"expected a mapping of variable names to strings (null unsets one), got {got}")
    for key, item in value.items():
        if not isinstance(key, str):
            _reject(f"expected a variable name, got {describe_value(key)}{_as_text_hint(key)}", str(key))
        if not key or "=" in key or "\0" in key:
            _reject(f"`{key}` is not a variable name (it must be non-empty, without `=`)", key)
        if item is not None and not isinstance(item, str):
            got = describe_value(item)
            _reject(f"expected a string, or null to unset the variable, got {got}{_as_text_hint(item)}", key)
        if item is not None:
            _check_text(item, key)
    return value


def _check_agent_type(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(AgentType):
        return AgentType(value).name.lower()
    if isinstance(value, str) and value.strip().lower() in _AGENT_TYPES:
        return value.strip().lower()
    shown = f"`{value}`" if isinstance(value, str) else describe_value(value)
    hint = did_you_mean(value.strip().lower(), _AGENT_TYPES) if isinstance(value, str) else ""
    _reject(f"unknown agent type {shown}{hint} (expected one of {', '.join(_AGENT_TYPES)})")


def _check_restart(value: object) -> object:
    if isinstance(value, str) and value in RESTART_MODES:
        return value
    shown = f"`{value}`" if isinstance(value, str) else describe_value(value)
    hint = did_you_mean(value, RESTART_MODES) if isinstance(value, str) else ""
    if not hint and isinstance(value, str) and value.replace("-", "_") in RESTART_MODES:
        hint = f"; did you mean `{value.replace('-', '_')}`?"
    _reject(f"unknown restart policy {shown}{hint} (expected never, on_failure or always)")


class _AgentModel(BaseModel):
    """One agent as written in the file (``name`` is optional: the mapping key, or the program)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="agent")

    name: Annotated[str | None, BeforeValidator(_check_name)] = Field(
        None, description="Unique name, shown in the pane title. Default: the mapping key, or the program's name.")
    cmd: Annotated[list[str] | str, BeforeValidator(_check_cmd)] = Field(
        description="The argv as a list ([python3, -i]), or a string run as `/bin/sh -c STRING`.")
    cwd: Annotated[str | None, BeforeValidator(_check_cwd)] = Field(
        None, description="Working directory; relative paths are relative to the agents file's directory.")
    env: Annotated[dict[str, str | None], BeforeValidator(_check_env)] = Field(
        default_factory=dict, description="Variables set on top of the inherited environment; null unsets one.")
    autostart: bool = Field(True, description="Start with the others (false: start it from the keyboard).")
    agent_type: Annotated[_AgentTypeName, BeforeValidator(_check_agent_type)] = Field(
        "info", description="The label and colour of the agent's lines.")
    restart: Annotated[Literal["never", "on_failure", "always"], BeforeValidator(_check_restart)] = Field(
        "never", description="Start it again after it exits: never, on_failure (non-zero or signal), always.")
    restart_limit: int | None = Field(
        DEFAULT_RESTART_LIMIT, ge=0,
        description="Consecutive restarts before giving up; null: no limit. A 30 s run resets the count.")
    restart_delay_s: float = Field(
        DEFAULT_RESTART_DELAY_S, ge=MIN_RESTART_DELAY_S,
        description="Delay of the first restart; doubled for each consecutive one, at most 60 s.")


_FIELDS: Final = tuple(_AgentModel.model_fields)


def agents_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the agents file, for editors."""
    agent = _AgentModel.model_json_schema()
    command = {"anyOf": [{"type": "array", "items": {"type": "string"}, "minItems": 1}, {"type": "string"}]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "flowplex agents file",
        "type": "object",
        "additionalProperties": False,
        "required": ["agents"],
        "properties": {
            "agents": {
                "description": "A list of agents (each with a name), or a mapping from name to agent or command.",
                "anyOf": [
                    {"type": "array", "items": agent, "minItems": 1},
                    {"type": "object", "additionalProperties": {"anyOf": [agent, command]}, "minProperties": 1},
                ],
            }
        },
    }


# --- loading -----------------------------------------------------------------------------------


def load_agents_file(path: str | os.PathLike[str]) -> list[AgentEntry]:
    """Read an agents file; relative ``cwd`` paths are relative to its directory.

    Raises:
        ConfigError: The file cannot be read, is not YAML, or an agent is invalid; the message
            starts with ``FILE:LINE: agents[i].field:``. A ``cwd`` that is not a directory is
            reported here too (``parse_agents_yaml`` does not look at the file system).
    """
    file = Path(path)
    name = os.fspath(path)
    text = read_text(file, f"agents file `{name}`")
    base = file.absolute().parent
    parsed, source = _parse(text, name, base)
    for where, model, entry in parsed:
        if entry.cwd is not None and not os.path.isdir(entry.cwd):
            what = "does not exist" if not os.path.exists(entry.cwd) else "is not a directory"
            relative = model.cwd is not None and not os.path.isabs(os.path.expanduser(model.cwd))
            note = f" (relative paths start at the file's directory, {base})" if relative else ""
            raise _error(source, (*where, "cwd"), f"directory {entry.cwd} {what}{note}")
    return [entry for _, _, entry in parsed]


def parse_agents_yaml(text: str, *, source: str = "<string>", base_dir: Path | None = None) -> list[AgentEntry]:
    """Parse an agents file's text.

    Args:
        text: The YAML document.
        source: The name shown in messages (``source:LINE: ...``).
        base_dir: What relative ``cwd`` paths are joined to; ``None`` leaves them relative (to
            the directory the agents will be started from).

    Raises:
        ConfigError: One line naming the source, the line, the path and what is wrong.

    >>> [(e.name, e.argv) for e in parse_agents_yaml("agents: {clock: date, repl: [python3, -i]}")]
    [('clock', ('/bin/sh', '-c', 'date')), ('repl', ('python3', '-i'))]
    """
    return [entry for _, _, entry in _parse(text, source, base_dir)[0]]


def _error(
    source: Source, path: YamlPath, what: str, *, agent: str = "", line_path: YamlPath | None = None
) -> ConfigError:
    """``file:LINE: path (agent `x`): what``."""
    prefix = source.prefix(path if line_path is None else line_path)
    label = format_path(path)
    context = f" (agent `{agent}`)" if agent else ""
    return ConfigError(f"{prefix}{label}{context}: {what}" if label else f"{prefix}{what}")


def _parse(
    text: str, name: str, base_dir: Path | None
) -> tuple[list[tuple[YamlPath, _AgentModel, AgentEntry]], Source]:
    """Each agent's ``(path, model, entry)``, and the document's line table."""
    data, source = parse_document(text, name)
    items = _agent_items(data, source)
    models: list[tuple[YamlPath, _AgentModel, str]] = []  # (path, model, name shown in errors)
    for path, key, raw in items:
        shown = key if key is not None else _raw_name(raw)
        if key is not None and isinstance(raw, str | list):
            raw = {"cmd": raw}  # Procfile style: `name: command`
        if not isinstance(raw, dict):
            got = describe_value(raw)
            what = f"expected a mapping with at least `cmd`, got {got}"
            if key is not None:
                what = f"expected a command or a mapping with at least `cmd`, got {got}"
            raise _error(source, path, what, agent="" if key is not None else shown)
        if key is not None and "name" in raw and raw["name"] != key:
            written = f"`name: {raw['name']}`" if isinstance(raw["name"], str) else describe_value(raw["name"])
            what = f"{written} differs from the key `{key}`; in the mapping form the key is the name"
            raise _error(source, (*path, "name"), what)
        models.append((path, _validate(raw, path, source, agent="" if key is not None else shown), key or ""))
    names = _names(models, source)
    parsed = [(path, model, _entry(model, entry_name, base_dir))
              for (path, model, _), entry_name in zip(models, names, strict=True)]
    return parsed, source


def _raw_name(raw: object) -> str:
    if isinstance(raw, dict):
        value = raw.get("name")
        if isinstance(value, str):
            return value
    return ""


def _agent_items(data: object, source: Source) -> list[tuple[YamlPath, str | None, object]]:
    """``(path, mapping key or None, raw agent)`` for each agent, in file order."""
    example = "e.g. `agents: {repl: [python3, -i]}`"
    if data is None:
        raise _error(source, (), f"the agents file is empty; expected an `agents:` list or mapping, {example}")
    if not isinstance(data, dict):
        raise _error(source, (), f"expected a mapping with an `agents` field, got {describe_value(data)}; {example}")
    for key in data:
        if key not in _TOP_KEYS:
            hint = did_you_mean(str(key), _TOP_KEYS) or ", expected `agents`"
            raise _error(source, (), f"unknown field `{key}`{hint}", line_path=(str(key),))
    if "agents" not in data:
        raise _error(source, (), f"missing field `agents`; {example}")
    agents = data["agents"]
    if isinstance(agents, list):
        items: list[tuple[YamlPath, str | None, object]] = [(("agents", i), None, raw) for i, raw in enumerate(agents)]
    elif isinstance(agents, dict):
        items = []
        for key, raw in agents.items():
            if not isinstance(key, str):
                what = f"agent names must be strings, got {describe_value(key)}; quote it"
                raise _error(source, ("agents",), what, line_path=("agents", str(key)))
            try:
                _check_name(key)
            except PydanticCustomError as exc:
                raise _error(source, ("agents", key), exc.context["message"] if exc.context else str(exc)) from None
            items.append((("agents", key), key, raw))
    else:
        what = f"expected a list of agents or a mapping from name to agent, got {describe_value(agents)}"
        raise _error(source, ("agents",), what)
    if not items:
        raise _error(source, ("agents",), f"no agents; add at least one, {example}")
    return items


def _validate(raw: dict[Any, Any], path: YamlPath, source: Source, *, agent: str) -> _AgentModel:
    """One agent's model, or the ``ConfigError`` of its first problem in file order."""
    try:
        return _AgentModel.model_validate(raw)
    except ValidationError as exc:
        problems = [_problem(error, path) for error in exc.errors(include_url=False)]
    # File order, but a missing field last: an unknown key next to it is usually the cause.
    at, line_at, what = min(problems, key=lambda p: (p[2].startswith("missing"), source.line_of(p[1]) or 0))
    raise _error(source, at, what, agent=agent, line_path=line_at) from None


def _problem(error: ErrorDetails, path: YamlPath) -> tuple[YamlPath, YamlPath, str]:
    """``(path shown, path of the line, message)`` of one pydantic error."""
    loc = tuple(error["loc"])
    key = str(loc[0]) if loc else ""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        # A near miss of another tool's key (`comand`) gets that key's hint.
        near = key if key in _RENAMED else suggest(key, (*_FIELDS, *_RENAMED))
        renamed = _RENAMED.get(near or "")
        hint = f"; {renamed}" if renamed else did_you_mean(key, _FIELDS)
        if not hint:
            hint = f", expected one of {', '.join(f'`{f}`' for f in _FIELDS)}"
        return path, (*path, key), f"unknown field `{key}`{hint}"
    if kind == "missing":
        what = f"missing field `{key}`"
        if key == "cmd":
            what += ' (a list of arguments, [python3, -i], or a shell string, "make test")'
        return path, path, what
    at: YamlPath = (*path, key) if key else path
    if kind == _ERROR_KIND:
        at = (*at, *ctx.get("sub", ()))
        return at, at, str(ctx["message"])
    got = describe_value(error.get("input"))
    if kind == "bool_type":
        return at, at, f"expected `true` or `false`, got {got}"
    if kind in ("int_type", "float_type"):
        noun = "an integer" if kind == "int_type" else "a number"
        extra = " or null for no limit" if key == "restart_limit" else ""
        return at, at, f"expected {noun}{extra}, got {got}"
    if kind == "greater_than_equal":
        return at, at, f"must be >= {ctx.get('ge')}, got {error.get('input')}"
    return at, at, f"{error['msg']} (got {got})"


def _names(models: list[tuple[YamlPath, _AgentModel, str]], source: Source) -> list[str]:
    """Each agent's name: the key, the ``name``, or the program's (numbered when repeated)."""
    explicit: dict[str, YamlPath] = {}
    for path, model, key in models:
        written = key or model.name
        if written is None:
            continue
        if written in explicit:
            first = format_path(explicit[written])
            what = f"duplicate agent name `{written}` (also {first}); names must be unique"
            raise _error(source, (*path, "name"), what)
        explicit[written] = path
    derived = unique_names((_program(model) for _, model, key in models if not (key or model.name)), taken=explicit)
    out: list[str] = []
    others = iter(derived)
    for _, model, key in models:
        out.append(key or model.name or next(others))
    return out


def _program(model: _AgentModel) -> str:
    """The default name: the program's basename (a shell string's first word)."""
    if isinstance(model.cmd, list):
        first = model.cmd[0]
    else:
        try:
            words = shlex.split(model.cmd)
        except ValueError:
            words = model.cmd.split()
        first = words[0] if words else "sh"
    return os.path.basename(first) or first


def _entry(model: _AgentModel, name: str, base_dir: Path | None) -> AgentEntry:
    shell = isinstance(model.cmd, str)
    argv = (*SHELL, model.cmd) if isinstance(model.cmd, str) else tuple(model.cmd)
    cwd = model.cwd
    if cwd is not None:
        cwd = os.path.expanduser(cwd)
        if base_dir is not None and not os.path.isabs(cwd):
            cwd = str(base_dir / cwd)
    return AgentEntry(
        name=name,
        argv=argv,
        cwd=cwd,
        env=MappingProxyType(dict(model.env)),
        autostart=model.autostart,
        agent_type=AgentType[model.agent_type.upper()],
        restart=model.restart,
        restart_limit=model.restart_limit,
        restart_delay_s=float(model.restart_delay_s),
        shell=shell,
    )
