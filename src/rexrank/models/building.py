"""One model built at a time in a process.

transformers builds a model under `torch.set_default_dtype(<its dtype>)` and sets the old
default back afterwards (`modeling_utils.local_torch_dtype`, transformers 5): the default is
the whole process's, not the thread's. Two builds at once in threads (a Space's handlers,
shards run as threads) then mix float16 and float32 weights in one model ("expected m1 and m2
to have the same dtype") or leave the process's default changed. Every model build in
rexrank holds this lock; a build takes seconds, so the wait is short."""
from __future__ import annotations

import threading

MODEL_BUILD_LOCK = threading.Lock()
