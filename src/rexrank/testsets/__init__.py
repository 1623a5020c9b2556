"""ReXrank test sets: their registry, the study schema, download and loading."""
