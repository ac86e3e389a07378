"""Conditions and input timeouts: when a node may run, besides its inputs being ready.

A node with ``conditions`` or an input ``timeout_ms`` gets a ``Gate``; every other node has
``node.gate is None`` and pays one attribute test per claim on the general claim path (the
claim fast paths are turned off for gated nodes at build). A gate keeps ``node.claimable`` false
while one of its conditions does not hold, so that the claim rules, the hand-over and the hop
need no change:

- ``periodic``: after each claim the node is held until the end of its period (a timer holds
  ``busy``, so the graph is not idle meanwhile); a node without inputs is then a timer source.
  Periods follow a grid (each ends one period after the last one ended), so the timer's wake-up
  latency does not add up into drift; a claim a whole period late starts a new grid from now,
  so a node that was idle never bursts to catch up;
- ``count``: after N claims the node is held; a source then finishes when its Nth call returns;
- ``boolean``: held while its named flag is false (``Graph.set_condition``, ``cc.set_condition``);
- ``event``: each ``notify`` of its name lets one invocation run.

Input timeouts: when a join stalls at timestamp T for want of a packet on a port with a timeout,
a timer is armed; if the port still has nothing at or below T when it fires, the port's bound
moves past T (the join runs with it empty) and the timeout is counted. A packet that then
arrives at or below T is late: it is dropped at the next claim and counted (``late``).

Everything here runs under the engine's lock, except the timer callbacks, which take it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, final

from .._suggest import did_you_mean
from .._timestamps import next_allowed
from ..errors import StateError, UsageError
from ._status import DRAINING, INITIALIZED, RUNNING

if TYPE_CHECKING:
    from ..spec._specs import ConditionSpec
    from ._budget import Budget
    from ._claims import Claims
    from ._clock import Clock
    from ._closing import Closing
    from ._engine_common import Submission
    from ._nodes import InPort, Node
    from ._sources import Sources
    from ._status import Status


@final
class Gate:
    """The run-time state of one node's conditions and input timeouts."""

    __slots__ = ("booleans", "count", "due", "event", "events", "gen", "held", "left", "node", "owner",
                 "period_s", "ports")

    def __init__(self, owner: Conditions, node: Node, specs: tuple[ConditionSpec, ...]) -> None:
        self.owner = owner
        self.node = node
        self.period_s = 0.0
        self.count = 0
        self.booleans: list[str] = []
        self.event = ""
        for spec in specs:
            kind = spec.kind
            if kind == "periodic":
                self.period_s = spec.period_s
            elif kind == "count":
                self.count = spec.count
            elif kind == "boolean":
                self.booleans.append(spec.name)
            else:
                self.event = spec.name
        self.ports: list[InPort] = [p for p in node.fwd if p.timeout_s > 0] if len(node.fwd) > 1 else []
        """Ports with a timeout (a timeout matters only where a join waits for several inputs)."""
        self.left = self.count
        """``count``: claims left."""
        self.events = 0
        """``event``: notifications not yet consumed by a claim."""
        self.held = False
        """``periodic``: a period runs (its timer holds one ``busy``)."""
        self.gen = 0
        """Bumped by a reset or a cancel: a period's timer armed before then changes nothing."""
        self.due = 0.0
        """``periodic``: when the last period ended (the grid the next one follows)."""

    def holds(self) -> bool:
        """Whether every condition of the node holds now."""
        if self.held or (self.count and self.left <= 0) or (self.event and self.events <= 0):
            return False
        flags = self.owner.flags
        return all(flags[name] for name in self.booleans)

    def refresh(self) -> None:
        """Recompute ``node.claimable`` (opened, not closing, every condition holding)."""
        node = self.node
        node.claimable = node.opened and not node.close_started and self.holds()

    def claimed(self) -> bool:
        """Account one claim; returns whether the node may be claimed again now."""
        if self.count:
            self.left -= 1
        if self.event:
            self.events -= 1
        if self.period_s:
            self.held = True
            owner = self.owner
            owner.status.busy += 1
            gen = self.gen
            now = owner.clock()
            due = self.due + self.period_s
            if due <= now:  # a whole period late (idle, or slow work): a new grid starts now
                due = now + self.period_s
            self.due = due
            owner.sources.timer().add_call(due, self.node, lambda: self._period_over(gen))
        self.refresh()
        return self.node.claimable

    def finished(self) -> bool:
        """A ``count`` is used up: a source finishes when its last call returns."""
        return bool(self.count) and self.left <= 0

    def _period_over(self, gen: int) -> None:
        """Timer callback: the period is over; the node may run again."""
        owner = self.owner
        status = owner.status
        with status.lock:
            if gen != self.gen or not self.held:
                return  # reset or cancelled meanwhile: that settled the ``busy`` count
            self.held = False
            status.busy -= 1
            self.refresh()
            subs = owner.changed((self.node,))
        owner.submit(subs)

    def cancel(self) -> None:
        """Drop a running period (a cancel, a failure, a reset); lock held."""
        self.gen += 1
        if self.held:
            self.held = False
            self.owner.status.busy -= 1

    def reset(self) -> None:
        """Back to the state before ``start`` (``Graph.reset``); lock held."""
        self.cancel()
        self.left = self.count
        self.events = 0
        self.due = 0.0

    # -- input timeouts -------------------------------------------------------------------------

    def drop_late(self) -> None:
        """Drop packets that arrived on a timed-out port at or below the timestamp it gave up on."""
        budget = self.owner.budget
        for port in self.ports:
            q = port.queue
            while q and q[0]._ts < port.skip_below:
                budget.take_one(q.popleft())
                port.late += 1

    def stalled(self) -> None:
        """The join found nothing ready: arm the timeouts of the ports it waits on."""
        node = self.node
        heads = [p.queue[0]._ts for p in node.fwd if p.queue]
        if not heads:
            return
        ts = min(heads)
        owner = self.owner
        for port in self.ports:
            if port.closed or port.bound > ts or port.timer_for == ts or (port.queue and port.queue[0]._ts <= ts):
                continue
            port.timer_for = ts
            owner.sources.timer().add_call(owner.clock() + port.timeout_s, node,
                                           _Timeout(self, port, ts, self.gen))

    def timed_out(self, port: InPort, ts: int, gen: int) -> None:
        """Timer callback: ``port`` had nothing at ``ts`` for its whole timeout."""
        owner = self.owner
        status = owner.status
        with status.lock:
            if port.timer_for == ts:
                port.timer_for = None
            if (gen != self.gen or status.halted or port.closed or port.bound > ts
                    or (port.queue and port.queue[0]._ts <= ts)):
                return  # the packet came, or the graph stopped: nothing to give up on
            bound = next_allowed(ts)
            port.bound = bound
            port.skip_below = bound
            port.timeouts += 1
            subs = owner.changed((self.node,))
        owner.submit(subs)

    # -- for messages ---------------------------------------------------------------------------

    def holding(self) -> str:
        """Why the node may not run now, for a stall or timeout message ("" when nothing holds it)."""
        reasons: list[str] = []
        flags = self.owner.flags
        reasons.extend(f"disabled by condition '{name}'" for name in self.booleans if not flags[name])
        if self.event and self.events <= 0:
            reasons.append(f"waits for event '{self.event}' (Graph.notify)")
        if self.count and self.left <= 0:
            reasons.append(f"ran its count of {self.count}")
        if self.held:
            reasons.append(f"periodic: waits out its {self.period_s * 1e3:g} ms period")
        return ", ".join(reasons)

    def external(self) -> bool:
        """Held by a flag or an event that only something outside the graph can change."""
        flags = self.owner.flags
        return any(not flags[name] for name in self.booleans) or bool(self.event and self.events <= 0)


