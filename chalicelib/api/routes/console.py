"""The console (``/console``): a page for the people who run Engram — the stores and their files, searches with
each leg's score, what is remembered about whom and why, what a response recalled, the jobs — served by Engram
itself from the files under ``chalicelib/api/console/`` (plain HTML, CSS and JavaScript: no build step, nothing
fetched from another site at run time).

The page and its assets need no API key; everything they show comes from the API, called by the page with the key
the user typed (kept in the tab's ``sessionStorage``), under the same tenant, permission and memory-scope rules as
any client: the console has no route of its own beyond its files. The responses carry a Content-Security-Policy
that lets the page load only its own files and talk only to its own origin.
"""

from __future__ import annotations

import functools
from importlib import resources

from chalice import Blueprint
from chalice.app import Response

from chalicelib.api.query import accepts
from chalicelib.errors import NotFoundError

bp = Blueprint(__name__)

PATH = "/console"
# The files the page is made of: name → Content-Type. Anything else under /console/ is a 404.
ASSETS = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
PAGE = "index.html"
# Only this origin's own files and API; no inline script or style, no frames, no forms posted elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


@functools.cache
def _read(name: str) -> str:
    return (resources.files("chalicelib.api") / "console" / name).read_text("utf-8")


def _file(name: str, content_type: str) -> Response:
    return Response(body=_read(name), status_code=200, headers={"Content-Type": content_type, **SECURITY_HEADERS})


@bp.route(PATH, methods=["GET"])
@accepts()
def console_page() -> Response:
    """The console's page (HTML; no key needed: it asks for one and keeps it in the tab's session only)."""
    return _file(PAGE, "text/html; charset=utf-8")


@bp.route(PATH + "/{asset}", methods=["GET"])
@accepts()
def console_asset(asset: str) -> Response:
    """One of the console's files (:data:`ASSETS`).

    Raises:
        NotFoundError: any other name.
    """
    content_type = ASSETS.get(asset)
    if content_type is None:
        raise NotFoundError(f"Invalid URL (GET {PATH}/{asset[:64]})", code=None)
    return _file(asset, content_type)
