"""Benchmark data: TPC-H via tpchgen-cli, the IMP synthetic workload, and delta generators."""

from sketch_core.datasets.deltas import Delta, DeltaGenerator
from sketch_core.datasets.synthetic import synthetic_table
from sketch_core.datasets.tpch import TPCH_SORT_KEYS, generate_tpch, load_tpch

__all__ = [
    "TPCH_SORT_KEYS",
    "Delta",
    "DeltaGenerator",
    "generate_tpch",
    "load_tpch",
    "synthetic_table",
]
