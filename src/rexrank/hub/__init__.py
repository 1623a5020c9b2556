"""Publishing rexrank on the Hugging Face Hub: `rexrank hub deploy`.

    plan = build_plan("ORG", source=checkout, wheel=wheel_file)   # what would be published
    print(format_plan(plan))                                      # --dry-run stops here
    deploy(plan, HfApi(token=...))                                # one commit per repo that changed

Pieces: one Space per metric (`ORG/<metric>`: the evaluate module, its card, app and a
requirements.txt that installs rexrank from the wheel uploaded next to it, or from PyPI),
the leaderboard Space and the backend Space (configured for hf://ORG), the requests
(private) and results (public) dataset repos with cards, and on request the public test
sets as dataset repos. Modules: `source` (the checkout's files), `wheel` (a reproducible
wheel), `requirements`, `cards`, `testset_repo`, `plan`, `remote` (what is on the Hub and
what differs), `deploy` (writes).
"""
from rexrank.hub.deploy import deploy
from rexrank.hub.errors import DeployError
from rexrank.hub.plan import GROUPS, Plan, RepoPlan, build_plan, format_plan

__all__ = ["deploy", "build_plan", "format_plan", "Plan", "RepoPlan", "GROUPS", "DeployError"]
