"""Programs written for lm-lmflow run unchanged after `import flowplex as lmflow`."""

from __future__ import annotations

import pytest

import flowplex as lmflow


@lmflow.kernel("CompatDouble")
class CompatDouble(lmflow.Kernel):
    def process(self, cc):  # type: ignore[no-untyped-def]
        cc.emit(0, cc.input(0).as_int() * 2)


def test_lmflow_docstring_example() -> None:
    # lm-lmflow's own module docstring example, verbatim apart from the kernel name.
    with lmflow.Graph.from_yaml('''
nodes:
  - { name: d, kernel: CompatDouble, input_ports: [in], output_ports: [out] }
input_ports: [in]
output_ports: [out]
''') as g:
        out = g.add_poller("out")
        g.start()
        g.input("in").send(21, ts=0)
        assert out.next().as_int() == 42
        g.close_all_inputs()
        g.wait_done()


@pytest.mark.executors("delegating", reason="lm-lmflow's own example: both nodes are pinned to `host`")
def test_builtin_kernels_graph_with_delegating_host() -> None:
    with lmflow.Graph.from_yaml('''
executors:
  - { name: host, type: DelegatingExecutor }
nodes:
  - { name: scale, kernel: ScaleKernel, executor: host, input_ports: [x], output_ports: [y], options: { factor: 5 } }
  - { name: sum, kernel: SumKernel, executor: host, input_ports: [y], output_ports: [total] }
input_ports: [x]
output_ports: [y, total]
''') as g:
        ys = g.add_poller("y")
        total = g.add_poller("total")
        g.start()
        for i in range(1, 5):
            g.input("x").send(i, ts=i)
        g.close_all_inputs()
        g.wait_done()
        assert [p.as_int() for p in ys] == [5, 10, 15, 20]
        t = total.next()
        assert t is not None and t.as_int() == 50 and t.timestamp == lmflow.TS_POST_STREAM
