"""RaTEScore building blocks: sentence splitting, NER span decoding, entity embeddings,
affinity matrices and the entity-matching score. `rexrank.metrics.ratescore` wires them
into a metric."""
