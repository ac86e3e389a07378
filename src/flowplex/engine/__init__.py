"""The engine: the scheduler's parts, bottom up, composed by ``Engine`` (nothing here is public API).

``_nodes`` (nodes, ports, edges and their pollers' queues), ``_status`` (state, lock,
counters), ``_budget`` (packets and bytes queued), ``_blocking`` (lossless capacity), ``_claims``
(readiness and claimed calls), ``_delivery`` (staged output to queues, pollers and observers: the
one packet path), ``_closing`` (end of stream), ``_timers`` and ``_sources`` (clock-driven and
source nodes), ``_seam`` (the executor's view of a call), ``_spill`` (one call's output in
slices), ``_loop`` (the scheduler loop), ``_pump`` (delegated work), ``_admission``
(graph-input sends), ``_waiting`` (host waits),
``_watchdog`` and ``_stalls`` (hangs and deadlocks), ``_snapshot`` (``EngineSnapshot``),
``_engine`` and ``_build`` (assembly).
The public facade over it is ``flowplex.graph``; the engine never imports the facade.
"""

__all__: list[str] = []
