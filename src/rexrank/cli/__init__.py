"""The `rexrank` command line."""
