"""Tooling that is not library: the benchmark and the guided demo."""
