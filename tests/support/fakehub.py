"""A small in-memory fake of the Hugging Face Hub HTTP API, served for real on 127.0.0.1,
for tests of code that talks to the Hub through `huggingface_hub` (HfApi, hf_hub_download,
snapshot_download, create_commit with parent_commit).

    from support.fakehub import FakeHub
    with FakeHub() as hub:                   # hub.url = "http://127.0.0.1:PORT"
        HfApi(endpoint=hub.url).create_repo("org/results", repo_type="dataset")

Covers (as huggingface_hub 2.4 calls them): repo create / info (with `expand`) / settings (visibility),
preupload (always "regular" uploads), commit (NDJSON; a stale `parentCommit` -> 412), tree
listing, paths-info, resolve (HEAD/GET) for models, datasets and spaces, Space variables,
README.md metadata validation (YAML only), whoami, file sizes and LFS fields in repo info
(`files_metadata=True`), the agent registry the `hf` command line reads, and Jobs (run,
inspect, list by labels, cancel, logs: see "Jobs" below). Not covered: LFS / xet uploads, branches and PRs, pagination.

Commits are dated by `FakeHub(clock=...)` (default time.time: a test controls it) and listed
with their messages, newest first, as the Hub lists them (GET .../commits/main:
`HfApi.list_repo_commits`).

Test hooks: `hub.commits(repo)` counts commits, `hub.fail_next_commits` injects conflicts,
`hub.drop_commit[repo_id] = "before" | "after"` cuts the connection of that repo's next
commit before or after applying it (a network error half-way), `hub.requests` logs
"METHOD path" of every call; `FakeHub(keep_versions=N)` keeps only the last N versions
of each repo readable (a benchmark making thousands of commits keeps memory bounded);
`hub.inject(method, path, *kinds)` answers calls with the Hub's passing faults (see "Faults").

Accounts: without `accounts` any token may do anything (and whoami answers "tester").
With `FakeHub(accounts={token: Account(name, orgs, role)})` the fake checks like the Hub:
an unknown token is 401, writing outside the account's own and its orgs' namespaces or with
a read token is 403, and a private repo is invisible (404) to anyone else. whoami answers
each account's and organisation's immutable `id` beside its name, as the Hub does (an id
stays with an account across renames: `hub.rename(token, new_name)`; a freed name taken by
another account comes with that account's own id). `hub.org_ids` maps organisation names
to their ids.

Commit times: each commit is dated by `hub.clock()` (time.time unless a test sets it);
repo info's `lastModified` is the revision's commit time, and paths-info with `expand`
gives each file's `lastCommit` (the last commit that changed it), as the Hub does.
"""
from __future__ import annotations

import base64
import bisect
import hashlib
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from email.utils import formatdate

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


@dataclass
class Account:
    name: str
    orgs: tuple[str, ...] = ()
    role: str = "write"  # "read" or "write", as a classic token's role
    id: str = ""  # the Hub's immutable id (made from the first name when not given; kept by `replace`)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = _made_id("user", self.name)


def _made_id(kind: str, name: str) -> str:
    """A 24-hex-digit id, as the Hub's (a MongoDB ObjectId)."""
    return hashlib.sha1(f"{kind}:{name}".encode()).hexdigest()[:24]


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


@dataclass
class FakeRepo:
    repo_type: str
    repo_id: str
    private: bool = True
    history: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)  # (sha, files), oldest first
    sdk: str | None = None  # Spaces
    variables: dict[str, str] = field(default_factory=dict)  # Space variables
    sorted_paths: dict[str, list[str]] = field(default_factory=dict)  # sha -> its paths, sorted (for listings)
    commit_log: dict[str, dict] = field(default_factory=dict)  # sha -> its title, message, date, author
    last_change: dict[str, dict[str, str]] = field(default_factory=dict)  # sha -> {path: sha of the commit that last changed it}

    def commit_time(self, sha: str) -> float:
        return self.commit_log.get(sha, {}).get("date", 0.0)

    @property
    def head(self) -> str:
        return self.history[-1][0]

    def files_at(self, rev: str) -> dict[str, bytes] | None:
        if rev in ("main", self.head):
            return self.history[-1][1]
        for sha, files in self.history:
            if sha == rev:
                return files
        return None


def _sorted_after(previous: list[str] | None, before: dict[str, bytes], after: dict[str, bytes],
                  touched: set[str]) -> list[str]:
    """The sorted paths of `after`, from the parent version's and the paths the commit
    `touched` (None: a folder was deleted, sort afresh)."""
    if previous is None or touched is None:
        return sorted(after)
    paths = list(previous)
    for path in touched:
        if path in before and path not in after:
            del paths[bisect.bisect_left(paths, path)]
        elif path in after and path not in before:
            bisect.insort(paths, path)
    return paths


