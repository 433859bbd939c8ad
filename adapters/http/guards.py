"""The one guard of every HTTP route that writes and is not signed by a chat platform (the
learning API's POSTs, and `/v1` and `/mcp` through `refusal`): the Host a write is addressed
to, its Origin or Referer, its declared content type, and the bearer token."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from learning_bot.adapters.http.responses import ApiError, error
from learning_bot.adapters.http.settings import HttpSettings


def first_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by (lower-case) name, the first of each name, as Starlette's
    `request.headers.get` reads them; one pass instead of one per lookup."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in reversed(scope["headers"])
    }


class RequestGuard:
    """Refuses a write that a browser sent from another site or to a DNS-rebound name (403),
    that is not declared as JSON (415), or that lacks the configured bearer token (401)."""

    def __init__(self, settings: HttpSettings) -> None:
        self.settings = settings

    def check(self, headers: Mapping[str, str]) -> None:
        """Raise the ApiError a write with these headers gets, if any."""
        self.same_site(headers)
        self.authorise(headers)

    def refusal(self, request: Request) -> Response | None:
        """The JSON error answering a refused write, or None to let it through."""
        try:
            self.check(first_headers(request.scope))
        except ApiError as exc:
            return error(exc.status, str(exc), **exc.extra)
        return None

    def same_site(self, headers: Mapping[str, str]) -> None:
        """Refuse a mutating request a browser sent from another site: its Origin (or, without
        one, its Referer) must be this server's own or a configured CORS origin, and its body
        must be declared as JSON (a cross-site form or no-cors fetch cannot declare it)."""
        if self.settings.allowed_hosts:
            name = urlsplit("//" + headers.get("host", "")).hostname or ""
            if name not in self.settings.allowed_hosts:
                raise ApiError(403, f"requests addressed to host {name[:100]!r} are refused")
        origin = headers.get("origin")
        source = origin
        if source is None:
            referer = headers.get("referer")
            if referer:
                parts = urlsplit(referer)
                source = f"{parts.scheme}://{parts.netloc}" if parts.netloc else "null"
        if source is not None and not self._allowed_origin(headers, source):
            raise ApiError(
                403,
                f"cross-site request refused: origin {source[:100]!r} is not this server "
                "(set LEARNING_BOT_CORS_ORIGINS to allow it)",
            )
        declared = headers.get("content-type")
        if declared is not None and declared != "application/json":
            media = declared.split(";", 1)[0].strip().lower()
            if media != "application/json" and not media.endswith("+json"):
                raise ApiError(415, "the body must be sent as Content-Type: application/json")

    def _allowed_origin(self, headers: Mapping[str, str], origin: str) -> bool:
        if origin.rstrip("/") in self.settings.cors_origins or "*" in self.settings.cors_origins:
            return True
        host = headers.get("host", "")
        parts = urlsplit(origin)
        return bool(host) and parts.scheme in ("http", "https") and parts.netloc == host

    def authorise(self, headers: Mapping[str, str]) -> None:
        token = self.settings.api_token
        if token is None:
            return
        header = headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            raise ApiError(401, "a valid bearer token is required (Authorization: Bearer ...)")
