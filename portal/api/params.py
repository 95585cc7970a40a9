"""The API's query parameters: their schema, and reading them strictly (a value given twice,
empty or unknown is a 400, never a guess)."""

from __future__ import annotations

from collections.abc import Collection

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from evaluator.face import PROFILES
from portal.problems.models import Category

PROFILE_PARAMETER = OpenApiParameter(
    "profile",
    OpenApiTypes.STR,
    enum=sorted(PROFILES),
    description="Hardware profile; results of different profiles are never ranked together.",
)
CATEGORY_PARAMETER = OpenApiParameter("category", OpenApiTypes.STR, enum=Category.values)
ERROR = OpenApiResponse(description='`{"detail": "..."}`')
WHO = ("all", "people", "models")  # portal.entries.models.Who
WHO_PARAMETER = OpenApiParameter(
    "who",
    OpenApiTypes.STR,
    enum=WHO,
    description="Whose rows: people (teams), models (model and agent entries, each scored as "
    "one sample per problem: fast_1@1, pass@1) or all (the default).",
)


class Pagination(LimitOffsetPagination):
    """DRF's limit/offset, except that a value that is no whole number, or a limit above
    max_limit, is a 400: DRF would quietly read `offset=null` as 0, `limit=x` as the
    default and `limit=100000` as max_limit. Every API list is paginated with it (issue 51:
    an unpaginated /api/entries/ sent every entry to every anonymous GET);
    tests/portal/api/test_pagination.py holds the schema to that."""

    default_limit = 50
    max_limit = 200

    def get_limit(self, request: Request) -> int | None:
        _whole_number(request, self.limit_query_param, minimum=1)
        asked = request.query_params.get(self.limit_query_param)
        if asked is not None and int(asked) > self.max_limit:
            raise ValidationError(
                {self.limit_query_param: [f"at most {self.max_limit} items a page; asked {asked}."]}
            )
        return super().get_limit(request)

    def get_offset(self, request: Request) -> int:
        _whole_number(request, self.offset_query_param, minimum=0)
        return super().get_offset(request)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        minimum = {self.limit_query_param: 1, self.offset_query_param: 0}
        for parameter in parameters:
            parameter["schema"]["minimum"] = minimum[parameter["name"]]
            parameter["description"] += f" Given at most once: {ONCE}"
            if parameter["name"] == self.limit_query_param:
                parameter["schema"]["maximum"] = self.max_limit
                parameter["description"] += (
                    f" {self.default_limit} when not given, at most {self.max_limit}."
                )
        return parameters


ONCE = "a parameter given more than once (`?limit=1&limit=2`) is a 400."

# A board's rows in pages as every list is (`Pagination`'s bounds): a board holds a row for
# every team and entry with a counted result, which nothing else bounds.
ROW_PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": Pagination.max_limit},
        description=f"Rows a page: {Pagination.default_limit} when not given, at most "
        f"{Pagination.max_limit}. Given at most once: {ONCE}",
    ),
    OpenApiParameter(
        "offset",
        {"type": "integer", "minimum": 0},
        description=f"Rows to skip. Given at most once: {ONCE}",
    ),
]


def row_page(request: Request, rows: list) -> dict:
    """One page of a board's rows and where it stands: `count` (every row), `limit`,
    `offset`, read strictly as a paginated list's are."""
    pages = Pagination()
    limit = pages.get_limit(request) or Pagination.default_limit
    offset = pages.get_offset(request)
    return {
        "rows": rows[offset : offset + limit],
        "count": len(rows),
        "limit": limit,
        "offset": offset,
    }


def _single(request: Request, name: str) -> str | None:
    """The query parameter's one value. Given twice, Django would quietly take the last
    and DRF's own checks the same: which one a client meant is unknowable, so a 400."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ValidationError({name: [f"given {len(values)} times ({values!r}); give it once."]})
    return values[0] if values else None


def _whole_number(request: Request, name: str, *, minimum: int) -> None:
    value = _single(request, name)
    if value is not None and not (value.isdigit() and value.isascii() and int(value) >= minimum):
        raise ValidationError({name: [f"{value!r} is not a whole number of at least {minimum}."]})


def query_choice(request: Request, name: str, choices: Collection[str]) -> str | None:
    """A query parameter from a fixed set; absent is None, but empty, unknown or repeated
    is a 400."""
    value = _single(request, name)
    if value is not None and value not in choices:
        raise ValidationError({name: [f"{value!r} is not one of: {', '.join(sorted(choices))}."]})
    return value


class KnownQuery:
    """A mixin for the API's views: a query parameter the view does not take is a 400 that
    names it (`?mode=test` on a list was quietly ignored, so a client believed it filtered).
    `query_parameters` are those its GET takes; a paginated view adds limit and offset; no
    other method takes any. tests/portal/api/test_query_parameters.py holds them to the
    schema."""

    query_parameters: tuple[str, ...] = ()

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if not hasattr(self, request.method.lower()):
            return  # a method the view does not take is a 405 (dispatch says so), not a 400
        taken = set()
        if request.method in ("GET", "HEAD"):
            taken = set(self.query_parameters)
            if getattr(self, "pagination_class", None):
                taken |= {"limit", "offset"}
        unknown = sorted(set(request.query_params) - taken)
        if unknown:
            takes = f"it takes {', '.join(sorted(taken))}" if taken else "it takes none"
            raise ValidationError(
                {name: [f"unknown query parameter for this endpoint; {takes}."] for name in unknown}
            )
