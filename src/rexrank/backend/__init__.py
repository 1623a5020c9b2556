"""The scoring backend: claims requests from a store, scores them, writes results.
See rexrank.backend.worker.Worker and `rexrank backend`."""
