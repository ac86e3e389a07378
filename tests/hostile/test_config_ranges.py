"""Numeric settings have ranges, checked at build: the bound passes, one past it is a one-line error.

The ranges are ``flowplex.spec._ranges``; docs/limits.md lists them.
"""

from __future__ import annotations

import re

import pytest

import flowplex
from flowplex.config import load_yaml
from flowplex.errors import ConfigError
from flowplex.spec import _ranges as ranges

SOURCE = "{name: s, kernel: RangeSourceKernel, output_ports: [x]%s}"
POOL = "executors: [{name: p, num_threads: 2%s}]\n"
RAY = "executors: [{name: p, type: RayExecutor%s}]\n"


def _doc(head: str = "", node: str = "", executor: str = "") -> str:
    return f"{head}nodes: [{SOURCE % (node + executor)}]\noutput_ports: [x]\n"


def _pool(field: str) -> str:
    return _doc(POOL % f", {field}", executor=", executor: p")


def _ray(field: str) -> str:
    return _doc(RAY % f", {field}", executor=", executor: p")


def _policy(field: str) -> str:
    return (f"nodes: [{SOURCE % ''}, {{name: f, kernel: PassThroughKernel, input_ports: [x], output_ports: [y], "
            f"{field}}}]\noutput_ports: [y]\n")


# (document at the bound, document one past it, the message's path and range)
CASES = {
    "max_queue_size": (_doc(f"max_queue_size: {ranges.MAX_PACKETS}\n"),
                       _doc(f"max_queue_size: {ranges.MAX_PACKETS + 1}\n"),
                       r"^max_queue_size: must be in 0\.\.1000000000 packets, got 1000000001$"),
    "max_queued_packets": (_doc(f"max_queued_packets: {ranges.MAX_PACKETS}\n"),
                           _doc(f"max_queued_packets: {ranges.MAX_PACKETS + 1}\n"),
                           r"^max_queued_packets: must be in 0\.\.1000000000 packets \(0: unlimited\)"),
    "watchdog_ms": (_doc(f"watchdog_ms: {ranges.MAX_DELAY_MS}\n"), _doc(f"watchdog_ms: {ranges.MAX_DELAY_MS + 1}\n"),
                    r"^watchdog_ms: must be in 0\.\.86400000 ms \(0: off\), got 86400001$"),
    "buffer_pool_max_bytes": (_doc(f"buffer_pool_max_bytes: {ranges.MAX_BYTES}\n"),
                              _doc(f"buffer_pool_max_bytes: {ranges.MAX_BYTES + 1}\n"),
                              r"^buffer_pool_max_bytes: must be in 0\.\.1099511627776 bytes"),
    "trace_capacity": (_doc(f"trace_capacity: {ranges.MAX_TRACE_CAPACITY}\n"),
                       _doc(f"trace_capacity: {ranges.MAX_TRACE_CAPACITY + 1}\n"),
                       r"^trace_capacity: must be in 0\.\.100000000 events \(0: off\), got 100000001$"),
    "num_threads": (_pool(f"affinity: [0]}}, {{name: q, num_threads: {ranges.MAX_WORKERS}"),
                    _pool(f"affinity: [0]}}, {{name: q, num_threads: {ranges.MAX_WORKERS + 1}"),
                    r"^executors\[1\]\.num_threads: must be in 0\.\.1024, got 1025$"),
    "affinity": (_pool(f"affinity: [0, {ranges.MAX_CPU_ID}]"), _pool(f"affinity: [0, {ranges.MAX_CPU_ID + 1}]"),
                 r"^executors\[0\]\.affinity\[1\]: must be in 0\.\.8191 \(a CPU id\), got 8192$"),
    "num_processes": (_doc(f"executors: [{{name: p, type: ProcessPoolExecutor, "
                           f"num_processes: {ranges.MAX_WORKERS}}}]\n"),
                      _doc(f"executors: [{{name: p, type: ProcessPoolExecutor, "
                           f"num_processes: {ranges.MAX_WORKERS + 1}}}]\n"),
                      r"^executors\[0\]\.num_processes: must be in 0\.\.1024 \(0: one per CPU\), got 1025$"),
    "arena_bytes": (_doc(f"executors: [{{name: p, type: ProcessPoolExecutor, arena_bytes: {ranges.MAX_BYTES}}}]\n"),
                    _doc(f"executors: [{{name: p, type: ProcessPoolExecutor, arena_bytes: {ranges.MAX_BYTES + 1}}}]\n"),
                    r"^executors\[0\]\.arena_bytes: must be in 0\.\.1099511627776 bytes, got 1099511627777$"),
    "max_in_flight": (_doc(POOL % "", node=f", max_in_flight: {ranges.MAX_WORKERS}", executor=", executor: p"),
                      _doc(POOL % "", node=f", max_in_flight: {ranges.MAX_WORKERS + 1}", executor=", executor: p"),
                      r"^nodes\[0\]\.max_in_flight \(node `s`\): must be in 1\.\.1024, got 1025$"),
    "rate_low": (_doc(node=f", rate: {ranges.RATE_MIN_HZ}"), _doc(node=", rate: 9.9e-7"),
                 r"^nodes\[0\]\.rate \(node `s`\): must be in 1e-06\.\.1e\+09 Hz \(0: unpaced\), got 9\.9e-07$"),
    "rate_high": (_doc(node=f", rate: {ranges.RATE_MAX_HZ}"), _doc(node=", rate: 1.1e9"),
                  r"^nodes\[0\]\.rate \(node `s`\): must be in 1e-06\.\.1e\+09 Hz \(0: unpaced\), got 1\.1e\+09$"),
    "fixed_size_capacity": (_policy(f"input_policy: {{type: fixed_size, capacity: {ranges.MAX_PACKETS}}}"),
                            _policy(f"input_policy: {{type: fixed_size, capacity: {ranges.MAX_PACKETS + 1}}}"),
                            r"^nodes\[1\]\.input_policy\.capacity \(node `f`\): must be in 0\.\.1000000000 packets"),
    "input_queues": (_policy(f"input_queues: {{packets: {ranges.MAX_PACKETS}}}"),
                     _policy(f"input_queues: {{packets: {ranges.MAX_PACKETS + 1}}}"),
                     r"^nodes\[1\]\.input_queues\.packets \(node `f`\): must be in 0\.\.1000000000 \(0: unlimited\)"),
    "input_queue_port": (_policy(f"input_queues: {{ports: {{x: {{packets: {ranges.MAX_PACKETS}}}}}}}"),
                         _policy(f"input_queues: {{ports: {{x: {{packets: {ranges.MAX_PACKETS + 1}}}}}}}"),
                         r"^nodes\[1\]\.input_queues\.ports\.x\.packets \(node `f`\): must be in 0\.\.1000000000"),
    "timestamp_value": (
        f"nodes: [{SOURCE % ''}, {{name: r, type: route, input_ports: [x], output_ports: [y], "
        f"routes: [{{to: y, when: {{timestamp: {{op: gt, value: {ranges.TS_MAX}}}}}}}]}}]\noutput_ports: [y]\n",
        f"nodes: [{SOURCE % ''}, {{name: r, type: route, input_ports: [x], output_ports: [y], "
        f"routes: [{{to: y, when: {{timestamp: {{op: gt, value: {ranges.TS_MAX + 1}}}}}}}]}}]\noutput_ports: [y]\n",
        r"^nodes\[1\]\.routes\[0\]\.when\.timestamp\.value \(node `r`\): must be in -9223372036854775805\.\."
        r"9223372036854775804 \(a timestamp\), got 9223372036854775805$"),
    "ray_num_cpus": (_ray(f"num_cpus: {ranges.MAX_RAY_AMOUNT}"), _ray("num_cpus: 1.5e6"),
                     r"^executors\[0\]\.num_cpus: must be in 0\.\.1e\+06, got 1\.5e\+06$"),
    "ray_resources": (_ray(f"resources: {{cam: {ranges.MAX_RAY_AMOUNT}}}"), _ray("resources: {cam: 1.5e6}"),
                      r"^executors\[0\]\.resources\.cam: must be in 0\.\.1e\+06, got 1\.5e\+06$"),
    "ray_memory": (_ray(f"memory: {ranges.MAX_BYTES}"), _ray(f"memory: {ranges.MAX_BYTES + 1}"),
                   r"^executors\[0\]\.memory: must be in 0\.\.1099511627776 bytes"),
    "ray_max_batch": (_ray(f"max_batch: {ranges.MAX_BATCH}"), _ray(f"max_batch: {ranges.MAX_BATCH + 1}"),
                      r"^executors\[0\]\.max_batch: must be in 1\.\.1000000, got 1000001$"),
    "ray_max_batch_delay_ms": (_ray(f"max_batch_delay_ms: {ranges.MAX_DELAY_MS}"), _ray("max_batch_delay_ms: 1e8"),
                               r"^executors\[0\]\.max_batch_delay_ms: must be in 0\.\.86400000 ms, got 1e\+08$"),
    "ray_max_restarts": (_ray(f"max_restarts: {ranges.MAX_RESTARTS}"), _ray(f"max_restarts: {ranges.MAX_RESTARTS + 1}"),
                         r"^executors\[0\]\.max_restarts: must be in 0\.\.1000000, got 1000001$"),
}


