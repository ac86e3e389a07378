"""RayExecutor tests: real Ray (a session-scoped local instance; a two-node cluster in a subprocess)."""
