"""The hosted layer: what every executor that runs kernels outside the engine shares.

The process pool (``executors.processes``) and Ray (``executors.ray``) both build on it: the wire
format of invocations and outcomes (``_codec``; the pool frames it in its arena,
``processes._transfer``), the requests that host a node (``_wire``) and the hosting itself
(``_hosting``), the dispatcher that runs an executor's background tasks (``_tasks``), and the
replicas of a node and which one runs a call (``_replicas``).
"""
