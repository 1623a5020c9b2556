"""The ReXrank test-set builder: one BuilderConfig per test set.

Input files are passed as `data_files={"test": path}` (not only `data_dir`), so that the
datasets cache fingerprint follows the file's content and an edited file is re-read.
"""
from __future__ import annotations

from dataclasses import dataclass

import datasets

from rexrank.errors import TestSetError
from rexrank.testsets.reading import iter_raw_studies
from rexrank.testsets.registry import TEST_SETS
from rexrank.testsets.schema import features_for, normalise_study

_CITATION = """@article{zhang2024rexrank,
  title={ReXrank: A Public Leaderboard for AI-Powered Radiology Report Generation},
  author={Zhang, Xiaoman and Zhou, Hong-Yu and Yang, Xiaoli and Banerjee, Oishi and Acosta, Juli{\\'a}n N and
          Miller, Josh and Huang, Ouwen and Rajpurkar, Pranav},
  journal={arXiv preprint arXiv:2411.15122},
  year={2024}
}"""


@dataclass
class ReXrankTestSetConfig(datasets.BuilderConfig):
    """Config for one test set; `name` is the test set (iu_xray, mimic_cxr, ...)."""


class ReXrankTestSet(datasets.GeneratorBasedBuilder):
    VERSION = datasets.Version("1.1.0")  # 1.1.0: the findings_impression column
    BUILDER_CONFIG_CLASS = ReXrankTestSetConfig
    BUILDER_CONFIGS = [
        ReXrankTestSetConfig(name=name, version=datasets.Version("1.1.0"), description=spec.title)
        for name, spec in TEST_SETS.items()
    ]

    def _info(self) -> datasets.DatasetInfo:
        spec = TEST_SETS[self.config.name]
        return datasets.DatasetInfo(
            description=f"ReXrank {spec.title} in ReXrank format",
            features=features_for(spec),
            citation=_CITATION,
            homepage="https://rexrank.ai",
        )

    def _split_generators(self, dl_manager):
        files = (self.config.data_files or {}).get("test")
        if not files:
            raise TestSetError(
                f"test set {self.config.name!r}: pass its JSON file as data_files={{'test': path}}"
            )
        if len(files) != 1:
            raise TestSetError(f"test set {self.config.name!r}: expected one JSON file, got {list(files)}")
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"path": files[0]})]

    def _generate_examples(self, path):
        spec = TEST_SETS[self.config.name]
        count = 0
        for study_id, raw in iter_raw_studies(path):
            yield study_id, normalise_study(study_id, raw, spec, source=str(path))
            count += 1
        if spec.n_studies is not None and count != spec.n_studies:
            raise TestSetError(
                f"{path}: {spec.title} has {spec.n_studies} studies, this file has {count}; "
                "is it the right file for this test set?"
            )
