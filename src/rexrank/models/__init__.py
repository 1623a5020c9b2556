"""Shared model plumbing: checkpoint resolution (hub id + revision or local path), device."""
