"""Hostile inputs and faults: what a user, a kernel or the machine can do to flowplex, each bounded in time."""
