"""Shared helpers for towerpack's tests (processes, ports, timeouts)."""
