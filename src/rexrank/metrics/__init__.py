"""Metric implementations. Each one implements `rexrank.metrics.base.Metric`."""
