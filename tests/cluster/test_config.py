"""``type: RayExecutor`` in YAML: its fields, their errors, and what a graph without Ray says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import flowplex
from flowplex.errors import ConfigError
from flowplex.executors.ray import RayExecutor

from .conftest import need_ray

ROOT = Path(__file__).resolve().parents[2]

ONE = """
executors: [%s]
input_ports: [x]
output_ports: [y]
nodes:
  - { name: a, kernel: PassThroughKernel, executor: %s, input_ports: [x], output_ports: [y]%s }
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        flowplex.Graph.from_yaml(text)
    return str(info.value)


def test_every_field_reaches_the_executor() -> None:
    text = ONE % ("{ name: c, type: RayExecutor, address: auto, num_cpus: 2, num_gpus: 0.5, memory: 1048576, "
                  "resources: { camera: 1 }, max_batch: 16, max_batch_delay_ms: 0.5, max_restarts: 3 }", "c", "")
    g = flowplex.Graph.from_yaml(text)
    (ex,) = [e for e in g._engine.executors if isinstance(e, RayExecutor)]
    assert (ex.address, ex.num_cpus, ex.num_gpus, ex.memory, ex.resources, ex.max_batch, ex.max_batch_delay_ms,
            ex.max_restarts) == ("auto", 2.0, 0.5, 1048576, {"camera": 1.0}, 16, 0.5, 3)
    node = g._engine.nodes[0]
    assert node.max_in_flight == 16  # a batch of calls may be claimed ahead, flushed in order
    g.close()


def test_the_defaults_and_default_executor() -> None:
    text = "default_executor: c\n" + (ONE % ("{ name: c, type: RayExecutor }", "default", "")).replace(
        "executor: default, ", "")
    g = flowplex.Graph.from_yaml(text)
    (ex,) = [e for e in g._engine.executors if isinstance(e, RayExecutor)]
    assert (ex.address, ex.num_cpus, ex.num_gpus, ex.resources, ex.max_batch, ex.max_batch_delay_ms,
            ex.max_restarts) == (None, 1.0, 0.0, {}, 256, 2.0, 0)
    assert g.plan.node_executor[0] == 1
    g.close()


@pytest.mark.parametrize(("executor", "node", "pattern"), [
    ("{ name: c, type: RayExecutor, num_threads: 2 }", "",
     r"^executors\[0\]: RayExecutor runs kernels in Ray actors, so `num_threads`, `affinity`, and `priority` do not "
     r"apply; set `num_cpus` \(per actor\) instead$"),
    ("{ name: c, type: ThreadPoolExecutor, num_cpus: 2 }", "",
     r"^executors\[0\]\.num_cpus: `num_cpus` applies to RayExecutor only \(this executor is a ThreadPoolExecutor; "
     r"drop the field or change its `type`\)$"),
    ("{ name: c, type: ProcessPoolExecutor, max_batch: 2 }", "",
     r"^executors\[0\]\.max_batch: `max_batch` applies to RayExecutor only"),
    ("{ name: c, type: RayExecutor, max_batch: 0 }", "", r"^executors\[0\]\.max_batch: must be >= 1, got 0$"),
    ("{ name: c, type: RayExecutor, num_cpus: -1 }", "",
     r"^executors\[0\]\.num_cpus: expected a non-negative number, got integer `-1`$"),
    ("{ name: c, type: RayExecutor, resources: { camera: x } }", "", r"^executors\[0\]\.resources\.camera: "),
    ("{ name: c, type: RayExecutor, restart: on_failure }", "", r"^executors\[0\]\.restart: `restart` applies to "
     r"ProcessPoolExecutor only"),
    ("{ name: c, type: RayExecuter }", "", r"did you mean `RayExecutor`\?"),
    ("{ name: c, type: RayExecutor, address: ' ' }", "", r"^executors\[0\]\.address: must not be empty: omit it"),
    ("{ name: c, type: RayExecutor, num_cpus: .inf }", "", r"^executors\[0\]\.num_cpus: must be a finite number"),
])
def test_bad_fields_are_errors_with_their_path(executor: str, node: str, pattern: str) -> None:
    message = error_of(ONE % (executor, "c", node))
    assert __import__("re").search(pattern, message), message


