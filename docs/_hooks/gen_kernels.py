"""The built-in kernels page, written from the kernel registry: contracts and docstrings.

Every name ``flowplex.registered_kernels()`` lists is on the page, the lazily provided ones
included (their module is imported to read them), so a kernel added to the registry appears
without editing any page. A kernel whose module cannot be imported here (an optional extra is
missing) is listed with the reason instead of failing the build.

The contract is read by running the kernel's ``get_contract`` against a recorder that notes each
declaration, because a real ``Contract`` cannot tell "declared any type" from "undeclared".
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

_INVALID_ID = 2**64 - 1
_PROBE_PORTS = 3
"""Port count the recorder reports, for contracts that loop over ``num_inputs``/``num_outputs``."""

_FAMILIES = {
    "flowplex.kernels._math": "Integer streams",
    "flowplex.kernels._flow": "Flow and sources",
    "flowplex.kernels._tensor": "Buffers (numpy)",
    "flowplex.agents": "Agents and the terminal",
    "flowplex.transport": "Shared-memory ring",
    "flowplex.media": "Media",
    "flowplex.testing": "Testing helpers (`flowplex.testing`)",
}
"""Section titles by module prefix; any other module gets a section named after it."""

_INTRO = """\
# Built-in kernels

Every kernel flowplex registers, generated from the kernel registry: the class docstring, and
what its `get_contract` declares (port types checked at graph build and per packet, and side
packets that must be set before `start`). A port the contract does not name accepts any packet.
Use them by name in a node's `kernel:`; `flowplex.registered_kernels()` lists the same names.

