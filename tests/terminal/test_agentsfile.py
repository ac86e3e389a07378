"""The agents file of ``flowplex agents -f`` (issue 16, "A config file"): shapes, errors, restarts.

Valid files are parsed into entries and compared field by field; every kind of mistake is
checked by its whole message (file, line, path, what, hint); a parsed entry is run as a real
subprocess to show that ``cwd`` and ``env`` mean what the file says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowplex.errors import ConfigError
from flowplex.terminal._agentsfile import (
    _AGENT_TYPES,
    DEFAULT_RESTART_LIMIT,
    MAX_RESTART_DELAY_S,
    SHELL,
    AgentEntry,
    RestartPolicy,
    _AgentTypeName,
    agents_json_schema,
    entries_from_commands,
    load_agents_file,
    parse_agents_yaml,
    unique_names,
)
from flowplex.transport import AgentType

EXAMPLE = Path(__file__).parents[2] / "examples" / "agents_team.yaml"


def parse(text: str, base_dir: Path | None = None) -> list[AgentEntry]:
    return parse_agents_yaml(text, source="team.yaml", base_dir=base_dir)


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    # One line of our text: no pydantic report, no chained engine frames.
    assert "\n" not in message
    assert "pydantic" not in message.lower() and "validation error" not in message.lower()
    assert info.value.__suppress_context__ or info.value.__context__ is None
    return message


# --- valid files ---------------------------------------------------------------------------------


def test_the_list_form_and_the_mapping_form_give_the_same_entries() -> None:
    listed = parse("""
agents:
  - name: repl
    cmd: [python3, -i]
    agent_type: assistant
  - name: clock
    cmd: "while true; do date; sleep 1; done"
    restart: always
""")
    mapped = parse("""
agents:
  repl: {cmd: [python3, -i], agent_type: assistant}
  clock:
    cmd: "while true; do date; sleep 1; done"
    restart: always
""")
    assert listed == mapped
    repl, clock = listed
    assert repl == AgentEntry("repl", ("python3", "-i"), agent_type=AgentType.ASSISTANT)
    assert clock.argv == (*SHELL, "while true; do date; sleep 1; done")
    assert clock.shell and clock.command_text == "while true; do date; sleep 1; done"
    assert clock.restart == "always" and clock.restart_policy.mode == "always"


def test_defaults() -> None:
    (entry,) = parse("agents: [{cmd: [top]}]")
    assert entry == AgentEntry(name="top", argv=("top",))
    assert (entry.cwd, dict(entry.env), entry.autostart, entry.agent_type, entry.restart) == (
        None, {}, True, AgentType.INFO, "never")
    assert (entry.restart_limit, entry.restart_delay_s, entry.shell) == (DEFAULT_RESTART_LIMIT, 1.0, False)


def test_procfile_style_name_to_command() -> None:
    web, worker = parse("agents:\n  web: python3 -m http.server\n  worker: [python3, worker.py]\n")
    assert web.argv == ("/bin/sh", "-c", "python3 -m http.server") and web.name == "web"
    assert worker.argv == ("python3", "worker.py")


def test_names_default_to_the_program_and_are_made_unique_around_the_written_ones() -> None:
    entries = parse("""
