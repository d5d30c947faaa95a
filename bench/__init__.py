"""Benchmarks (not tests): each measures one performance target and returns rows for a table.

A benchmark is a function taking a work directory and returning ``Row`` values; it registers with
``@benchmark("name")``.  ``python -m bench`` imports every module listed in ``bench.__main__.MODULES``
and runs all registered benchmarks, or only those named on the command line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Row:
    """One measured number with its target, for the printed table."""

    benchmark: str
    metric: str
    value: str
    target: str = ""
    verdict: str = ""


BenchmarkFn = Callable[[Path], list[Row]]
REGISTRY: dict[str, BenchmarkFn] = {}


def benchmark(name: str) -> Callable[[BenchmarkFn], BenchmarkFn]:
    """Register a benchmark under ``name``."""

    def register(fn: BenchmarkFn) -> BenchmarkFn:
        REGISTRY[name] = fn
        return fn

    return register


def verdict(ok: bool, acceptable: bool | None = None) -> str:
    """``ok``, ``acceptable`` (within the softer bound) or ``MISSED``."""
    if ok:
        return "ok"
    if acceptable:
        return "acceptable"
    return "MISSED"