def test_max_in_flight_on_ray_means_replicas_and_lossy_or_feedback_nodes_never_run_ahead() -> None:
    g = flowplex.Graph.from_yaml(ONE % ("{ name: c, type: RayExecutor, max_batch: 8 }", "c", ", max_in_flight: 3"))
    assert g._engine.nodes[0].max_in_flight == 24  # a batch per replica
    g.close()
    policy = ", input_policy: { type: fixed_size, capacity: 1 }"
    g = flowplex.Graph.from_yaml(ONE % ("{ name: c, type: RayExecutor, max_batch: 8 }", "c", policy))
    assert g._engine.nodes[0].max_in_flight == 1  # it drops what it is too slow to take
    g.close()


def python(code: str, *, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (real imports, real Ray or its absence)."""
    return subprocess.run([sys.executable, "-c", code.strip()], capture_output=True, text=True, cwd=cwd,
                          timeout=120, check=False, env={**os.environ, **(env or {})})


RAY_GRAPH = ONE % ("{ name: c, type: RayExecutor }", "c", "")


def test_import_flowplex_never_imports_ray() -> None:
    result = python(f"""
import sys, flowplex, flowplex.executors.ray, flowplex.testing
g = flowplex.Graph.from_yaml({RAY_GRAPH!r})
g.close()
print('ray' in sys.modules)
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_without_ray_a_graph_that_names_it_fails_at_start_with_the_install_line() -> None:
    # `sys.modules["ray"] = None` makes `import ray` raise ImportError, as when it is not installed.
    result = python(f"""
import sys
sys.modules["ray"] = None
import flowplex
g = flowplex.Graph.from_yaml({RAY_GRAPH!r})
try:
    g.start()
except flowplex.ConfigError as exc:
    print(exc)
finally:
    g.close()
""")
    assert result.returncode == 0, result.stderr
    assert "executor `c` is a RayExecutor, but Ray cannot be imported" in result.stdout
    assert "pip install 'flowplex[ray]'" in result.stdout


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from flowplex.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                          env={**os.environ, **(env or {})})


def test_info_says_whether_ray_is_installed_and_which_cluster_it_would_use() -> None:
    need_ray()
    result = cli("info")
    assert result.returncode == 0, result.stderr
    assert "ray: " in result.stdout and "installed; RayExecutor uses a new local Ray instance" in result.stdout
    result = cli("info", env={"FLOWPLEX_RAY_ADDRESS": "10.1.2.3:6379"})
    assert "RayExecutor uses the cluster at `10.1.2.3:6379` (from FLOWPLEX_RAY_ADDRESS)" in result.stdout


def test_run_with_an_address_nobody_listens_on_fails_at_start_naming_it(tmp_path: Path) -> None:
    need_ray()
    graph = tmp_path / "g.yaml"
    graph.write_text("""
executors: [{ name: c, type: RayExecutor }]
output_ports: [y]
nodes:
  - { name: s, kernel: RangeSourceKernel, executor: c, options: { count: 3 }, output_ports: [y] }
""")
    result = cli("run", str(graph), "--ray-address", "127.0.0.1:9")
    assert result.returncode != 0
    assert "cannot reach Ray at `127.0.0.1:9`" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_local_instance_flowplex_started_is_shut_down_at_close_and_a_script_kernel_runs_there() -> None:
    """The kernel is defined in the program itself (``python -c``: a ``__main__`` without a
    file, which no other process can import): it travels to its actor by value."""
    need_ray()
    graph = (ONE % ("{ name: c, type: RayExecutor, num_cpus: 0.5 }", "c", "")).replace("PassThroughKernel", "Plus1")
    result = python(f"""
import os, ray, flowplex

@flowplex.kernel("Plus1")
class Plus1(flowplex.Kernel):
    def process(self, cc):
        cc.emit(0, cc.input(0).as_int() + 1)

g = flowplex.Graph.from_yaml({graph!r})
out = g.add_poller("y")
g.start()
running = ray.is_initialized()
g.send("x", 41, ts=0)
g.close_all_inputs()
got = [p.payload for p in out]
g.wait_done(timeout=60)
g.close()
print(running, got, ray.is_initialized())
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "True [42] False"
