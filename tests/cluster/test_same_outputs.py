"""Property: a graph gives the same outputs inline and with every node on a Ray executor.

The random DAGs of the process-pool property (``tests/processes/test_same_outputs.py``: fan-out,
joins, integer and buffer streams, stateful, filtering and batching nodes, replicas), run inline
and then with every node in a Ray actor of its own, calls batched and large buffers crossing by
object reference. Each example starts an actor per node (a few seconds), hence few examples.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, example, given, note, settings

from ..processes import test_same_outputs as same


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(scenario=same._rich())
@given(scenario=same.scenarios())
def test_a_graph_gives_the_same_outputs_inline_and_on_ray(on_ray: Any, scenario: same.Scenario) -> None:
    note(scenario.yaml("ray"))
    inline = same.run(scenario, "inline")
    got = same.run(scenario, "ray")
    for port in scenario.outputs:
        assert got[port] == inline[port], f"ray: output port {port}"