agents:
  - cmd: [/usr/bin/python3, -q]
  - cmd: "python3 -c 'print(1)'"
  - {name: python3#2, cmd: [bash]}
  - cmd: [bash]
""")
    assert [e.name for e in entries] == ["python3", "python3#3", "python3#2", "bash"]


def test_agent_types_are_names_in_any_case_or_numbers() -> None:
    entries = parse("agents:\n  a: {cmd: x, agent_type: WARNING}\n  b: {cmd: x, agent_type: 3}\n")
    assert [e.agent_type for e in entries] == [AgentType.WARNING, AgentType.ERROR]
    assert get_args(_AgentTypeName) == _AGENT_TYPES == tuple(t.name.lower() for t in AgentType)


def test_an_empty_env_and_a_null_limit() -> None:
    (entry,) = parse("agents:\n  a: {cmd: x, env: , restart_limit: null, restart_delay_s: 2}\n")
    assert dict(entry.env) == {} and entry.restart_limit is None and entry.restart_delay_s == 2.0


def test_cwd_is_relative_to_base_dir_and_kept_as_written_without_one(tmp_path: Path) -> None:
    text = "agents:\n  a: {cmd: x, cwd: sub/dir}\n  b: {cmd: x, cwd: /abs}\n  c: {cmd: x, cwd: .}\n"
    assert [e.cwd for e in parse(text, tmp_path)] == [str(tmp_path / "sub" / "dir"), "/abs", str(tmp_path)]
    assert [e.cwd for e in parse(text)] == ["sub/dir", "/abs", "."]
    (home,) = parse("agents:\n  a: {cmd: x, cwd: ~/work}\n", tmp_path)
    assert home.cwd == os.path.expanduser("~/work")


def test_environ_sets_and_unsets() -> None:
    (entry,) = parse('agents:\n  a: {cmd: x, env: {ONE: "1", HOME: null, GONE: null}}\n')
    assert entry.env == {"ONE": "1", "HOME": None, "GONE": None}
    assert entry.environ({"HOME": "/h", "ONE": "0", "KEEP": "k"}) == {"ONE": "1", "KEEP": "k"}
    with pytest.raises(TypeError):
        entry.env["ONE"] = "2"  # type: ignore[index]  # the entry is frozen, its env too


def test_a_parsed_entry_runs_with_its_cwd_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work").mkdir()
    file = tmp_path / "agents.yaml"
    file.write_text("""
agents:
  probe:
    cmd: "echo $PWD; echo ${FLOWPLEX_TEST_SET-unset}; echo ${FLOWPLEX_TEST_GONE-unset}"
    cwd: work
    env: {FLOWPLEX_TEST_SET: "hello world", FLOWPLEX_TEST_GONE: null}
""")
    monkeypatch.setenv("FLOWPLEX_TEST_GONE", "inherited")
    monkeypatch.chdir("/")  # the cwd comes from the file's directory, not from here
    (entry,) = load_agents_file(file)
    out = subprocess.run(entry.argv, cwd=entry.cwd, env=entry.environ(os.environ), capture_output=True,
                         text=True, timeout=10, check=True).stdout.splitlines()
    assert out == [str(tmp_path / "work"), "hello world", "unset"]


def test_the_example_file_loads_and_its_programs_exist() -> None:
    entries = load_agents_file(EXAMPLE)
    assert [e.name for e in entries] == ["repl", "shell", "ticker", "flaky"]
    for entry in entries:
        assert shutil.which(entry.argv[0]), entry.argv[0]
        assert entry.cwd is None or os.path.isdir(entry.cwd)
    flaky = entries[-1]
    assert flaky.cwd == str(EXAMPLE.parent) and flaky.restart == "on_failure" and flaky.restart_limit == 3
    done = subprocess.run([sys.executable, *flaky.argv[1:]], cwd=flaky.cwd, capture_output=True, text=True,
                          timeout=20)
    assert done.stdout.splitlines()[-1] == f"exit {done.returncode}"


def test_entries_from_commands() -> None:
    entries = entries_from_commands([["python3"], ["/bin/bash", "-i"], ["python3", "-q"]])
    assert entries == [AgentEntry("python3", ("python3",)), AgentEntry("bash", ("/bin/bash", "-i")),
                       AgentEntry("python3#2", ("python3", "-q"))]
    with pytest.raises(ConfigError, match=r"^command 2 is empty; give a program after each `--`$"):
        entries_from_commands([["ls"], [""]])


# --- errors --------------------------------------------------------------------------------------

ERRORS = [
    # the document
    ("", "team.yaml: the agents file is empty; expected an `agents:` list or mapping, "
         "e.g. `agents: {repl: [python3, -i]}`"),
    ("- a\n", "team.yaml:1: expected a mapping with an `agents` field, got a list; "
              "e.g. `agents: {repl: [python3, -i]}`"),
    ("agent:\n  a: {cmd: x}\n", "team.yaml:1: unknown field `agent`; did you mean `agents`?"),
    ("version: 1\nagents: {a: x}\n", "team.yaml:1: unknown field `version`, expected `agents`"),
    ("agents: []\n", "team.yaml:1: agents: no agents; add at least one, e.g. `agents: {repl: [python3, -i]}`"),
    ("agents: 5\n", "team.yaml:1: agents: expected a list of agents or a mapping from name to agent, "
                    "got integer `5`"),
    ("agents:\n  - 5\n", "team.yaml:2: agents[0]: expected a mapping with at least `cmd`, got integer `5`"),
    ("agents:\n  a:\n", "team.yaml:2: agents.a: expected a command or a mapping with at least `cmd`, got null"),
    ("agents:\n  1: {cmd: x}\n", "team.yaml:2: agents: agent names must be strings, got integer `1`; quote it"),
    # names
    ("agents:\n  - {name: a, cmd: x}\n  - {name: b, cmd: y}\n  - {name: a, cmd: z}\n",
     "team.yaml:4: agents[2].name: duplicate agent name `a` (also agents[0]); names must be unique"),
    ("agents:\n  a: {cmd: x}\n  a: {cmd: y}\n", "team.yaml:3: agents: duplicate field `a`"),
    ("agents:\n  a: {cmd: x, name: b}\n",
     "team.yaml:2: agents.a.name: `name: b` differs from the key `a`; in the mapping form the key is the name"),
    ("agents:\n  - {name: '', cmd: x}\n", "team.yaml:2: agents[0].name: expected a non-empty name"),
    ('agents:\n  - {name: "a\\tb", cmd: x}\n',
     "team.yaml:2: agents[0].name (agent `a\tb`): 'a\\tb' contains a control character; "
     "names are shown in pane titles"),
    # fields
    ("agents:\n  - name: a\n    cmd: x\n    comand: y\n",
     "team.yaml:4: agents[0] (agent `a`): unknown field `comand`; use `cmd`: a list of arguments or a shell string"),
    ("agents:\n  - name: a\n    cmd: x\n    autostrat: false\n",
     "team.yaml:4: agents[0] (agent `a`): unknown field `autostrat`; did you mean `autostart`?"),
    ("agents:\n  a:\n    shell: make\n",
     "team.yaml:3: agents.a: unknown field `shell`; use `cmd: STRING`: a string runs through /bin/sh -c"),
    ("agents:\n  a: {cmd: x, colour: red}\n",
     "team.yaml:2: agents.a: unknown field `colour`, expected one of `name`, `cmd`, `cwd`, `env`, `autostart`, "
     "`agent_type`, `restart`, `restart_limit`, `restart_delay_s`"),
    ("agents:\n  - name: a\n    cwd: /tmp\n",
     'team.yaml:2: agents[0] (agent `a`): missing field `cmd` (a list of arguments, [python3, -i], '
     'or a shell string, "make test")'),
    # cmd
    ("agents:\n  a:\n    cmd: [sleep, 5]\n",
     "team.yaml:3: agents.a.cmd[1]: expected a string, got integer `5`; quote it to pass it as text"),
    ("agents:\n  a: {cmd: []}\n", "team.yaml:2: agents.a.cmd: expected at least the program, got an empty list"),
    ("agents:\n  a: {cmd: ['', x]}\n", "team.yaml:2: agents.a.cmd[0]: the program is an empty string"),
    ("agents:\n  a: {cmd: '  '}\n", "team.yaml:2: agents.a.cmd: expected a command, got an empty string"),
    ("agents:\n  a: {cmd: {x: 1}}\n",
     'team.yaml:2: agents.a.cmd: expected a list of arguments ([python3, -i]) or a shell command string '
     '("make test"), got a mapping'),
    ('agents:\n  a: {cmd: [echo, "a\\0b"]}\n',
     "team.yaml:2: agents.a.cmd[1]: contains a NUL character, which no program can receive"),
    # cwd, env
    ("agents:\n  a: {cmd: x, cwd: 5}\n",
     "team.yaml:2: agents.a.cwd: expected a directory path, got integer `5`; quote it to pass it as text"),
    ("agents:\n  a: {cmd: x, cwd: ''}\n",
     "team.yaml:2: agents.a.cwd: expected a directory path, got an empty string (leave `cwd` out for the "
     "current one)"),
    ("agents:\n  a:\n    cmd: x\n    env:\n      PORT: 8080\n",
     "team.yaml:5: agents.a.env.PORT: expected a string, or null to unset the variable, got integer `8080`; "
     "quote it to pass it as text"),
    ("agents:\n  a: {cmd: x, env: [A=1]}\n",
     "team.yaml:2: agents.a.env: expected a mapping of variable names to strings (null unsets one), got a list"),
    ("agents:\n  a: {cmd: x, env: {A=B: c}}\n",
     "team.yaml:2: agents.a.env.A=B: `A=B` is not a variable name (it must be non-empty, without `=`)"),
    # the other fields
    ("agents:\n  a: {cmd: x, agent_type: assitant}\n",
     "team.yaml:2: agents.a.agent_type: unknown agent type `assitant`; did you mean `assistant`? "
     "(expected one of system, user, assistant, error, warning, info, debug, trace)"),
    ("agents:\n  a: {cmd: x, agent_type: 9}\n",
     "team.yaml:2: agents.a.agent_type: unknown agent type integer `9` "
     "(expected one of system, user, assistant, error, warning, info, debug, trace)"),
    ("agents:\n  a: {cmd: x, restart: on-failure}\n",
     "team.yaml:2: agents.a.restart: unknown restart policy `on-failure`; did you mean `on_failure`? "
     "(expected never, on_failure or always)"),
    ("agents:\n  a: {cmd: x, restart: true}\n",
     "team.yaml:2: agents.a.restart: unknown restart policy boolean `true` (expected never, on_failure or always)"),
    ("agents:\n  a: {cmd: x, autostart: yes}\n",
     'team.yaml:2: agents.a.autostart: expected `true` or `false`, got string "yes"'),
    ("agents:\n  a: {cmd: x, restart_limit: -1}\n", "team.yaml:2: agents.a.restart_limit: must be >= 0, got -1"),
    ("agents:\n  a: {cmd: x, restart_limit: 2.5}\n",
     "team.yaml:2: agents.a.restart_limit: expected an integer or null for no limit, got float `2.5`"),
    ("agents:\n  a: {cmd: x, restart_delay_s: 0}\n", "team.yaml:2: agents.a.restart_delay_s: must be >= 0.1, got 0"),
    ("agents:\n  a: {cmd: x, restart_delay_s: soon}\n",
     'team.yaml:2: agents.a.restart_delay_s: expected a number, got string "soon"'),
    # YAML itself
    ("agents: [\n", "team.yaml:2: YAML parse failed: while parsing a flow node, did not find expected node "
                    "content at line 2 column 1"),
    ("agents:\n  a: {cmd: x\n  b: y\n", "team.yaml:3: YAML parse failed: while parsing a flow mapping, did not "
                                        "find expected ',' or '}' at line 3 column 4"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_error_messages(text: str, message: str) -> None:
    assert error_of(text) == message


def test_the_first_problem_in_file_order_is_reported() -> None:
    text = "agents:\n  a:\n    restart: sometimes\n    cmd: [x, 1]\n    autostart: 0\n"
    assert error_of(text).startswith("team.yaml:3: agents.a.restart: unknown restart policy `sometimes`")


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=rf"^agents file `{re.escape(str(missing))}` cannot be read: "
                                          r"No such file or directory"):
        load_agents_file(missing)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"agents: {a: \xff}\n")
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(invalid start byte at byte 12\)$"):
        load_agents_file(binary)
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  a: {cmd: x, cwd: nowhere}\n  b: {cmd: x, cwd: /nonexistent/abs}\n")
    with pytest.raises(ConfigError) as info:
        load_agents_file(bad)
    assert str(info.value) == (f"{bad}:2: agents.a.cwd: directory {tmp_path / 'nowhere'} does not exist "
                               f"(relative paths start at the file's directory, {tmp_path})")
    (tmp_path / "nowhere").write_text("a file")
    with pytest.raises(ConfigError, match=r"agents\.a\.cwd: directory .*nowhere is not a directory"):
        load_agents_file(bad)
    (tmp_path / "nowhere").unlink()
    (tmp_path / "nowhere").mkdir()
    with pytest.raises(ConfigError, match=r"^.*bad\.yaml:3: agents\.b\.cwd: directory /nonexistent/abs does not "
                                          r"exist$"):
        load_agents_file(bad)


# --- round trip ------------------------------------------------------------------------------------

# Characters YAML can carry in a document (no surrogates, no C0/C1 controls, no BOM, no non-characters).
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff\ufffe\uffff"),
               max_size=12)
NAMES = TEXT.filter(lambda s: bool(s.strip()))
ARGV = st.lists(TEXT, min_size=1, max_size=4).filter(lambda argv: bool(argv[0]))
ENV = st.dictionaries(TEXT.filter(lambda k: bool(k) and "=" not in k), st.none() | TEXT, max_size=3)


@st.composite
def specs(draw: st.DrawFn) -> tuple[dict[str, object], AgentEntry]:
    """A random agent as the file writes it, and the entry it must give (name set later)."""
    shell = draw(st.booleans())
    cmd: str | list[str] = draw(NAMES) if shell else draw(ARGV)
    spec: dict[str, object] = {"cmd": cmd}
    expected: dict[str, object] = {"argv": (*SHELL, cmd) if isinstance(cmd, str) else tuple(cmd), "shell": shell}
    if draw(st.booleans()):
        cwd = "/" + draw(TEXT)
        spec["cwd"] = expected["cwd"] = cwd
    if draw(st.booleans()):
        spec["env"] = expected["env"] = draw(ENV)
    if draw(st.booleans()):
        spec["autostart"] = expected["autostart"] = draw(st.booleans())
    if draw(st.booleans()):
        kind = draw(st.sampled_from(AgentType))
        spec["agent_type"], expected["agent_type"] = kind.name.lower(), kind
    if draw(st.booleans()):
        spec["restart"] = expected["restart"] = draw(st.sampled_from(["never", "on_failure", "always"]))
    if draw(st.booleans()):
        spec["restart_limit"] = expected["restart_limit"] = draw(st.none() | st.integers(0, 1000))
    if draw(st.booleans()):
        spec["restart_delay_s"] = expected["restart_delay_s"] = draw(st.floats(0.1, 1e6))
    return spec, AgentEntry(name="", **expected)  # type: ignore[arg-type]


@given(st.lists(st.tuples(NAMES, specs()), min_size=1, max_size=5, unique_by=lambda pair: pair[0]),
       st.booleans())
def test_round_trip_through_json_in_both_forms(agents: list[tuple[str, tuple[dict[str, object], AgentEntry]]],
                                               as_mapping: bool) -> None:
    if as_mapping:
        document: object = {"agents": {name: spec for name, (spec, _) in agents}}
    else:
        document = {"agents": [{"name": name, **spec} for name, (spec, _) in agents]}
    text = json.dumps(document, ensure_ascii=False)  # JSON is YAML: the same document
    got = parse(text, Path("/unused"))
    want = [AgentEntry(**{**_fields(entry), "name": name}) for name, (_, entry) in agents]  # type: ignore[arg-type]
    assert got == want


def _fields(entry: AgentEntry) -> dict[str, object]:
    return {name: getattr(entry, name) for name in AgentEntry.__dataclass_fields__}


def test_the_json_schema_accepts_the_example_and_rejects_a_typo() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="the schema is checked with jsonschema when installed")
    import yaml

    schema = agents_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(yaml.safe_load(EXAMPLE.read_text()))
    validator.validate({"agents": {"web": "python3 -m http.server", "w": ["python3"]}})
    assert not validator.is_valid({"agents": [{"name": "a", "comand": ["x"]}]})
    assert not validator.is_valid({"agents": [{"name": "a", "cmd": ["x"], "restart": "sometimes"}]})


# --- names -----------------------------------------------------------------------------------------


@given(st.lists(st.sampled_from(["a", "b", "a#2", "python3"]), max_size=8),
       st.sets(st.sampled_from(["a", "a#3", "b#2"]), max_size=3))
def test_unique_names_are_unique_and_keep_what_they_can(names: list[str], taken: set[str]) -> None:
    out = unique_names(names, taken=taken)
    assert len(out) == len(names) and len(set(out)) == len(out) and not set(out) & taken
    for name, got in zip(names, out, strict=True):
        assert got == name or re.fullmatch(rf"{re.escape(name)}#\d+", got)
    if names and names[0] not in taken:
        assert out[0] == names[0]
    if len(set(names)) == len(names) and not set(names) & taken:
        assert out == names


# --- restarts --------------------------------------------------------------------------------------


def test_restart_modes() -> None:
    never, on_failure, always = (RestartPolicy(mode) for mode in ("never", "on_failure", "always"))
    assert [never.decide(code, 0).restart for code in (0, 1, -9)] == [False, False, False]
    assert [on_failure.decide(code, 0).restart for code in (0, 1, -9)] == [False, True, True]
    assert [always.decide(code, 0).restart for code in (0, 1, -9)] == [True, True, True]
    assert not always.decide(1, 0, stopped=True).restart  # the user's stop wins
    assert on_failure.decide(0, 0).reason == "exited 0 (restart: on_failure)"


def test_a_crash_loop_backs_off_and_stops_at_the_limit() -> None:
    policy = RestartPolicy("always", limit=10, delay_s=1.0)
    delays, count = [], 0
    while True:
        decision = policy.decide(1, count, uptime_s=0.01)
        if not decision.restart:
            break
        delays.append(decision.delay_s)
        count = decision.restarts
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0, 60.0]
    assert decision.reason == "restart limit 10 reached" and count == 10


def test_a_long_run_resets_the_count() -> None:
    policy = RestartPolicy("on_failure", limit=2)
    assert not policy.decide(1, 2, uptime_s=5.0).restart
    again = policy.decide(1, 2, uptime_s=30.0)
    assert (again.restart, again.delay_s, again.restarts, again.reason) == (True, 1.0, 1, "restart 1/2 in 1.0 s")


def test_restart_policy_of_an_entry() -> None:
    (entry,) = parse("agents:\n  a: {cmd: x, restart: on_failure, restart_limit: null, restart_delay_s: 0.5}\n")
    assert entry.restart_policy == RestartPolicy("on_failure", None, 0.5)
    assert entry.restart_policy.decide(1, 100).delay_s == MAX_RESTART_DELAY_S


@given(st.sampled_from(["on_failure", "always"]), st.none() | st.integers(0, 50), st.floats(0.1, 100.0),
       st.integers(-64, 255), st.integers(0, 10_000))
def test_restart_delays_are_bounded_and_grow(mode: str, limit: int | None, delay_s: float, code: int,
                                             restarts: int) -> None:
    policy = RestartPolicy(mode, limit, delay_s)
    decision = policy.decide(code, restarts)
    if not decision.restart:
        assert decision.delay_s == 0.0 and decision.restarts == restarts
        assert (mode == "on_failure" and code == 0) or (limit is not None and restarts >= limit)
        return
    assert min(delay_s, MAX_RESTART_DELAY_S) <= decision.delay_s <= MAX_RESTART_DELAY_S
    assert decision.restarts == restarts + 1
    later = policy.decide(code, decision.restarts)
    assert not later.restart or later.delay_s >= decision.delay_s


def test_the_documentation_examples_parse() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "agents-file.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    assert len(blocks) == 2
    assert [e.name for block in blocks for e in parse(block)] == ["repl", "tests", "logs", "repl", "bash"]
