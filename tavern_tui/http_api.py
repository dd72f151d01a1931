"""Provides the optional HTTP surface of the persona: six routes under `/v1/persona`, off by default.

Rules: seed 002 ADR-0079 decision 10 (issue 7 §8). The routes mount only when
`TAVERN_PERSONA_API_ENABLED` is set (to anything but "", "0", "false", "no"); without it no
`/v1/persona` route exists at all. Each route carries exactly one scope, `persona.read` or
`persona.write`, checked against bearer tokens from `TAVERN_PERSONA_API_TOKENS`. Every route
calls the `Tavern` service (never the store), in a worker thread; writes carry
`expected_version` and a stale one is the existing `Conflict`. No route writes beliefs: there
is no belief create, edit or delete route, and affirm/decline set their marks through the
service's governed lifecycle. Tokens are never logged, echoed or returned.

Routes (JSON in and out):

    GET  /v1/health                                    -> {"ok": true}               (always, no token)
    GET  /v1/persona                          read     -> PersonaDocument.to_json()
    PUT  /v1/persona                          write    {"expected_version": N, "add"?, "sensitivity"?,
                                                         "remove"?, "entries"?, "name"?} -> document
    GET  /v1/persona/history                  read     -> [document, ...] newest first
    GET  /v1/persona/nominations              read     -> [Belief.to_json() + {"messages": [{"ref": [session, seq],
                                                                                              "text": str}]}, ...]
    POST /v1/persona/nominations/{id}/affirm  write    {"expected_version"?: N} -> document
    POST /v1/persona/nominations/{id}/decline write    -> Belief.to_json()

Errors: 401 (`WWW-Authenticate: Bearer`) missing or unknown token; 403 token without the
route's scope; 400 `bad_json` / `bad_request` (any other `TavernError`); 404 `not_found`;
409 `conflict` (`expected`, `current`); 413 `too_large`; 422 `invalid` (a field's type) or
`secret_refused` (`kind`; the secret is never echoed).
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tavern_tui.errors import Conflict, FormatError, NotFound, SecretRefused, TavernError
from tavern_tui.formats.jsontypes import loads_bounded

if TYPE_CHECKING:
    from tavern_tui.persona.model import Belief
    from tavern_tui.service import Tavern

logger = logging.getLogger(__name__)

ENABLE_ENV = "TAVERN_PERSONA_API_ENABLED"
"""Mounts the persona routes when set to a non-empty value other than "0", "false" or "no"."""

TOKENS_ENV = "TAVERN_PERSONA_API_TOKENS"
"""Bearer tokens and their scopes: "TOKEN:persona.read+persona.write,OTHER:persona.read"."""

READ = "persona.read"
WRITE = "persona.write"
SCOPES = frozenset({READ, WRITE})
"""The only scopes (seed 002 ADR-0079 decision 10: each route carries exactly one)."""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Hosts `serve` binds to; anything else is refused."""

MAX_BODY = 1 << 20
MAX_ID = 2**63 - 1
"""Largest id a route takes (the databases' 64-bit integer); a larger one is simply not found."""
"""Largest request body read (bytes); a larger one is refused with 413."""

_OFF = ("", "0", "false", "no")

_EDIT_FIELDS: dict[str, tuple[type, ...]] = {"add": (str,), "sensitivity": (str,), "remove": (int,),
                                             "entries": (list,), "name": (str,)}

Handler = Callable[[Request, dict[str, Any]], Awaitable[Any]]


def enabled_from_env() -> bool:
    """True when `TAVERN_PERSONA_API_ENABLED` is set to something other than "", "0", "false", "no"."""
    return os.environ.get(ENABLE_ENV, "").strip().lower() not in _OFF


def parse_tokens(text: str) -> dict[str, frozenset[str]]:
    """Read the token list: comma-separated `TOKEN:SCOPE[+SCOPE]` items (seed 002 ADR-0079 decision 10).

    Blank text (or blank items) give no tokens. A token is the text before the last colon, with
    no whitespace; scopes are `persona.read` and `persona.write`.

    Returns:
        token -> its scopes.

    Raises:
        TavernError: a malformed item, an unknown scope or a token given twice. The message names
            the item by its 1-based position in the list and never echoes any of its text.
    """
    tokens: dict[str, frozenset[str]] = {}
    for index, raw in enumerate((text or "").split(","), start=1):
        item = raw.strip()
        if not item:
            continue
        where = f"{TOKENS_ENV}: item {index}"
        token, colon, scope_text = item.rpartition(":")
        token = token.strip()
        if not colon or not token:
            raise TavernError(f"{where}: expected TOKEN:SCOPE[+SCOPE] (scopes: {READ}, {WRITE})")
        if any(ch.isspace() for ch in token):
            raise TavernError(f"{where}: a token cannot contain whitespace")
        scopes = [s.strip() for s in scope_text.split("+")]
        if not scopes or any(s not in SCOPES for s in scopes):
            raise TavernError(f"{where}: unknown or empty scope; allowed: {READ}, {WRITE} (joined by +)")
        if token in tokens:
            raise TavernError(f"{where}: this token is already listed in an earlier item")
        tokens[token] = frozenset(scopes)
    return tokens


