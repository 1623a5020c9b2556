"""`python -m rexrank.backend.local_job FOLDER COMMAND...`: run one local Job
(rexrank.backend.jobs.LocalJobs): the command, killed at the Job's timeout, its exit
status written to FOLDER/rc for whoever looks later (a restarted dispatcher included)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    folder, command = Path(argv[0]), argv[1:]
    timeout = json.loads((folder / "job.json").read_text())["timeout"]
    proc = subprocess.Popen(command)
    message = None
    try:
        rc = proc.wait(timeout=timeout or None)
        if rc != 0:
            message = f"the command exited with status {rc}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc, message = 124, f"Job timeout: still running after {timeout} s"
    (folder / "rc.tmp").write_text(json.dumps({"rc": rc, "message": message, "finished": time.time()}))
    (folder / "rc.tmp").rename(folder / "rc")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
