"""A small client of the site's REST API; every failure becomes an ApiError with a message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

USER_AGENT = "pkb-cli/1"
TIMEOUT_S = 30.0


class ApiError(Exception):
    """A request that did not succeed; `message` is for people, `status` 0 means no answer."""

    def __init__(self, message: str, *, status: int = 0, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


def _detail(response: httpx.Response) -> str:
    """DRF's error body as one line: {"detail": ...} or {"field": ["...", ...]}."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, dict):
        if "detail" in body:
            return str(body["detail"])
        parts = []
        for field, messages in body.items():
            text = " ".join(messages) if isinstance(messages, list) else str(messages)
            parts.append(text if field in ("bundle", "non_field_errors") else f"{field}: {text}")
        return "; ".join(parts)
    return str(body)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None


def _error(response: httpx.Response) -> ApiError:
    status = response.status_code
    detail = _detail(response)
    if status == 401:
        message = f"{detail or 'not authenticated'} (run `pkb login`, or set PKB_TOKEN)"
    elif status == 429:
        # The site's reason (its request rate, or the team's submission limits) and the wait.
        wait = _retry_after(response)
        message = (detail or "too many requests") + (
            f" (retry after {wait:.0f} s)" if wait is not None else ""
        )
    elif status >= 500:
        message = f"the server failed (HTTP {status}); try again later"
    elif detail:
        message = detail
    elif status == 404:
        message = f"not found: {response.request.url} (is the site's address right?)"
    else:
        message = f"HTTP {status} from {response.request.url}"
    return ApiError(message, status=status, retry_after=_retry_after(response))


class Client:
    def __init__(self, url: str, token: str | None, *, transport: Any = None):
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self.url = url
        self._http = httpx.Client(
            base_url=f"{url}/api/", headers=headers, timeout=TIMEOUT_S, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise ApiError(f"{self.url} did not answer within {TIMEOUT_S:.0f} s") from None
        except httpx.TransportError as exc:
            raise ApiError(f"cannot reach {self.url}: {exc}") from None
        if response.is_error:
            raise _error(response)
        try:
            return response.json()
        except ValueError:
            raise ApiError(
                f"{response.request.url} did not answer with JSON: is {self.url} a pkb site?"
            ) from None

    def get(self, path: str, **params: Any) -> Any:
        return self._send("GET", path, params={k: v for k, v in params.items() if v})

    def get_all(self, path: str, **params: Any) -> list:
        """Every item of a paginated list, page after page at the site's page size. Pages are
        asked for by offset, not by the reply's `next` address, so that the token goes to
        the configured site only; a plain list (an older site) is taken as it is."""
        page = self.get(path, **params)
        if isinstance(page, list):
            return page
        items = list(page["results"])
        while page["next"] and page["results"] and len(items) < page["count"]:
            page = self.get(path, **params, offset=str(len(items)))
            items.extend(page["results"])
        return items

    def get_board(self, path: str, **params: Any) -> dict:
        """A board with every row, page after page (by offset, as `get_all`); an older
        site's board, whose rows come whole with no count, as it is."""
        board = self.get(path, **params)
        rows = list(board["rows"])
        while "count" in board and board["rows"] and len(rows) < board["count"]:
            board = self.get(path, **params, offset=str(len(rows)))
            rows.extend(board["rows"])
        return {**board, "rows": rows}

    def post(self, path: str, **kwargs: Any) -> Any:
        return self._send("POST", path, **kwargs)

    def submit(self, bundle: Path, **fields: str) -> dict:
        """Upload a bundle; `fields` are the form's others (mode, profile, profile_case),
        sent where given."""
        with bundle.open("rb") as fh:
            files = {"bundle": (bundle.name, fh, "application/octet-stream")}
            data = {k: v for k, v in fields.items() if v}
            return self.post("submissions/", files=files, data=data)

    def download(self, path: str) -> bytes:
        """A file the API serves as an attachment (an artifact), by its path under /api/:
        the token goes to the configured site only, whatever addresses a reply names."""
        try:
            response = self._http.get(path, headers={"Accept": "*/*"})
        except httpx.TimeoutException:
            raise ApiError(f"{self.url} did not answer within {TIMEOUT_S:.0f} s") from None
        except httpx.TransportError as exc:
            raise ApiError(f"cannot reach {self.url}: {exc}") from None
        if response.is_error:
            raise _error(response)
        return response.content
