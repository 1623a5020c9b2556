"""`datasets` builders for the ReXrank test sets.

datasets >= 4 no longer runs loading scripts, so the builder is a class shipped in the
rexrank distribution. Use it through `rexrank.load_test_set(...)`, or directly:

    from rexrank_datasets import ReXrankTestSet
    builder = ReXrankTestSet(config_name="iu_xray", data_files={"test": "ReXRank_IUXray_test.json"})
    builder.download_and_prepare()
    ds = builder.as_dataset(split="test")
"""
from rexrank_datasets.builder import ReXrankTestSet, ReXrankTestSetConfig

__all__ = ["ReXrankTestSet", "ReXrankTestSetConfig"]
