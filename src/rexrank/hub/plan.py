"""What `rexrank hub deploy` publishes: every repo with its files, visibility, Space
variables and the secrets to set by hand. Built from the checkout alone (no Hub access),
so `--dry-run` is this plan printed."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from rexrank.hub import requirements as reqs
from rexrank.hub.cards import requests_card, results_card
from rexrank.hub.errors import DeployError
from rexrank.hub.manifest import MANIFEST, manifest_bytes
from rexrank.hub.source import BACKEND_DIR, LEADERBOARD_DIR, METRICS_DIR, folder_files, metric_names

GROUPS = ("metrics", "leaderboard", "backend", "data")
DEFAULT_GROUPS = ("metrics", "leaderboard", "backend")
SOURCES = ("wheel", "pypi")
LEADERBOARD_NAME, BACKEND_NAME = "leaderboard", "backend"
LLM_METRICS = ("green", "crimson", "fineradscore", "spec_cxr")


@dataclass
class RepoPlan:
    repo_id: str
    repo_type: str  # "space" or "dataset"
    private: bool
    files: dict[str, bytes]  # path -> content, the manifest included
    role: str  # "metric", "leaderboard", "backend", "requests", "results", "test set"
    sdk: str | None = None  # Spaces: "gradio" or "docker"
    variables: dict[str, str] = field(default_factory=dict)  # Space variables deploy sets
    secrets: dict[str, str] = field(default_factory=dict)  # secret -> what it must hold (set by hand)
    optional: dict[str, str] = field(default_factory=dict)  # optional variables/secrets -> meaning
    data_prefixes: tuple[str, ...] = ()  # folders holding store data: never deleted, never foreign
    seed: dict[str, bytes] = field(default_factory=dict)  # added only while no file under seed_prefix exists
    seed_prefix: str = ""

    @property
    def size(self) -> int:
        return sum(len(d) for d in self.files.values())


@dataclass
class Plan:
    org: str
    endpoint: str
    version: str
    rexrank_from: str
    wheel_name: str | None
    wheel_sha256: str | None
    repos: list[RepoPlan]


def check_org(org: str) -> str:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(f"{org}/{LEADERBOARD_NAME}")
    except HFValidationError:
        raise DeployError(f"--org {org!r}: not a valid Hub user or organisation name") from None
    if "/" in org:
        raise DeployError(f"--org {org!r}: give the organisation only (e.g. rexrank), not a repo id")
    return org


def parse_groups(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return DEFAULT_GROUPS
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in GROUPS]
    if unknown or not names:
        raise DeployError(f"--only {','.join(unknown) or '(empty)'}: choose from {', '.join(GROUPS)}")
    return tuple(g for g in GROUPS if g in names)


def _with_manifest(files: dict[str, bytes], version: str) -> dict[str, bytes]:
    return {**files, MANIFEST: manifest_bytes(files, version)}


class _Builder:
    def __init__(self, org, source: Path, endpoint, version, rexrank_from, wheel: Path | None):
        self.org, self.source, self.endpoint, self.version = org, source, endpoint.rstrip("/"), version
        self.rexrank_from = rexrank_from
        self.wheel = wheel
        self.wheel_bytes = wheel.read_bytes() if wheel is not None else None

    def space_files(self, folder: str, repo_id: str, *, by_url: bool) -> dict[str, bytes]:
        """A Space folder, its requirements.txt pointed at the wheel in the same Space (or PyPI)."""
        files = folder_files(self.source / folder)
        where = f"{folder}/requirements.txt"
        if "requirements.txt" not in files:
            raise DeployError(f"{where} is missing")
        text = files["requirements.txt"].decode()
        if self.wheel is None:
            text = reqs.pin_rexrank(text, where, version=self.version)
        elif by_url:
            sha = hashlib.sha256(self.wheel_bytes).hexdigest()
            url = f"{self.endpoint}/spaces/{repo_id}/resolve/main/{self.wheel.name}#sha256={sha}"
            text = reqs.pin_rexrank(text, where, wheel_url=url)
        else:
            text = reqs.pin_rexrank(text, where, wheel_file=self.wheel.name)
        files["requirements.txt"] = text.encode()
        if self.wheel is not None:
            files[self.wheel.name] = self.wheel_bytes
        return _with_manifest(files, self.version)

    def metric(self, name: str) -> RepoPlan:
        repo_id = f"{self.org}/{name}"
        optional = {}
        if name in LLM_METRICS:
            optional = {"REXRANK_LLM_BASE_URL": "variable: the LLM endpoint the demo calls",
                        "REXRANK_LLM_MODEL": "variable: the model name on it",
                        "REXRANK_LLM_API_KEY": "secret: its key"}
        return RepoPlan(repo_id, "space", False, self.space_files(f"{METRICS_DIR}/{name}", repo_id, by_url=True),
                        "metric", sdk="gradio", optional=optional)

    def store_settings(self) -> dict:
        """The leaderboard and the backend both work on the store hf://ORG."""
        return {"variables": {"REXRANK_STORE": f"hf://{self.org}"},
                "secrets": {"HF_TOKEN": f"a token that can write {self.org}/requests and {self.org}/results"}}

    def leaderboard(self) -> RepoPlan:
        repo_id = f"{self.org}/{LEADERBOARD_NAME}"
        return RepoPlan(
            repo_id, "space", False, self.space_files(LEADERBOARD_DIR, repo_id, by_url=True), "leaderboard",
            sdk="gradio", **self.store_settings(),
            optional={"REXRANK_QUOTA": "variable: submissions per submitter, test set and track, N/DAYS (default 1/7)",
                      "REXRANK_DATA_DIR": "variable: folder with the test sets' JSON, to check submitted ids"},
        )

    def backend(self) -> RepoPlan:
        # Private (it shows the queue): a Docker Space, whose Dockerfile copies the wheel in before installing
        repo_id = f"{self.org}/{BACKEND_NAME}"
        return RepoPlan(
            repo_id, "space", True, self.space_files(BACKEND_DIR, repo_id, by_url=False), "backend",
            sdk="docker", **self.store_settings(),
            optional={"REXRANK_METRICS": "variable: this worker's metrics (default: the store's recorded metric set, ReXrank's)",
                      "REXRANK_METRIC_OPTIONS": "variable: JSON {metric: {option: value}}",
                      "REXRANK_DATA_DIR / REXRANK_PRIVATE_DATA_REPO": "variables: where the test sets' references are",
                      "OPENAI_BASE_URL / OPENAI_API_KEY": "secrets: LLM endpoint for the LLM-judged metrics"},
        )

    def requests(self) -> RepoPlan:
        from rexrank.store import records as R

        return RepoPlan(f"{self.org}/requests", "dataset", True,
                        _with_manifest({"README.md": requests_card(self.org)}, self.version), "requests",
                        data_prefixes=R.REQUESTS_DATA_PREFIXES)

    def results(self) -> RepoPlan:
        from rexrank.leaderboard.published import load_seed_records
        from rexrank.store import records as R
        from rexrank.store.store import results_repo_files

        # the published ReXrank results, written as the store writes them (records and index)
        seed = results_repo_files(load_seed_records())
        return RepoPlan(f"{self.org}/results", "dataset", False,
                        _with_manifest({"README.md": results_card(self.org)}, self.version), "results",
                        data_prefixes=R.RESULTS_DATA_PREFIXES, seed=seed, seed_prefix=R.RECORDS_DIR)

    def test_sets(self, data_dir) -> list[RepoPlan]:
        from rexrank.hub.testset_repo import test_set_files
        from rexrank.testsets.registry import public_test_sets

        out = []
        for spec in public_test_sets():
            repo_id = f"{self.org}/{spec.name}"
            out.append(RepoPlan(repo_id, "dataset", False,
                                _with_manifest(test_set_files(spec, data_dir, repo_id), self.version), "test set"))
        return out


