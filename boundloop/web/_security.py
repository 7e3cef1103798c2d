"""Who may use the inspector, and that a POST comes from its own page.

- A token (`app(token=...)`, `boundloop serve --token`): every request carries it, as
  `Authorization: Bearer TOKEN` or as the HttpOnly cookie the login form sets; without it the
  answer is 401 (with the login form).
- CSRF: every POST carries the form field `csrf`, an HMAC of a random HttpOnly cookie under the
  server's secret; a POST without it, or with another one, is refused (403).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

SESSION_COOKIE: Final = "boundloop_session"
CSRF_COOKIE: Final = "boundloop_csrf"


class Guard:
    """The token check and the CSRF tokens of one app."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._secret = secrets.token_bytes(32)

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self._secret, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()

    def session_value(self) -> str:
        """What the login cookie holds: a MAC of the token (the token itself is never in a cookie)."""
        assert self.token is not None
        return self._mac("session", self.token)

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def allowed(self, request: Request) -> bool:
        """Whether the request may see the inspector: no token is set, or it carries it."""
        if self.token is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_matches(given.strip()):
            return True
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return bool(cookie) and hmac.compare_digest(cookie.encode(), self.session_value().encode())

    def csrf_seed(self, request: Request) -> str:
        """The request's CSRF cookie, or a new one (`remember` sets it on the response)."""
        seed = request.cookies.get(CSRF_COOKIE, "")
        if len(seed) != 64:
            seed = request.state.__dict__.setdefault("csrf_seed", secrets.token_hex(32))
        return seed

    def csrf_token(self, request: Request) -> str:
        """The form field `csrf` of this request's pages."""
        return self._mac("csrf", self.csrf_seed(request))

    def csrf_ok(self, request: Request, given: object) -> bool:
        """Whether a POST's `csrf` field is the token of its cookie."""
        seed = request.cookies.get(CSRF_COOKIE, "")
        if not isinstance(given, str) or len(seed) != 64:
            return False
        return hmac.compare_digest(given.encode(), self._mac("csrf", seed).encode())

    def remember(self, request: Request, response: Response) -> Response:
        """Set the CSRF cookie a page's forms were made with, if it is new; add the safety headers."""
        seed = request.state.__dict__.get("csrf_seed")
        if seed is not None:
            response.set_cookie(CSRF_COOKIE, seed, httponly=True, samesite="strict")
        response.headers["content-security-policy"] = (
            "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self'; "
            "style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
        response.headers["x-content-type-options"] = "nosniff"
        response.headers["referrer-policy"] = "no-referrer"
        response.headers["cache-control"] = "no-store"
        return response
