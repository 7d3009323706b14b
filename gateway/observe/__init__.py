"""Observation: the request trace, logs and Prometheus metrics."""
