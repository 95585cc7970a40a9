"""Shapes of the API's JSON. No logic: the values come from the selectors.

One module per area: problems, leaderboard (boards and per-problem rankings), submissions
(with their results, artifacts and the profiles offered), quota, accounts (teams and the
caller); help texts several share are in common.
"""

from portal.api.serializers.accounts import (
    MemberSerializer,
    MeSerializer,
    OwnTeamSerializer,
    TeamDetailSerializer,
    TeamSerializer,
    TokenInfoSerializer,
)
from portal.api.serializers.common import (
    INTERVAL_HELP,
    REF_TIME_HELP,
    TIME_HELP,
    TIMES,
)
from portal.api.serializers.leaderboard import (
    BoardSerializer,
    ColumnSerializer,
    ProblemExampleRowSerializer,
    ProblemRankingRowSerializer,
    ProblemRankingSerializer,
    RowSerializer,
    ScoreSerializer,
)
from portal.api.serializers.problems import (
    ProblemDetailSerializer,
    ProblemSerializer,
)
from portal.api.serializers.quota import (
    ModeQuotaSerializer,
    QuotaSerializer,
    QuotaWindowSerializer,
)
from portal.api.serializers.submissions import (
    MODE_HELP,
    ArtifactSerializer,
    ProblemResultSerializer,
    ProfileOfferSerializer,
    ResultRunSerializer,
    SubmissionCreatedSerializer,
    SubmissionCreateSerializer,
    SubmissionLinksMixin,
    SubmissionSerializer,
    SubmissionSummarySerializer,
)

__all__ = [
    "ArtifactSerializer",
    "BoardSerializer",
    "ColumnSerializer",
    "INTERVAL_HELP",
    "MODE_HELP",
    "MeSerializer",
    "MemberSerializer",
    "ModeQuotaSerializer",
    "OwnTeamSerializer",
    "ProblemDetailSerializer",
    "ProblemExampleRowSerializer",
    "ProblemRankingRowSerializer",
    "ProblemRankingSerializer",
    "ProblemResultSerializer",
    "ProblemSerializer",
    "ProfileOfferSerializer",
    "QuotaSerializer",
    "QuotaWindowSerializer",
    "REF_TIME_HELP",
    "ResultRunSerializer",
    "RowSerializer",
    "ScoreSerializer",
    "SubmissionCreateSerializer",
    "SubmissionCreatedSerializer",
    "SubmissionLinksMixin",
    "SubmissionSerializer",
    "SubmissionSummarySerializer",
    "TIMES",
    "TIME_HELP",
    "TeamDetailSerializer",
    "TeamSerializer",
    "TokenInfoSerializer",
]