def _error(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": error, "message": message, **extra}, status_code=status, headers=headers)


def _scopes_of(request: Request, tokens: dict[str, frozenset[str]]) -> frozenset[str] | None:
    """The scopes of the request's bearer token, or None (missing or unknown). Compares against
    every token in constant time per token, so timing does not say which one nearly matched."""
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not given:
        return None
    found: frozenset[str] | None = None
    probe = given.encode("utf-8", "surrogatepass")
    for token, scopes in tokens.items():
        if hmac.compare_digest(probe, token.encode("utf-8", "surrogatepass")):
            found = scopes
    return found


async def _json_body(request: Request, *, required: bool) -> dict[str, Any]:
    """The request's JSON object ({} for an empty body when not `required`).

    Raises:
        _Reply: 413 too large, 400 bad JSON, 422 not an object or missing.
    """
    length = request.headers.get("content-length", "")
    if length.isdigit() and (len(length) > 12 or int(length) > MAX_BODY):
        raise _Reply(_error(413, "too_large", f"the request body is over {MAX_BODY} bytes"))
    # Read chunk by chunk and stop past the cap: a chunked body has no length to check first.
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > MAX_BODY:
            raise _Reply(_error(413, "too_large", f"the request body is over {MAX_BODY} bytes"))
    raw = bytes(received)
    if not raw.strip():
        if required:
            raise _Reply(_error(422, "invalid", "a JSON object body is required", field="body"))
        return {}
    try:
        # Bounded: nesting, string and number sizes, and no lone surrogate (issue 23 item 7).
        body = loads_bounded(raw.decode("utf-8"), "request body")
    except FormatError as exc:
        raise _Reply(_error(422, "invalid", exc.reason, field=exc.field or "body")) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Reply(_error(400, "bad_json", f"the request body is not valid JSON: {exc.__class__.__name__}")) from None
    if not isinstance(body, dict):
        raise _Reply(_error(422, "invalid", "the request body must be a JSON object", field="body"))
    return body


def _version(body: dict[str, Any], *, required: bool) -> int | None:
    value = body.get("expected_version")
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Reply(_error(422, "invalid", "\"expected_version\" is required and must be an integer "
                            "(the persona version you read)", field="expected_version"))
    return value


def _only(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _Reply(_error(422, "invalid", f"unknown field(s): {', '.join(unknown)}; allowed: "
                            f"{', '.join(sorted(allowed)) or 'none'}", field=unknown[0]))


class _Reply(Exception):
    """Carries a ready error response out of a request helper."""

    def __init__(self, response: Response) -> None:
        super().__init__("reply")
        self.response = response


def _guard(scope: str, tokens: dict[str, frozenset[str]], handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler with the bearer check for `scope` and the error mapping of the module doc."""

    async def endpoint(request: Request) -> Response:
        scopes = _scopes_of(request, tokens)
        if scopes is None:
            return _error(401, "unauthorized", "a valid bearer token is required (Authorization: Bearer TOKEN)")
        if scope not in scopes:
            return _error(403, "forbidden", f"this token lacks the {scope} scope")
        params = dict(request.path_params)
        if any(isinstance(v, int) and not 0 <= v <= MAX_ID for v in params.values()):
            return _error(404, "not_found", "no such id (ids are whole numbers below 2^63)")
        try:
            result = await handler(request, params)
        except _Reply as reply:
            return reply.response
        except Conflict as exc:
            return _error(409, "conflict", str(exc), expected=exc.expected, current=exc.current)
        except SecretRefused as exc:
            return _error(422, "secret_refused", str(exc), kind=exc.kind)
        except NotFound as exc:
            return _error(404, "not_found", str(exc))
        except TavernError as exc:
            return _error(400, "bad_request", str(exc))
        return JSONResponse(result)

    endpoint.__name__ = getattr(handler, "__name__", "endpoint")
    endpoint.__doc__ = handler.__doc__
    return endpoint


def _nomination_json(tavern: Tavern, belief: Belief) -> dict[str, Any]:
    return {**belief.to_json(),
            "messages": [{"ref": [ref[0], ref[1]], "text": text}
                         for ref, text in tavern.persona.supporting_messages(belief)]}


def build_app(tavern: Tavern, *, enabled: bool | None = None,
              tokens: dict[str, frozenset[str]] | None = None, hosts: Sequence[str] | None = None) -> Starlette:
    """The ASGI app of the persona surface (seed 002 ADR-0079 decision 10).

    Args:
        tavern: the service every route calls (never its store).
        enabled: mount the `/v1/persona` routes; None = from `TAVERN_PERSONA_API_ENABLED`.
            Without it every `/v1/persona` path is 404. `GET /v1/health` always exists.
        tokens: token -> scopes; None = `parse_tokens(TAVERN_PERSONA_API_TOKENS)` (read only when
            enabled). No tokens means every persona route answers 401.
        hosts: the `Host` header values answered (`serve` passes its bound loopback names); any
            other is refused with 400, so a web page cannot reach the API by DNS rebinding. None:
            no check (an in-process test client).

    Returns:
        A Starlette app; the routes and their shapes are listed in the module docstring.

    Raises:
        TavernError: enabled and the token variable is malformed (names the item, not the token).
    """
    if enabled is None:
        enabled = enabled_from_env()

    async def health(request: Request) -> Response:
        """Liveness: {"ok": true}."""
        return JSONResponse({"ok": True})

    routes = [Route("/v1/health", health, methods=["GET"])]
    if enabled:
        if tokens is None:
            tokens = parse_tokens(os.environ.get(TOKENS_ENV, ""))
        tokens = dict(tokens)
        if not tokens:
            logger.warning("persona API enabled without tokens (%s): every persona route answers 401", TOKENS_ENV)
        routes += _persona_routes(tavern, tokens)
    if hosts is None:
        return Starlette(routes=routes)
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))])


def _persona_routes(tavern: Tavern, tokens: dict[str, frozenset[str]]) -> list[Route]:
    async def show(request: Request, params: dict[str, Any]) -> Any:
        """The current persona document."""
        return (await run_in_threadpool(tavern.persona.persona)).to_json()

    async def edit(request: Request, params: dict[str, Any]) -> Any:
        """Write the next revision: add, sensitivity, remove, entries, name; expected_version required."""
        body = await _json_body(request, required=True)
        _only(body, {"expected_version", *_EDIT_FIELDS})
        version = _version(body, required=True)
        changes: dict[str, Any] = {}
        for name, types in _EDIT_FIELDS.items():
            value = body.get(name)
            if value is None:
                continue
            if not isinstance(value, types) or isinstance(value, bool):
                kind = {str: "a string", int: "an integer", list: "a list"}[types[0]]
                raise _Reply(_error(422, "invalid", f"\"{name}\" must be {kind}", field=name))
            changes[name] = value
        doc = await run_in_threadpool(tavern.persona.edit_persona, version, where="persona (HTTP)", **changes)
        return doc.to_json()

    async def history(request: Request, params: dict[str, Any]) -> Any:
        """Every revision, newest first."""
        return [doc.to_json() for doc in await run_in_threadpool(tavern.persona.persona_history)]

    async def nominations(request: Request, params: dict[str, Any]) -> Any:
        """The outstanding nominations, each with the messages that support it."""
        def read() -> list[dict[str, Any]]:
            return [_nomination_json(tavern, belief) for belief in tavern.persona.nominations()]
        return await run_in_threadpool(read)

    async def affirm(request: Request, params: dict[str, Any]) -> Any:
        """Affirm a nomination into the persona (optional expected_version)."""
        body = await _json_body(request, required=False)
        _only(body, {"expected_version"})
        version = _version(body, required=False)
        doc = await run_in_threadpool(tavern.persona.affirm, params["belief_id"], expected_version=version)
        return doc.to_json()

    async def decline(request: Request, params: dict[str, Any]) -> Any:
        """Decline a nomination (its key is never nominated again)."""
        body = await _json_body(request, required=False)
        _only(body, set())
        return (await run_in_threadpool(tavern.persona.decline, params["belief_id"])).to_json()

    return [
        Route("/v1/persona", _guard(READ, tokens, show), methods=["GET"]),
        Route("/v1/persona", _guard(WRITE, tokens, edit), methods=["PUT"]),
        Route("/v1/persona/history", _guard(READ, tokens, history), methods=["GET"]),
        Route("/v1/persona/nominations", _guard(READ, tokens, nominations), methods=["GET"]),
        Route("/v1/persona/nominations/{belief_id:int}/affirm", _guard(WRITE, tokens, affirm), methods=["POST"]),
        Route("/v1/persona/nominations/{belief_id:int}/decline", _guard(WRITE, tokens, decline), methods=["POST"]),
    ]


def serve(tavern: Tavern, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve `build_app(tavern)` with uvicorn on a loopback address until stopped.

    The persona surface is local-only (seed 002 ADR-0079 decision 10 with the default-off gate):
    any host but 127.0.0.1, localhost or ::1 is refused before anything binds.

    Raises:
        TavernError: a non-loopback host, or a malformed token variable.
    """
    if host not in LOOPBACK_HOSTS:
        raise TavernError(f"the persona API binds to loopback only ({', '.join(LOOPBACK_HOSTS)}); "
                          f"refused host {host!r}")
    # The names a local client may use for this address (a browser's Host has no port here).
    app = build_app(tavern, hosts=["127.0.0.1", "localhost"] if host != "::1" else ["[::1]", "localhost"])
    import uvicorn

    uvicorn.run(app, host=host, port=port)