@final
class _Timeout:
    """An armed input timeout (a callable for the timer thread)."""

    __slots__ = ("gate", "gen", "port", "ts")

    def __init__(self, gate: Gate, port: InPort, ts: int, gen: int) -> None:
        self.gate = gate
        self.port = port
        self.ts = ts
        self.gen = gen

    def __call__(self) -> None:
        self.gate.timed_out(self.port, self.ts, self.gen)


class Conditions:
    """The graph's gates and its named flags and events."""

    def __init__(self, status: Status, budget: Budget, claims: Claims, closing: Closing, sources: Sources) -> None:
        self.status = status
        self.budget = budget
        self.claims = claims
        self.closing = closing
        self.sources = sources
        self.gates: list[Gate] = []
        self.flags: dict[str, bool] = {}
        """``boolean`` conditions by name: whether they hold."""
        self.initial: dict[str, bool] = {}
        self.by_flag: dict[str, list[Gate]] = {}
        self.by_event: dict[str, list[Gate]] = {}

    @property
    def clock(self) -> Clock:
        """The graph's clock (the sources' timer reads the same one)."""
        return self.sources.clock

    def set_clock(self, clock: Clock) -> None:
        """Run every timing rule on ``clock`` (before ``start``: no timer runs yet)."""
        if self.status.state != INITIALIZED or self.sources.has_timers():
            msg = "set_clock: give the graph its clock before start()"
            raise StateError(msg)
        self.sources.clock = clock

    # -- from the host and from kernels (any thread) ----------------------------------------------

    def set_condition(self, name: str, value: bool) -> None:
        """Enable or disable the nodes whose ``boolean`` condition is ``name``."""
        self._touch(self.set_flag, name, "boolean", self.flags, value)

    def notify_event(self, name: str) -> None:
        """Let each node whose ``event`` condition is ``name`` run once more."""
        self._touch(self.notify, name, "event", self.by_event)

    def kernel_op(self, op: str, name: str, value: bool) -> None:
        """``cc.notify`` / ``cc.set_condition`` from a kernel in this process."""
        if op == "notify":
            self.notify_event(name)
        else:
            self.set_condition(name, value)

    def _touch(self, op: Callable[..., list[Node]], name: str, kind: str, known: Collection[str],
               *args: object) -> None:
        if name not in known:
            names = sorted(known)
            listed = f" (its {kind} conditions: {', '.join(names)})" if names else f" (it has no {kind} condition)"
            msg = f"no {kind} condition named {name!r} in this graph{listed}{did_you_mean(name, names)}"
            raise UsageError(msg)
        status = self.status
        with status.lock:
            touched = op(name, *args)
            subs = self.changed(touched if status.state in (RUNNING, DRAINING) else ())
        self.submit(subs)

    def changed(self, nodes: tuple[Node, ...] | list[Node]) -> list[Submission]:
        """After a condition or a port of ``nodes`` changed: look at them again, wake the waiters,
        and take the work now ready (to submit once the lock is released); lock held."""
        if nodes:
            self.closing.rescan(nodes)
        self.status.bump()
        return self.claims.take()

    @staticmethod
    def submit(subs: list[Submission]) -> None:
        """Hand the work ``changed`` took to its executors (outside the lock)."""
        for executor, task, arg in subs:
            executor.submit_background(task, arg)

    def attach(self, node: Node, specs: tuple[ConditionSpec, ...]) -> None:
        """Give ``node`` a gate if it has conditions or input timeouts (at build)."""
        if not specs and not any(p.timeout_s > 0 for p in node.fwd):
            return
        gate = Gate(self, node, specs)
        node.gate = gate
        # The claim fast paths and the hop skip the readiness rules a gate adds.
        node.fast1 = None
        node.hop = False
        self.gates.append(gate)
        for spec in specs:
            kind = spec.kind
            if kind == "boolean":
                self.flags.setdefault(spec.name, spec.initial)
                self.initial.setdefault(spec.name, spec.initial)
                self.by_flag.setdefault(spec.name, []).append(gate)
            elif kind == "event":
                self.by_event.setdefault(spec.name, []).append(gate)

    def names(self) -> list[str]:
        """Every boolean and event name, for a did-you-mean."""
        return sorted({*self.flags, *self.by_event})

    def listing(self) -> dict[str, object]:
        """The boolean conditions' values and the event names, for a live graph's ``condition`` op."""
        with self.status.lock:
            return {"booleans": dict(sorted(self.flags.items())), "events": sorted(self.by_event)}

    def set_flag(self, name: str, value: bool) -> list[Node]:
        """Set boolean condition ``name``; returns the nodes to rescan; lock held."""
        self.flags[name] = value
        touched = []
        for gate in self.by_flag[name]:
            gate.refresh()
            touched.append(gate.node)
        return touched

    def notify(self, name: str) -> list[Node]:
        """One more occurrence of event ``name``; returns the nodes to rescan; lock held."""
        touched = []
        for gate in self.by_event[name]:
            gate.events += 1
            gate.refresh()
            touched.append(gate.node)
        return touched

    def cancel(self) -> None:
        """Drop every running period (a cancel or a failure); lock held."""
        for gate in self.gates:
            gate.cancel()

    def reset(self) -> None:
        """Back to the state before ``start``; lock held."""
        self.flags = dict(self.initial)
        for gate in self.gates:
            gate.reset()

    def opened(self) -> None:
        """After the opens: each gated node claimable only while its conditions hold; lock held."""
        for gate in self.gates:
            gate.refresh()

    def periods(self) -> int:
        """Running periods: each holds one ``busy`` (nothing runs for it meanwhile); lock held."""
        return sum(1 for g in self.gates if g.held)

    def quiet(self, nodes: list[Node]) -> bool:
        """Nothing runs but timers wait (an autojump clock may move to the next); lock held."""
        parked = self.sources.parked
        timed = sum(1 for n in nodes if n.waiting and n not in parked) + self.periods()
        return self.status.busy == timed and self.sources.has_timers()

    def externally_held(self, nodes: list[Node]) -> list[str]:
        """Unclosed nodes held by a flag or an event: the graph waits for the outside, not a deadlock."""
        return [f"node '{g.node.name}' {g.holding()}" for g in self.gates
                if not g.node.closed and g.external()]


Notify = Callable[[str], None]
"""``NodeInfo.notify`` / ``set_condition``: what a kernel's context calls (in-process nodes)."""
