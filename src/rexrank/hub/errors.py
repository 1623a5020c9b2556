"""The one error type of `rexrank hub`: what failed, on which repo, and what to do."""
from rexrank.errors import RexrankError


class DeployError(RexrankError):
    """A deploy cannot start or could not finish; the message names the repo."""