lm-flow's 18 built-ins keep their lm-flow names, options and outputs, so graphs written for
lm-flow give the same results.
"""


@dataclass
class ContractRecord:
    """What one ``get_contract`` declared, in call order."""

    inputs: dict[int, str] = field(default_factory=dict)
    outputs: dict[int, str] = field(default_factory=dict)
    side_packets: list[str] = field(default_factory=list)
    every_input: str | None = None
    every_output: str | None = None


class _Recorder:
    """Stands in for ``flowplex.Contract``: same methods, records instead of checking."""

    def __init__(self, type_name: Any) -> None:
        self.record = ContractRecord()
        self._type_name = type_name
        self.num_inputs = _PROBE_PORTS
        self.num_outputs = _PROBE_PORTS

    def input_id(self, tag: str, index: int = 0) -> int:
        return _INVALID_ID  # untagged ports: kernels fall back to their positional defaults

    def output_id(self, tag: str, index: int = 0) -> int:
        return _INVALID_ID

    def input_index(self, name: str) -> int:
        return _INVALID_ID

    def output_index(self, name: str) -> int:
        return _INVALID_ID

    def input_name(self, index: int) -> str:
        return ""

    def output_name(self, index: int) -> str:
        return ""

    def input_set_any(self, index: int) -> None:
        self.record.inputs[index] = "any type"

    def output_set_any(self, index: int) -> None:
        self.record.outputs[index] = "any type"

    def input_set_type(self, index: int, type_id: int) -> None:
        self.record.inputs[index] = self._type_name(type_id)

    def output_set_type(self, index: int, type_id: int) -> None:
        self.record.outputs[index] = self._type_name(type_id)

    def require_side_packet(self, name: str) -> None:
        self.record.side_packets.append(name)

    def first_error(self) -> str | None:
        return None


def read_contract(cls: type, type_name: Any) -> ContractRecord | None:
    """What ``cls.get_contract`` declares, or ``None`` for a kernel without one."""
    get_contract = getattr(cls, "get_contract", None)
    if get_contract is None:
        return None
    recorder = _Recorder(type_name)
    get_contract(recorder)
    record = recorder.record
    # A loop over every port shows as all probe ports declared alike: say "every port" instead.
    for side in ("inputs", "outputs"):
        table: dict[int, str] = getattr(record, side)
        if sorted(table) == list(range(_PROBE_PORTS)) and len(set(table.values())) == 1:
            setattr(record, "every_" + side.removesuffix("s"), next(iter(table.values())))
            table.clear()
    return record


def render() -> str:
    """The Markdown page for every registered kernel."""
    import flowplex
    import flowplex.testing  # registers the test helpers' kernels (ScriptedSource, CollectSink)
    from flowplex.kernels import kernel_class
    from flowplex.packets import type_name

    sections: dict[str, list[str]] = {}
    index: list[tuple[str, str, str]] = []
    for name in flowplex.registered_kernels():
        try:
            cls = kernel_class(name)
        except Exception as exc:  # a provider needing an extra that is not installed
            family = "Needing an optional extra"
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            summary = "(not importable here)"
            body = (f"### `{name}` {{ #{_anchor(name)} }}\n\n!!! note \"Not importable where this site was built\"\n"
                    f"    {reason}. Install the extra that provides it to use it.\n")
        else:
            family = _family(cls.__module__)
            summary = (inspect.getdoc(cls) or "").split("\n", 1)[0] if cls.__doc__ else ""
            try:
                contract: ContractRecord | str | None = read_contract(cls, type_name)
            except Exception as exc:  # a contract the recorder cannot answer: say so, keep the page
                contract = " ".join(f"{type(exc).__name__}: {exc}".split())
            body = _kernel_section(name, cls, contract)
        sections.setdefault(family, []).append(body)
        index.append((name, family, _ROLE.sub(_role_text, summary)))

    parts = [_INTRO, "| kernel | what it does | family |", "|---|---|---|"]
    parts += [f"| [`{name}`](#{_anchor(name)}) | {summary.replace('|', '/')} | {family} |"
              for name, family, summary in index]
    parts.append("")
    for family in sorted(sections, key=_family_order):
        parts.append(f"## {family}\n")
        parts.extend(sections[family])
    return "\n".join(parts)


def _kernel_section(name: str, cls: type, contract: ContractRecord | str | None) -> str:
    lines = [f"### `{name}` {{ #{_anchor(name)} }}\n"]
    doc = inspect.getdoc(cls) or ""
    if not doc or cls.__doc__ is None:
        doc = "*(no docstring)*"
    lines.append(docstring_to_markdown(doc))
    lines.append("")
    lines.append(_contract_text(contract))
    lines.append(f"Defined in `{cls.__module__}` as `{cls.__qualname__}`.\n")
    return "\n".join(lines)


def _contract_text(contract: ContractRecord | str | None) -> str:
    if isinstance(contract, str):
        return f"**Contract:** could not be read where this site was built ({contract}).\n"
    if contract is None:
        return "**Contract:** none declared (every port accepts any type).\n"
    items: list[str] = []
    if contract.every_input:
        items.append(f"every input: {contract.every_input}")
    items += [f"input {i}: {t}" for i, t in sorted(contract.inputs.items())]
    if contract.every_output:
        items.append(f"every output: {contract.every_output}")
    items += [f"output {i}: {t}" for i, t in sorted(contract.outputs.items())]
    items += [f"side packet `{s}` required" for s in contract.side_packets]
    if not items:
        return "**Contract:** declares nothing (every port accepts any type).\n"
    return "**Contract:** " + "; ".join(items) + ".\n"


_SECTION = re.compile(r"^([A-Z][\w -]*):$")
_LABEL = re.compile(r"^([A-Z][\w-]*(?: [\w-]+)?):(\s)")
_ROLE = re.compile(r":(?:class|mod|func|meth|attr|data|exc|obj):`~?([^`]+)`")


def docstring_to_markdown(doc: str) -> str:
    """A Google-style docstring as Markdown.

    A section (``Options:`` followed by indented ``key: text`` items) becomes a bold title and a
    bullet list; a paragraph that opens with a label (``Ports: ...``) gets the label in bold;
    Sphinx roles (``:class:`~a.B```) become code. Everything else is kept as written.
    """
    doc = _ROLE.sub(_role_text, doc)
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    at_paragraph_start = True
    while i < len(lines):
        line = lines[i]
        section = _SECTION.match(line)
        if section and i + 1 < len(lines) and lines[i + 1].startswith("    "):
            out.append(f"**{section.group(1)}:**\n")
            i += 1
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                text = lines[i]
                if text.startswith("        ") and out and out[-1].startswith("- "):
                    out[-1] += " " + text.strip()
                elif text.strip():
                    key, sep, rest = text.strip().partition(": ")
                    out.append(f"- `{key}`: {rest}" if sep and len(key) < 40 else f"- {text.strip()}")
                i += 1
            out.append("")
            at_paragraph_start = True
            continue
        if not line.strip():
            out.append("")
            at_paragraph_start = True
        else:
            labelled = _LABEL.match(line)
            if labelled and not at_paragraph_start and out and out[-1].rstrip().endswith((".", ":")):
                out.append("")  # a label inside a paragraph (``Options: none.``) starts its own
                at_paragraph_start = True
            if at_paragraph_start and labelled:
                line = _LABEL.sub(lambda m: f"**{m.group(1)}:**{m.group(2)}", line, count=1)
            out.append(line)
            at_paragraph_start = False
        i += 1
    return "\n".join(out).strip() + "\n"


def _role_text(m: re.Match[str]) -> str:
    """``:class:`~a.b.C``` reads ``C``; without the tilde, the whole path."""
    target = m.group(1)
    return f"`{target.rsplit('.', 1)[-1]}`" if "~" in m.group(0) else f"`{target}`"


def _family(module: str) -> str:
    for prefix, title in _FAMILIES.items():
        if module == prefix or module.startswith(prefix + "."):
            return title
    return f"From `{module}`"


def _family_order(family: str) -> tuple[int, str]:
    titles = list(_FAMILIES.values())
    return (titles.index(family), "") if family in titles else (len(titles), family)


def _anchor(name: str) -> str:
    """The id of a kernel's heading (set explicitly, so that links never depend on slug rules)."""
    return "kernel-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
