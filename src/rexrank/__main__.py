"""`python -m rexrank`: the `rexrank` command, for an environment whose scripts folder is not
on PATH."""
import sys

from rexrank.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
