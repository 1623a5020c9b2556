"""The four ReXrank test sets (plus the embedded example) and the two tracks."""
from __future__ import annotations

from dataclasses import dataclass, field

TRACKS = ("findings", "findings_impression")


@dataclass(frozen=True)
class Download:
    url: str
    sha256: str
    filename: str


@dataclass(frozen=True)
class TestSetSpec:
    name: str
    title: str
    split: str
    n_studies: int | None  # expected count, checked when the file is read; None = unknown
    filenames: tuple[str, ...]  # file names looked for inside a user-given data_dir
    access: str  # "public", "dua" (credentialed download) or "private"
    extras: dict[str, str] = field(default_factory=dict)  # extra column -> feature kind
    download: Download | None = None
    embedded: str | None = None  # file shipped inside rexrank.data
    how_to_get: str = ""

    __test__ = False

    @property
    def private(self) -> bool:
        return self.access == "private"


# Public ReXrank JSON (rajpurkarlab/ReXrank, MIT; report text from Open-i, CC BY-NC-ND 4.0),
# pinned by content hash so that a changed upstream file is refused, not silently used.
IU_XRAY_DOWNLOAD = Download(
    url="https://raw.githubusercontent.com/rajpurkarlab/ReXrank/07cdd3b53ba3b9086fa8acbfd6f3451f53fcba43/data/iu_xray/ReXRank_IUXray_test.json",
    sha256="4d30a534525e3d92acacaef329ad35a2429b8853b45ef9003e3034b9c9db8464",
    filename="ReXRank_IUXray_test.json",
)

TEST_SETS: dict[str, TestSetSpec] = {
    spec.name: spec
    for spec in (
        TestSetSpec(
            name="iu_xray",
            title="IU-Xray (test)",
            split="test",
            n_studies=590,
            filenames=("ReXRank_IUXray_test.json",),
            access="public",
            extras={"split": "string"},
            download=IU_XRAY_DOWNLOAD,
            how_to_get="downloaded automatically from the public ReXrank repository",
        ),
        TestSetSpec(
            name="mimic_cxr",
            title="MIMIC-CXR (test)",
            split="test",
            n_studies=2347,
            filenames=("ReXRank_MIMICCXR_test.json",),
            access="dua",
            extras={"split": "string", "subject_id": "int64"},
            how_to_get=(
                "MIMIC-CXR needs PhysioNet credentialed access: sign the MIMIC-CXR data use agreement, "
                "then get ReXRank_MIMICCXR_test.json from the ReXrank repository (data/mimic-cxr/) and pass "
                "its folder with --data-dir (Python: data_dir=)"
            ),
        ),
        TestSetSpec(
            name="chexpert_plus",
            title="CheXpert Plus (valid)",
            split="valid",
            n_studies=200,
            filenames=("ReXRank_CheXpertPlus.json", "ReXRank_CheXpertPlus_valid.json"),
            access="dua",
            extras={
                "section_clinical_history": "string",
                "ap_pa": "list",
                "age": "float64",
                "sex": "string",
                "race": "string",
                "ethnicity": "string",
            },
            how_to_get=(
                "CheXpert Plus is under the Stanford AIMI research use agreement: accept it, get "
                "ReXRank_CheXpertPlus.json from the ReXrank repository (data/chexpert_plus/) and pass its "
                "folder with --data-dir (Python: data_dir=)"
            ),
        ),
        TestSetSpec(
            name="rexgradient",
            title="ReXGradient (private test)",
            split="test",
            n_studies=10000,
            filenames=("ReXRank_ReXGradient_test.json", "ReXGradient_test.json"),
            access="private",
            extras={"site": "string", "is_abnormal": "bool"},
            how_to_get=(
                "ReXGradient's test references are private to the ReXrank backend; the backend passes "
                "their folder with --data-dir (Python: data_dir=)"
            ),
        ),
        TestSetSpec(
            name="example",
            title="Embedded example (synthetic, written for rexrank)",
            split="test",
            n_studies=None,
            filenames=("example_test.json",),
            access="public",
            extras={"split": "string"},
            embedded="example_test.json",
            how_to_get="ships with rexrank",
        ),
    )
}


def public_test_sets() -> list[TestSetSpec]:
    """Test sets the Hub may publish: public, not the embedded synthetic example."""
    return [spec for spec in TEST_SETS.values() if spec.access == "public" and not spec.embedded]


def get_spec(name: str) -> TestSetSpec:
    from rexrank.errors import TestSetError
    from rexrank.suggest import did_you_mean

    try:
        return TEST_SETS[name]
    except KeyError:
        raise TestSetError(f"unknown test set {name!r}{did_you_mean(name, TEST_SETS)}; available: {', '.join(TEST_SETS)}") from None


def check_track(track: str) -> str:
    from rexrank.errors import TestSetError
    from rexrank.suggest import did_you_mean

    if track not in TRACKS:
        raise TestSetError(f"unknown track {track!r}{did_you_mean(track, TRACKS)}; available: {', '.join(TRACKS)}")
    return track