def build_plan(
    org: str,
    *,
    source: Path,
    version: str,
    wheel: Path | None = None,
    groups: tuple[str, ...] = DEFAULT_GROUPS,
    endpoint: str = "https://huggingface.co",
    data_dir: str | Path | None = None,
) -> Plan:
    """The repos to publish. `wheel` None means rexrank from PyPI (`rexrank[...]==version`)."""
    check_org(org)
    b = _Builder(org, source, endpoint, version, "wheel" if wheel else "pypi", wheel)
    repos: list[RepoPlan] = []
    if "leaderboard" in groups or "backend" in groups:
        repos += [b.requests(), b.results()]
    if "metrics" in groups:
        repos += [b.metric(name) for name in metric_names(source)]
    if "leaderboard" in groups:
        repos.append(b.leaderboard())
    if "backend" in groups:
        repos.append(b.backend())
    if "data" in groups:
        repos += b.test_sets(data_dir)
    sha = hashlib.sha256(b.wheel_bytes).hexdigest() if wheel else None
    return Plan(org, b.endpoint, version, b.rexrank_from, wheel.name if wheel else None, sha, repos)


def human(n: int) -> str:
    return f"{n} B" if n < 1000 else f"{n / 1000:.1f} kB" if n < 1_000_000 else f"{n / 1_000_000:.1f} MB"


def format_plan(plan: Plan) -> str:
    src = (f"the wheel {plan.wheel_name} uploaded into each Space (sha256 {plan.wheel_sha256[:12]}…)"
           if plan.wheel_name else f"PyPI (rexrank=={plan.version}: publish it first, see README RELEASING)")
    n = len(plan.repos)
    head = f"rexrank {plan.version} → {plan.endpoint}, {n} repo{'s' if n != 1 else ''}"
    if any(r.repo_type == "space" for r in plan.repos):
        head += f"; Spaces install rexrank from {src}"
    lines = [head]
    for repo in plan.repos:
        kind = f"{repo.repo_type} ({repo.sdk})" if repo.sdk else repo.repo_type
        lines.append(f"\n{kind:<16} {repo.repo_id:<28} {'private' if repo.private else 'public':<8} "
                     f"{len(repo.files)} files, {human(repo.size)}")
        for path, data in sorted(repo.files.items()):
            lines.append(f"    {path:<48} {human(len(data)):>9}")
        if repo.seed:
            n_records = sum(p.startswith(repo.seed_prefix) for p in repo.seed)
            lines.append(f"    + {n_records} published ReXrank results under {repo.seed_prefix}, with their index "
                         f"({human(sum(map(len, repo.seed.values())))}), only while the repo has none")
        for key, value in repo.variables.items():
            lines.append(f"    variable {key}={value} (set through the API)")
    lines += settings_to_set(plan)
    return "\n".join(lines)


def settings_to_set(plan: Plan) -> list[str]:
    """The secrets (never written by deploy) and optional settings, per Space."""
    wanted: dict[tuple[str, str], list[str]] = {}  # (setting, meaning) -> Spaces, in plan order
    for repo in plan.repos:
        for key, meaning in repo.secrets.items():
            wanted.setdefault((f"secret {key} (required)", meaning), []).append(repo.repo_id)
        for key, meaning in repo.optional.items():
            wanted.setdefault((f"{key} (optional)", meaning), []).append(repo.repo_id)
    lines = [f"  {', '.join(repos)}: {setting} — {meaning}" for (setting, meaning), repos in wanted.items()]
    if not lines:
        return []
    return ["", "Set by hand in each Space's Settings → Variables and secrets (deploy never writes a token):", *lines]
