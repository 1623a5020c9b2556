"""A public ReXrank test set as a Hub dataset repo: one Parquet file of the studies in
ReXrank format (one row per study, with its id), a card stating the licence, so that
`datasets.load_dataset("ORG/<test set>")` loads it, and `eval.yaml`, the benchmark definition
that Eval Results in model repos link to (rexrank.hub.eval_results). Only test sets whose access is
"public" qualify; credentialed (MIMIC-CXR, CheXpert Plus) and private (ReXGradient) sets
are never uploaded, whatever --data-dir holds."""
from __future__ import annotations

import hashlib
import io
import tempfile
from pathlib import Path

from rexrank.hub.cards import card
from rexrank.hub.errors import DeployError
from rexrank.hub.eval_results import BENCHMARK_FILE, benchmark_yaml, data_split
from rexrank.testsets.registry import TestSetSpec

# what each public set's text may be republished under, and its source
LICENCES = {
    "iu_xray": {
        "license": "cc-by-nc-nd-4.0",
        "text": "The report text comes from the Open-i chest X-ray collection of Indiana University "
        "(IU-Xray; Demner-Fushman et al., 2016), distributed under **CC BY-NC-ND 4.0**: attribution, "
        "non-commercial use only, no derivatives. It is republished here unchanged; only the format "
        "changed (ReXrank's JSON object keyed by study id → one Parquet row per study with an `id` "
        "column; absent sections are null). The ReXrank JSON (rajpurkarlab/ReXrank, MIT) is the source. "
        "Images are not included: `image_path` names the IU-Xray image files.",
        "citation": """@article{demner2016preparing,
  title={Preparing a collection of radiology examinations for distribution and retrieval},
  author={Demner-Fushman, Dina and Kohli, Marc D and Rosenman, Marc B and others},
  journal={Journal of the American Medical Informatics Association}, volume={23}, number={2}, pages={304--310}, year={2016}
}
@article{zhang2024rexrank,
  title={ReXrank: A Public Leaderboard for AI-Powered Radiology Report Generation},
  author={Zhang, Xiaoman and Zhou, Hong-Yu and Yang, Xiaoli and others}, journal={arXiv preprint arXiv:2411.15122}, year={2024}
}""",
    },
}
DATA_FILE = "data/{split}-00000-of-00001.parquet"


def test_set_files(spec: TestSetSpec, data_dir: str | Path | None, repo_id: str) -> dict[str, bytes]:
    from rexrank.testsets.loading import load_all_studies, resolve_file

    if spec.access != "public" or spec.name not in LICENCES:
        raise DeployError(f"test set {spec.name} is {spec.access}: it is never uploaded")
    source = resolve_file(spec, data_dir)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if spec.download is not None and digest != spec.download.sha256:
        raise DeployError(f"{source}: sha256 {digest} is not the pinned ReXrank file "
                          f"({spec.download.sha256}); only that file is published as {spec.name}")
    with tempfile.TemporaryDirectory(prefix="rexrank-deploy-") as cache:
        studies = load_all_studies(spec.name, data_dir=source, cache_dir=cache)
        buffer = io.BytesIO()
        studies.to_parquet(buffer)
    path = DATA_FILE.format(split=data_split(spec))
    # eval.yaml: the benchmark definition the Hub reads to show a leaderboard of Eval Results
    return {path: buffer.getvalue(), "README.md": _card(spec, repo_id, len(studies), path, digest),
            BENCHMARK_FILE: benchmark_yaml(spec)}


def _card(spec: TestSetSpec, repo_id: str, n: int, path: str, digest: str) -> bytes:
    licence = LICENCES[spec.name]
    split = path.split("/")[1].split("-")[0]
    return card(
        {
            "pretty_name": f"{spec.title} in ReXrank format",
            "license": licence["license"],
            "language": ["en"],
            "task_categories": ["image-to-text"],
            "tags": ["radiology", "chest-x-ray", "report-generation", "rexrank"],
            "size_categories": ["n<1K" if n < 1000 else "1K<n<10K"],
            "configs": [{"config_name": "default", "data_files": [{"split": split, "path": path}]}],
        },
        f"""
# {spec.title} in ReXrank format

The {spec.title} set of the ReXrank benchmark: {n} studies, one row each. Fields: `id`,
`image_path`, `frontal_lateral`, `key_image_path`, `context`, `section_findings`,
`section_impression`, `report` (ReXrank's "Findings: … Impression: …"), and `split`.

```python
from datasets import load_dataset
studies = load_dataset("{repo_id}", split="{split}")
```

rexrank scores against it with `rexrank score --dataset {spec.name} ...` (findings track:
`section_findings`; findings + impression track: `report`).

## Benchmark leaderboard

`eval.yaml` defines this dataset as a Hub benchmark: one task per track and ReXrank metric
(e.g. `findings_radcliq_v1_inv`; every task is higher-is-better). A model's scores show here
once its repo holds them as Eval Results: `rexrank export eval-results --model NAME --org
{repo_id.split("/")[0]}` writes the `.eval_results/*.yaml` files to add to the model repo.

## Licence

{licence["text"]}

Source file: `{spec.download.filename if spec.download else spec.filenames[0]}`, sha256 `{digest}`.

## Citation

```bibtex
{licence["citation"]}
```
""")