@pytest.mark.parametrize("field", sorted(CASES))
def test_numeric_range(field: str) -> None:
    at_bound, past_bound, pattern = CASES[field]
    load_yaml(at_bound)
    with pytest.raises(ConfigError) as info:
        load_yaml(past_bound)
    message = str(info.value)
    assert re.search(pattern, message), f"{message!r} does not match {pattern!r}"


def test_ranges_are_checked_for_hand_built_specs_too() -> None:
    import dataclasses

    spec = load_yaml(_doc())
    node = dataclasses.replace(spec.nodes[0], rate=1e-300)
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.rate \(node `s`\): must be in 1e-06\.\.1e\+09 Hz"):
        flowplex.Graph.from_spec(dataclasses.replace(spec, nodes=(node,)))
    renamed = dataclasses.replace(spec.nodes[0], name="s\x1b[2J")
    with pytest.raises(ConfigError, match=r"^nodes\[0\]\.name \(node `s\\x1b\[2J`\): node name `s\\x1b\[2J` contains "
                                          r"the control character \\x1b; names must be printable$"):
        flowplex.Graph.from_spec(dataclasses.replace(spec, nodes=(renamed,)))


@pytest.mark.parametrize(("where", "text"), [
    ("nodes[0].name", '{name: "a\\x85", kernel: RangeSourceKernel, output_ports: [x]}'),
    ("nodes[0].output_ports[0]", '{name: a, kernel: RangeSourceKernel, output_ports: ["x\\x7f"]}'),
    ("nodes[0].kernel", '{name: a, kernel: "K\\t", output_ports: [x]}'),
    ("nodes[0].executor", '{name: a, kernel: K, executor: "e\\n", output_ports: [x]}'),
])
def test_control_characters_in_names_are_refused(where: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(f"nodes: [{text}]\n")
    message = str(info.value)
    assert message.startswith(where + " ")
    assert re.search(r"contains the control character \\x[0-9a-f]{2}; names must be printable$", message)
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", message)