def _sibling(path: str, data: bytes, blobs: bool) -> dict:
    """A repo_info sibling; with `blobs` (files_metadata=True) its size and blob id, and for
    parquet files the LFS pointer's fields, as the Hub stores them (its default .gitattributes)."""
    if not blobs:
        return {"rfilename": path}
    out = {"rfilename": path, "size": len(data), "blobId": git_blob_oid(data)}
    if path.endswith(".parquet"):
        out["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
    return out


def _error(status: int, message: str, code: str | None = None) -> JSONResponse:
    headers = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _under(paths: list[str], base: str) -> list[str]:
    """The sorted `paths` that start with `base` (a folder lists in time proportional to
    what it holds, as the Hub's git trees do, not to the whole repo)."""
    start = bisect.bisect_left(paths, base)
    end = bisect.bisect_left(paths, base + "\U0010ffff") if base else len(paths)
    return paths[start:end]


def _tree_entries(files: dict[str, bytes], prefix: str, recursive: bool, paths: list[str] | None = None) -> list[dict]:
    prefix = prefix.strip("/")
    base = f"{prefix}/" if prefix else ""
    entries: dict[str, dict] = {}
    for path in _under(paths if paths is not None else sorted(files), base):
        data = files[path]
        rest = path[len(base):].split("/")
        # directories on the way (all of them when recursive, only the first level otherwise)
        for depth in range(1, len(rest)):
            if not recursive and depth > 1:
                break
            d = base + "/".join(rest[:depth])
            entries.setdefault(d, {"type": "directory", "path": d, "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0})
        if recursive or len(rest) == 1:
            entries[path] = {"type": "file", "path": path, "oid": git_blob_oid(data), "size": len(data)}
    return list(entries.values())


class _CutConnection(Response):
    """An answer that breaks off: it declares a body it never sends, so the server closes
    the connection and the client sees a network error, as when a link fails half-way."""

    def __init__(self, repo_id: str) -> None:
        super().__init__(content=b"{", status_code=200, headers={"Content-Length": "4096"}, media_type="application/json")
        self.repo_id = repo_id

    def init_headers(self, headers=None) -> None:  # keep the false Content-Length
        self.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        self.raw_headers.append((b"content-type", b"application/json"))


def _bind(app: FastAPI, rt: str, info, tree, preupload, commit, paths_info, resolve, settings, commits) -> None:
    """Routes of one repo type (FastAPI needs annotated functions, hence no lambdas)."""
    api = f"/api/{rt}s/{{ns}}/{{name}}"

    def get_info(request: Request, ns: str, name: str):
        return info(request, rt, ns, name, expand=request.query_params.getlist("expand"))

    def get_info_rev(request: Request, ns: str, name: str, rev: str):
        return info(request, rt, ns, name, rev, expand=request.query_params.getlist("expand"))

    def get_tree(request: Request, ns: str, name: str, rev: str, recursive: bool = False):
        return tree(request, rt, ns, name, rev, "", recursive)

    def get_tree_path(request: Request, ns: str, name: str, rev: str, path: str, recursive: bool = False):
        return tree(request, rt, ns, name, rev, path, recursive)

    async def post_preupload(request: Request, ns: str, name: str, rev: str):
        return await preupload(request, rt, ns, name, rev)

    async def post_commit(request: Request, ns: str, name: str, rev: str):
        return await commit(request, rt, ns, name, rev)

    async def post_paths_info(request: Request, ns: str, name: str, rev: str):
        return await paths_info(request, rt, ns, name, rev)

    def get_resolve(request: Request, ns: str, name: str, rev: str, path: str):
        return resolve(request, rt, ns, name, rev, path)

    async def put_settings(request: Request, ns: str, name: str):
        return await settings(request, rt, ns, name)

    def get_commits(request: Request, ns: str, name: str, rev: str):
        return commits(request, rt, ns, name, rev)

    app.add_api_route(api, get_info, methods=["GET"])
    app.add_api_route(api + "/settings", put_settings, methods=["PUT"])
    app.add_api_route(api + "/revision/{rev:path}", get_info_rev, methods=["GET"])
    app.add_api_route(api + "/tree/{rev}", get_tree, methods=["GET"])
    app.add_api_route(api + "/tree/{rev}/{path:path}", get_tree_path, methods=["GET"])
    app.add_api_route(api + "/commits/{rev}", get_commits, methods=["GET"])
    app.add_api_route(api + "/preupload/{rev}", post_preupload, methods=["POST"])
    app.add_api_route(api + "/commit/{rev}", post_commit, methods=["POST"])
    app.add_api_route(api + "/paths-info/{rev}", post_paths_info, methods=["POST"])
    app.add_api_route(f"/{PREFIX[rt]}{{ns}}/{{name}}/resolve/{{rev}}/{{path:path}}", get_resolve, methods=["GET", "HEAD"])


class FakeHub:
    def __init__(self, accounts: dict[str, Account] | None = None, *, keep_versions: int | None = None,
                 clock=None) -> None:
        """`keep_versions`: how many past versions of each repo stay readable (all by
        default; a benchmark making thousands of commits keeps memory bounded with it).
        `clock`: what dates commits (seconds since the epoch; default time.time)."""
        self.keep_versions = keep_versions
        self.clock = clock or time.time
        self.repos: dict[tuple[str, str], FakeRepo] = {}
        self.lock = threading.Lock()
        self.fail_next_commits = 0  # answer the next N commits with 412 (injected conflicts)
        self.drop_commit: dict[str, str] = {}  # repo_id -> "before" | "after": cut that repo's next commit
        self.accounts = accounts
        self.org_ids: dict[str, str] = {}  # organisation name -> id (made from the name unless set)
        self.requests: list[str] = []  # "METHOD path" log
        self.jobs: dict[str, FakeJob] = {}  # Jobs, by id (see "Jobs" below)
        self.faults: list[Fault] = []  # passing faults to answer matching calls with (see "Faults" below)
        self.faults_served: list[Fault] = []
        self.job_prices: dict[str, float] = dict(JOB_PRICES)  # USD per hour, what /api/jobs/hardware lists
        self.app = self._build_app()
        self._server = None
        self._thread = None
        self.url = ""

    # ---- direct access for tests ----
    def files(self, repo_id: str, repo_type: str = "dataset") -> dict[str, bytes]:
        return dict(self.repos[(repo_type, repo_id)].history[-1][1])

    def commits(self, repo_id: str, repo_type: str = "dataset") -> int:
        return len(self.repos[(repo_type, repo_id)].history)

    def _new_repo(self, repo_type: str, repo_id: str, private: bool) -> FakeRepo:
        repo = FakeRepo(repo_type, repo_id, private, [(uuid.uuid4().hex + "00000000", {})])
        repo.commit_log[repo.head] = {"title": "initial commit", "message": "", "date": self.clock(), "author": None}
        repo.last_change[repo.head] = {}
        self.repos[(repo_type, repo_id)] = repo
        return repo

    def rename(self, token: str, new_name: str) -> None:
        """The account of `token` takes `new_name` (its id stays; its old name is free)."""
        import dataclasses

        self.accounts[token] = dataclasses.replace(self.accounts[token], name=new_name)

    def org_id(self, name: str) -> str:
        return self.org_ids.setdefault(name, _made_id("org", name))

    def _repo(self, repo_type: str, repo_id: str) -> FakeRepo | None:
        return self.repos.get((repo_type, repo_id))

    # ---- accounts ----
    def _account(self, request: Request) -> Account | None:
        header = request.headers.get("authorization", "")
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        return self.accounts.get(token) if self.accounts is not None and token else None

    def _auth_error(self, request: Request) -> JSONResponse | None:
        """401 for a token the fake does not know (only when accounts are configured)."""
        header = request.headers.get("authorization", "")
        if self.accounts is not None and header.startswith("Bearer ") and self._account(request) is None:
            return _error(401, "Invalid credentials in Authorization header")
        return None

    def _write_error(self, request: Request, namespace: str) -> JSONResponse | None:
        if self.accounts is None:
            return None
        if (err := self._auth_error(request)) is not None:
            return err
        account = self._account(request)
        if account is None:
            return _error(401, "You must be authenticated to do this")
        if namespace != account.name and namespace not in account.orgs:
            return _error(403, f"You don't have the rights to write to the namespace {namespace}", "Forbidden")
        if account.role != "write":
            return _error(403, "This token has read access only", "Forbidden")
        return None

    def _visible(self, request: Request, repo: FakeRepo | None) -> bool:
        if repo is None:
            return False
        if self.accounts is None or not repo.private:
            return True
        account = self._account(request)
        namespace = repo.repo_id.split("/")[0]
        return account is not None and (namespace == account.name or namespace in account.orgs)

    # ---- the app ----
    def _build_app(self) -> FastAPI:
        app = FastAPI()
        hub = self

        @app.get("/api/whoami-v2")
        def whoami(request: Request):
            if hub.accounts is None:
                return {"type": "user", "id": _made_id("user", "tester"), "name": "tester", "fullname": "Tester",
                        "orgs": [], "auth": {}, "avatarUrl": "/avatars/tester.svg"}
            account = hub._account(request)
            if account is None:
                return _error(401, "Invalid credentials in Authorization header")
            return {
                "type": "user", "id": account.id, "name": account.name, "fullname": account.name,
                "avatarUrl": f"/avatars/{account.name}.svg",
                "orgs": [{"type": "org", "id": hub.org_id(org), "name": org} for org in account.orgs],
                "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": account.role}},
            }

        @app.get("/api/spaces/{ns}/{name}/variables")
        def get_variables(request: Request, ns: str, name: str):
            repo = hub._repo("space", f"{ns}/{name}")
            if (err := hub._write_error(request, ns)) is not None:
                return err
            if repo is None:
                return _error(404, "Repository not found", "RepoNotFound")
            return {k: {"value": v, "description": None} for k, v in repo.variables.items()}

        @app.post("/api/spaces/{ns}/{name}/variables")
        async def add_variable(request: Request, ns: str, name: str):
            repo = hub._repo("space", f"{ns}/{name}")
            if (err := hub._write_error(request, ns)) is not None:
                return err
            if repo is None:
                return _error(404, "Repository not found", "RepoNotFound")
            body = await request.json()
            repo.variables[body["key"]] = body["value"]
            return {k: {"value": v, "description": None} for k, v in repo.variables.items()}

        @app.post("/api/validate-yaml")
        async def validate_yaml(request: Request):
            """README.md metadata must be valid YAML (the Hub checks its schema too; the fake, only the YAML)."""
            import yaml

            content = (await request.json()).get("content", "")
            if content.startswith("---"):
                front = content[3:].split("\n---", 1)[0]
                try:
                    meta = yaml.safe_load(front)
                except yaml.YAMLError as exc:
                    return JSONResponse({"errors": [{"message": f"invalid YAML: {exc}"}]}, status_code=400)
                if meta is not None and not isinstance(meta, dict):
                    return JSONResponse({"errors": [{"message": "metadata must be a mapping"}]}, status_code=400)
            return {"warnings": []}

        @app.get("/api/agent-harnesses")
        def harnesses():  # the shape the `hf` command line reads (huggingface_hub.utils._detect_agent)
            return {"standardEnvVars": [], "harnesses": {}}

        @app.post("/api/repos/create")
        async def create(request: Request):
            body = await request.json()
            repo_type = body.get("type") or "model"
            account = hub._account(request)
            owner = body.get("organization") or (account.name if account else "tester")
            if (err := hub._write_error(request, owner)) is not None:
                return err
            repo_id = f"{owner}/{body['name']}"
            url = f"{hub.url}/{PREFIX[repo_type]}{repo_id}"
            with hub.lock:
                if hub._repo(repo_type, repo_id):
                    return JSONResponse({"error": "You already created this repo", "url": url}, status_code=409)
                repo = hub._new_repo(repo_type, repo_id, body.get("private", body.get("visibility") != "public"))
                repo.sdk = body.get("sdk")
                repo.variables.update({v["key"]: v["value"] for v in body.get("variables") or []})
            return {"url": url, "name": repo_id, "id": repo_id}

        def info(request: Request, repo_type: str, ns: str, name: str, rev: str = "main", expand: list[str] | None = None):
            if (err := hub._auth_error(request)) is not None:
                return err
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if not hub._visible(request, repo):
                return _error(404, "Repository not found", "RepoNotFound")
            files = repo.files_at(rev)
            if files is None:
                return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            sha = repo.head if rev in ("main", repo.head) else rev
            modified, created = _iso(repo.commit_time(sha)), _iso(repo.commit_time(repo.history[0][0]))
            if expand:  # as the Hub: only the properties asked for (no file list)
                known = {"sha": sha, "private": repo.private, "author": ns, "lastModified": modified}
                return {"id": repo.repo_id, "_id": repo.repo_id, **{k: known[k] for k in expand if k in known}}
            return {
                "id": repo.repo_id, "_id": repo.repo_id, "author": ns, "sha": sha, "private": repo.private,
                "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
                "lastModified": modified, "createdAt": created,
                "siblings": [_sibling(p, files[p], (request.query_params.get("blobs") or "").lower() == "true") for p in sorted(files)],
                **({"sdk": repo.sdk} if repo.sdk else {}),
            }

        async def settings(request: Request, repo_type, ns, name):
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if (err := hub._write_error(request, ns)) is not None:
                return err
            if repo is None:
                return _error(404, "Repository not found", "RepoNotFound")
            body = await request.json()
            if "visibility" in body:
                repo.private = body["visibility"] == "private"
            elif "private" in body:
                repo.private = bool(body["private"])
            return {}

        def tree(request: Request, repo_type, ns, name, rev, path, recursive):
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if not hub._visible(request, repo):
                return _error(404, "Repository not found", "RepoNotFound")
            files = repo.files_at(rev)
            if files is None:
                return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            entries = _tree_entries(files, path, recursive, repo.sorted_paths.get(repo.head if rev == "main" else rev))
            if path and not entries:
                return _error(404, f"{path} does not exist", "EntryNotFound")
            return entries

        async def preupload(request: Request, repo_type, ns, name, rev):
            if (err := hub._write_error(request, ns)) is not None:
                return err
            if hub._repo(repo_type, f"{ns}/{name}") is None:
                return _error(404, "Repository not found", "RepoNotFound")
            body = await request.json()
            return {
                "files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in body["files"]],
                "commitOid": hub._repo(repo_type, f"{ns}/{name}").head,
            }

        async def commit(request: Request, repo_type, ns, name, rev):
            if (err := hub._write_error(request, ns)) is not None:
                return err
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if repo is None:
                return _error(404, "Repository not found", "RepoNotFound")
            drop = hub.drop_commit.pop(repo.repo_id, None)
            if drop == "before":
                return _CutConnection(repo.repo_id)
            if rev != "main":
                return _error(400, "the fake Hub only commits to main")
            lines = [json.loads(line) for line in (await request.body()).splitlines() if line.strip()]
            with hub.lock:
                header = next((item["value"] for item in lines if item["key"] == "header"), {})
                parent = header.get("parentCommit")
                if hub.fail_next_commits > 0:
                    hub.fail_next_commits -= 1
                    return _error(412, "A commit has happened since. Please refresh and try again.")
                if parent is not None and parent != repo.head:
                    return _error(412, "A commit has happened since. Please refresh and try again.")
                files = dict(repo.history[-1][1])
                touched: set[str] | None = set()
                for item in lines:
                    key, value = item["key"], item["value"]
                    if key in ("file", "deletedFile") and touched is not None:
                        touched.add(value["path"])
                    if key == "file":
                        files[value["path"]] = base64.b64decode(value["content"]) if value.get("encoding") == "base64" else value["content"].encode()
                    elif key == "deletedFile":
                        files.pop(value["path"], None)
                    elif key == "deletedFolder":
                        folder = value["path"].rstrip("/") + "/"
                        files = {p: d for p, d in files.items() if not p.startswith(folder)}
                        touched = None
                    elif key == "lfsFile":
                        return _error(400, "the fake Hub does not support LFS uploads")
                sha = hashlib.sha1(f"{repo.head}{time.time_ns()}{uuid.uuid4()}".encode()).hexdigest()
                repo.sorted_paths[sha] = _sorted_after(repo.sorted_paths.get(repo.head), repo.history[-1][1], files, touched)
                before = repo.history[-1][1]
                repo.last_change[sha] = {p: (sha if before.get(p) != data else repo.last_change.get(repo.head, {}).get(p, sha))
                                         for p, data in files.items()}
                repo.history.append((sha, files))
                author = hub._account(request)
                repo.commit_log[sha] = {"title": header.get("summary", ""), "message": header.get("description", ""),
                                        "date": hub.clock(), "author": author.name if author else None}
                if hub.keep_versions is not None:
                    del repo.history[:-hub.keep_versions]
                    kept = {h for h, _ in repo.history}
                    repo.sorted_paths = {h: p for h, p in repo.sorted_paths.items() if h in kept}
                    repo.last_change = {h: p for h, p in repo.last_change.items() if h in kept}
                    repo.commit_log = {h: c for h, c in repo.commit_log.items() if h in kept}
            if drop == "after":
                return _CutConnection(repo.repo_id)
            return {
                "commitUrl": f"{hub.url}/{PREFIX[repo_type]}{repo.repo_id}/commit/{sha}",
                "commitOid": sha,
                "pullRequestUrl": None,
                "success": True,
            }

        async def paths_info(request: Request, repo_type, ns, name, rev):
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if not hub._visible(request, repo):
                return _error(404, "Repository not found", "RepoNotFound")
            files = repo.files_at(rev) or {}
            form = await request.form() if "form" in request.headers.get("content-type", "") else await request.json()
            paths = form.getlist("paths") if hasattr(form, "getlist") else form.get("paths", [])
            expand = str(form.get("expand", "")).lower() in ("true", "1")
            changed = repo.last_change.get(repo.head if rev in ("main", repo.head) else rev, {})
            out = []
            for p in paths:
                if p in files:
                    entry = {"type": "file", "path": p, "oid": git_blob_oid(files[p]), "size": len(files[p])}
                    if expand and p in changed:  # as the Hub: the last commit that changed the file
                        commit = repo.commit_log[changed[p]]
                        entry["lastCommit"] = {"id": changed[p], "title": commit["title"] or "commit",
                                               "date": _iso(commit["date"])}
                    out.append(entry)
                elif any(f.startswith(p.rstrip("/") + "/") for f in files):
                    out.append({"type": "directory", "path": p, "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0})
            return out

        def resolve(request: Request, repo_type, ns, name, rev, path):
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if not hub._visible(request, repo):
                return _error(404, "Repository not found", "RepoNotFound")
            files = repo.files_at(rev)
            if files is None:
                return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            sha = repo.head if rev in ("main", repo.head) else rev
            if path not in files:
                resp = _error(404, f"Entry not found: {path}", "EntryNotFound")
                resp.headers["X-Repo-Commit"] = sha
                return resp
            data = files[path]
            headers = {"X-Repo-Commit": sha, "ETag": f'"{git_blob_oid(data)}"', "Content-Length": str(len(data))}
            if request.method == "HEAD":
                return Response(status_code=200, headers=headers)
            return Response(content=data, headers=headers, media_type="application/octet-stream")

        def commits(request: Request, repo_type, ns, name, rev):
            repo = hub._repo(repo_type, f"{ns}/{name}")
            if not hub._visible(request, repo):
                return _error(404, "Repository not found", "RepoNotFound")
            if rev != "main":
                return _error(400, "the fake Hub lists the commits of main only")
            with hub.lock:
                shas = [sha for sha, _ in reversed(repo.history)]
            return [{"id": sha, "title": repo.commit_log[sha]["title"], "message": repo.commit_log[sha]["message"],
                     "date": _iso_now(repo.commit_log[sha]["date"]),
                     "authors": [{"user": repo.commit_log[sha]["author"]}] if repo.commit_log[sha]["author"] else []}
                    for sha in shas]

        for rt in ("model", "dataset", "space"):
            _bind(app, rt, info, tree, preupload, commit, paths_info, resolve, settings, commits)
        _bind_jobs(app, hub)
        app.add_middleware(_Door, hub=hub)
        return app

    # ---- server lifecycle ----
    def start(self) -> "FakeHub":
        import uvicorn

        sock = socket.socket()
        # no Nagle delay: otherwise each keep-alive request waits ~40 ms for a delayed ACK,
        # which no real server adds (accepted connections inherit the option)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        # a long keep-alive, as the Hub: clients reuse idle pooled connections (5 s, uvicorn's default,
        # closes them under a client that paused, e.g. a Gradio app starting up)
        # the Date header is written per answer (_Door), as the Hub does: uvicorn's is refreshed once a
        # second and can be a second behind, and huggingface_hub ends a log replay at Date + 1 s
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, timeout_keep_alive=300,
                                date_header=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("fake Hub did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        for job in list(self.jobs.values()):
            job.kill("CANCELED", "the fake Hub stopped")
        self.stop()

    # ---- Jobs: test hooks ----
    def kill_job(self, job_id: str) -> None:
        """The Job's machine dies: its process is killed, the Job ends in ERROR."""
        self.jobs[job_id].kill("ERROR", "the Job's machine stopped")

    def forget_job(self, job_id: str) -> None:
        """The Job disappears: killed, then unknown to inspect and list (404)."""
        self.jobs[job_id].kill("DELETED", "deleted")
        del self.jobs[job_id]

    def inject(self, method: str, path: str, *kinds, retry_after: float | None = None) -> None:
        """Answer the next calls of `method` whose path contains `path` with these faults, one
        call each: an HTTP status (e.g. 503, 429) or "reset" (the connection drops mid-answer)."""
        for kind in kinds:
            self.faults.append(Fault(method, path, kind, retry_after))


# ---- Jobs ---------------------------------------------------------------------------------
# The routes huggingface_hub 2.4's HfApi calls: run_job / run_uv_job (POST /api/jobs/NS with
# the spec _create_job_spec builds), inspect_job (GET /api/jobs/NS/ID), list_jobs (GET
# /api/jobs/NS, repeated `label=K=V` and `stage=S` filters), cancel_job (POST .../cancel),
# fetch_job_logs (GET .../logs, server-sent events `data: {"timestamp", "data"}`) and
# list_jobs_hardware (GET /api/jobs/hardware). As on the Hub: every call needs a token (401
# without; with `accounts`, 403 outside the account's namespaces, and starting or cancelling
# needs a write token); the flavour must be one of the Hub's hardware (`JobHardware`), else
# 400; a spec field the fake does not know, or does not run (volumes, ports, ssh, network,
# resource groups, attempts), is refused with 400 rather than ignored. A Job runs its command
# here as a local subprocess (the image is not pulled) with only what the image gives
# (IMAGE_ENVIRONMENT: PATH, and a home folder of its own) plus the Job's env and secrets,
# nothing of the caller's environment, and is killed at its timeout (stage ERROR, "Job
# timeout"). `JOB_SPEC_FIELDS` and `JOB_INFO_NOT_SERVED` say what the fake takes and answers;
# tests/test_fakehub_jobs.py compares them with the installed huggingface_hub.

# the spec fields run_job sends (huggingface_hub's _create_job_spec) -> run here (True) or refused (False)
JOB_SPEC_FIELDS = {"command": True, "arguments": True, "environment": True, "secrets": True, "flavor": True,
                   "timeoutSeconds": True, "labels": True, "dockerImage": True, "spaceId": True, "attempts": False,
                   "volumes": False, "expose": False, "ssh": False, "network": False, "resourceGroupId": False}
# run_job's parameters -> the spec field each becomes (None: not a spec field)
RUN_JOB_PARAMETERS = {"image": "dockerImage", "command": "command", "env": "environment", "secrets": "secrets",
                      "flavor": "flavor", "timeout": "timeoutSeconds", "attempts": "attempts", "name": "labels",
                      "labels": "labels", "volumes": "volumes", "expose": "expose", "expose_public": "expose",
                      "ssh": "ssh", "network_group": "network", "network_aliases": "network",
                      "resource_group_id": "resourceGroupId", "namespace": None, "token": None}
# JobInfo / JobStatus fields the fake's answers leave unset, and why
JOB_INFO_NOT_SERVED = {"space_id": "Jobs here run a Docker image", "volumes": "refused when asked",
                       "network": "refused when asked", "retry": "attempts are refused when asked",
                       "expose": "refused when asked", "expose_public": "refused when asked"}
JOB_STATUS_NOT_SERVED = {"expose_urls": "no port is exposed", "ssh_url": "ssh is refused when asked"}
IMAGE_ENVIRONMENT = ("PATH",)
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# USD per hour of each flavour (the Hub's Jobs pricing page, 2026-08-21); tests may change `hub.job_prices`
JOB_PRICES = {"cpu-basic": 0.01, "cpu-upgrade": 0.03, "cpu-performance": 1.90, "cpu-xl": 1.00, "t4-small": 0.40,
              "t4-medium": 0.60, "l4x1": 0.80, "l4x4": 3.80, "l40sx1": 1.80, "l40sx4": 8.30, "l40sx8": 23.50,
              "a10g-small": 1.00, "a10g-large": 1.50, "a10g-largex2": 3.00, "a10g-largex4": 5.00, "a100-large": 2.50,
              "a100x4": 10.00, "a100x8": 20.00, "h200": 5.00, "h200x2": 10.00, "h200x4": 20.00, "h200x8": 40.00,
              "rtx-pro-6000": 2.75, "rtx-pro-6000x2": 5.50, "rtx-pro-6000x4": 11.00, "rtx-pro-6000x8": 22.00}


def job_flavors() -> tuple[str, ...]:
    from huggingface_hub import JobHardware

    return tuple(flavor.value for flavor in JobHardware)


def _hardware(name: str, usd_per_hour: float) -> dict:
    """One entry of GET /api/jobs/hardware, as the Hub lists it (per-minute cost)."""
    import re

    count = re.search(r"x(\d+)$", name)
    gpus = 0 if name.startswith("cpu-") else int(count.group(1)) if count else 1
    model = re.sub(r"x\d+$", "", name).split("-")[0].upper()
    per_minute = usd_per_hour / 60
    return {"name": name, "prettyName": name, "cpu": f"{max(2, 8 * gpus)} vCPU", "ram": f"{max(16, 60 * gpus)} GB",
            "ephemeralStorage": "50 GB",
            "accelerator": {"type": "gpu", "model": model, "quantity": str(gpus), "vram": "48 GB",
                            "manufacturer": "Nvidia"} if gpus else None,
            "unitCostMicroUSD": round(per_minute * 1e6), "unitCostUSD": per_minute, "unitLabel": "minute"}


@dataclass
class FakeJob:
    id: str
    namespace: str
    spec: dict
    owner: dict
    created: float = field(default_factory=time.time)
    stage: str = "SCHEDULING"
    message: str | None = None
    started: float | None = None
    finished: float | None = None
    logs: list[tuple[float, str]] = field(default_factory=list)
    proc: object = None
    reader: object = None
    home: object = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        import os
        import subprocess
        import tempfile

        self.home = tempfile.TemporaryDirectory(prefix="fake-job-home-")
        env = {k: os.environ[k] for k in IMAGE_ENVIRONMENT if k in os.environ}
        env["HOME"] = self.home.name
        env.update({k: str(v) for k, v in (self.spec.get("environment") or {}).items()})
        env.update({k: str(v) for k, v in (self.spec.get("secrets") or {}).items()})
        self.proc = subprocess.Popen(list(self.spec["command"]) + list(self.spec.get("arguments") or []), env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.stage, self.started = "RUNNING", time.time()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=self._wait, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.logs.append((time.time(), line.decode("utf-8", "replace").rstrip("\n")))

    def _wait(self) -> None:
        import os
        import signal
        import subprocess

        timeout = self.spec.get("timeoutSeconds")
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill("ERROR", "Job timeout")
            return
        # the container ends with its command (a child left behind goes with it); then the Job's logs are
        # complete, as on the Hub: the exit can come before the last lines are read
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.reader.join()
        with self.lock:
            if self.finished is None:
                self.stage = "COMPLETED" if rc == 0 else "ERROR"
                self.message = None if rc == 0 else f"exit code {rc}"
                self.finished = time.time()

    def kill(self, stage: str, message: str) -> None:
        import os
        import signal

        with self.lock:
            if self.finished is not None:
                return
            self.stage, self.message, self.finished = stage, message, time.time()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            pass

    def info(self) -> dict:
        def iso(ts):
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z" if ts else None

        now = time.time()
        running = None if self.started is None else int((self.finished or now) - self.started)
        return {
            "id": self.id, "createdAt": iso(self.created), "startedAt": iso(self.started),
            "finishedAt": iso(self.finished), "dockerImage": self.spec.get("dockerImage"),
            "command": self.spec["command"],
            "arguments": self.spec.get("arguments") or [], "environment": self.spec.get("environment") or {},
            # the Hub shows a secret's name, never its value
            "secrets": sorted(self.spec.get("secrets") or {}), "flavor": self.spec.get("flavor"),
            "labels": self.spec.get("labels") or {},
            "owner": {"id": self.namespace, "name": self.namespace, "type": "org"},
            "initiator": self.owner,
            "status": {"stage": self.stage, "message": self.message},
            "durations": {"schedulingSecs": int((self.started or now) - self.created), "runningSecs": running,
                          "totalSecs": int((self.finished or now) - self.created)},
        }


def _job_spec_problem(spec: dict) -> str | None:
    """Why the Hub would refuse this spec (or the fake cannot run it), or None."""
    unknown = sorted(set(spec) - set(JOB_SPEC_FIELDS))
    if unknown:
        return f"unknown field(s) in the Job spec: {', '.join(unknown)}"
    unsupported = sorted(k for k in spec if not JOB_SPEC_FIELDS[k])
    if unsupported:
        return f"the fake Hub does not run Jobs with {', '.join(unsupported)}"
    if not isinstance(spec.get("command"), list) or not spec["command"]:
        return "command must be a non-empty list"
    if not spec.get("dockerImage"):
        return "dockerImage is required (the fake runs no Space images)"
    if spec.get("flavor") not in job_flavors():
        return f"Invalid flavor {spec.get('flavor')!r}: expected one of {', '.join(job_flavors())}"
    for key in ("environment", "secrets", "labels"):
        value = spec.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return f"{key} must be an object of strings"
    return None


def _bind_jobs(app: FastAPI, hub: "FakeHub") -> None:
    from fastapi.responses import StreamingResponse

    def member(request: Request, ns: str, *, write: bool) -> JSONResponse | None:
        """A token is required; with accounts, one of the namespace (a write token to start or cancel)."""
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return _error(401, "You must be authenticated to access Jobs")
        if write:
            return hub._write_error(request, ns)
        if (err := hub._auth_error(request)) is not None:
            return err
        account = hub._account(request)
        if hub.accounts is not None and (account is None or (ns != account.name and ns not in account.orgs)):
            return _error(403, f"You don't have access to the Jobs of {ns}", "Forbidden")
        return None

    @app.get("/api/jobs/hardware")
    def hardware(request: Request):
        return [_hardware(name, price) for name, price in hub.job_prices.items()]

    @app.post("/api/jobs/{ns}")
    async def run_job(request: Request, ns: str):
        if (err := member(request, ns, write=True)) is not None:
            return err
        spec = await request.json()
        if (problem := _job_spec_problem(spec)) is not None:
            return _error(400, problem)
        account = hub._account(request)
        initiator = {"type": "user", "id": account.name if account else "tester", "name": account.name if account else "tester"}
        job = FakeJob(uuid.uuid4().hex[:24], ns, spec, initiator)
        hub.jobs[job.id] = job
        job.start()
        return job.info()

    @app.get("/api/jobs/{ns}")
    def list_jobs(request: Request, ns: str):
        if (err := member(request, ns, write=False)) is not None:
            return err
        labels = [v.split("=", 1) for v in request.query_params.getlist("label")]
        stages = set(request.query_params.getlist("stage"))
        return [job.info() for job in list(hub.jobs.values())
                if job.namespace == ns and (not stages or job.stage in stages)
                and all((job.spec.get("labels") or {}).get(k) == v for k, v in labels)]

    @app.get("/api/jobs/{ns}/{job_id}")
    def inspect_job(request: Request, ns: str, job_id: str):
        if (err := member(request, ns, write=False)) is not None:
            return err
        job = hub.jobs.get(job_id)
        if job is None or job.namespace != ns:
            return _error(404, f"Job {job_id} not found")
        return job.info()

    @app.post("/api/jobs/{ns}/{job_id}/cancel")
    def cancel_job(request: Request, ns: str, job_id: str):
        if (err := member(request, ns, write=True)) is not None:
            return err
        job = hub.jobs.get(job_id)
        if job is None or job.namespace != ns:
            return _error(404, f"Job {job_id} not found")
        job.kill("CANCELED", "cancelled")
        return job.info()

    @app.get("/api/jobs/{ns}/{job_id}/logs")
    def job_logs(request: Request, ns: str, job_id: str):
        if (err := member(request, ns, write=False)) is not None:
            return err
        job = hub.jobs.get(job_id)
        if job is None or job.namespace != ns:
            return _error(404, f"Job {job_id} not found")

        def events():
            yield 'data: {"timestamp": "%s", "data": "===== Job started ====="}\n\n' % _iso_now(job.created)
            for ts, line in list(job.logs):
                yield f"data: {json.dumps({'timestamp': _iso_now(ts), 'data': line})}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


def _iso_now(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


# ---- Faults --------------------------------------------------------------------------------
# The Hub's passing faults, injected by tests (`hub.inject(method, path, *kinds)`): the next
# call whose method matches and whose path contains `path` is answered with the fault instead
# (each fault once): an HTTP status (5xx, or 429 with Retry-After) or a connection that drops
# mid-answer. `hub.faults_served` lists those answered.

@dataclass
class Fault:
    method: str
    path: str
    kind: int | str  # an HTTP status, or "reset"
    retry_after: float | None = None


class _Door:
    """Every request passes here: an injected fault (`FakeHub.faults`) is served in its place,
    else it is logged (`FakeHub.requests`) and answered. Plain ASGI: Starlette's
    `@app.middleware("http")` runs each request through a task group and memory streams, a
    third of a request's CPU here."""

    def __init__(self, app, hub: "FakeHub") -> None:
        self.app, self.hub = app, hub

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path, hub = scope["method"], scope["path"], self.hub
        with hub.lock:
            fault = next((f for f in hub.faults if f.method == method and f.path in path), None)
            if fault is not None:
                hub.faults.remove(fault)
                hub.faults_served.append(fault)
        send = _dated(send)
        if fault is None:
            hub.requests.append(f"{method} {path}")
            return await self.app(scope, receive, send)
        if fault.kind == "reset":
            answer = _CutConnection(path)
        else:
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            answer = JSONResponse({"error": "the fake Hub's injected fault"}, status_code=int(fault.kind), headers=headers)
        await answer(scope, receive, send)


def _dated(send):
    """`send` with the time of the answer as its Date header."""
    async def dated(message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"date", formatdate(usegmt=True).encode())]}
        await send(message)

    return dated
