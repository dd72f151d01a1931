"""Provides the error tree every layer raises; callers catch `TavernError`."""

from __future__ import annotations


class TavernError(Exception):
    """Base class of every error tavern-tui raises on purpose."""


class FormatError(TavernError):
    """A file could not be read as the format it claims to be.

    Attributes:
        file: path or name of the file, as the user gave it.
        field: the field, chunk or line that is wrong ("" when the whole file is).
        reason: a plain sentence saying what is wrong.
    """

    def __init__(self, file: str, reason: str, field: str = "") -> None:
        self.file = file
        self.field = field
        self.reason = reason
        where = f"{file}: {field}: " if field else f"{file}: "
        super().__init__(where + reason)


class OriginError(TavernError, ValueError):
    """An `origin` value outside the closed set (seed 001)."""


class StoreError(TavernError):
    """The database refused an operation or is not in the expected state."""


class AlreadyStored(StoreError):
    """An insert lost a race: another process stored the same file (the same SHA-256) first;
    the caller reads that record instead (insert-or-get)."""


class StoreBusy(StoreError):
    """Another process held the database's write lock longer than the busy timeout; nothing
    was written, and trying again later may succeed."""


class NotFound(TavernError, LookupError):
    """A character, playthrough or session id that does not exist."""


class Ambiguous(TavernError, LookupError):
    """A name that matches several stored resources (issue 20 item 7): nothing is picked; the
    message lists each match with its id and source file, and how to pick one (`--id`).

    Attributes:
        ids: the matching ids, newest first.
    """

    def __init__(self, message: str, ids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.ids = ids


class ProviderError(TavernError):
    """A model provider failed; subclasses say how.

    Attributes:
        category: short machine name of the class ("authentication", "rate_limit", …).
        status: HTTP status when there was one, else None.
        param: the request parameter the server blamed, when it named one.
    """

    category = "provider"

    def __init__(self, message: str, *, status: int | None = None, param: str | None = None) -> None:
        self.status = status
        self.param = param
        super().__init__(message)


class CallConfigError(TavernError):
    """A provider's call config cannot be used as it is (an endpoint URL that is not http(s), a
    parameter that would overwrite the request itself); raised by `Provider.prepare` before anything
    is admitted or sent (seed 000 §1 `prepareCall()`). The message names what to fix and where."""


class AuthenticationError(ProviderError):
    """The provider refused the API key (HTTP 401/403)."""

    category = "authentication"


class RateLimitError(ProviderError):
    """Rate limit or quota exhausted (HTTP 429, or an in-band quota error)."""

    category = "rate_limit"


class BadRequestError(ProviderError):
    """The provider rejected the request (HTTP 400/404/422); `param` names the field when known."""

    category = "bad_request"


class ServerError(ProviderError):
    """The provider failed on its side (HTTP 5xx or an in-band server error)."""

    category = "server"


class NetworkError(ProviderError):
    """The endpoint could not be reached or the connection broke."""

    category = "network"


class ProviderTimeout(ProviderError):
    """The provider did not answer within the configured time."""

    category = "timeout"


class Conflict(TavernError):
    """A write carried an `expected_version` that is no longer current; nothing was written.

    Attributes:
        expected: the version the caller read; current: the version now stored.
    """

    def __init__(self, what: str, expected: int, current: int) -> None:
        self.expected, self.current = expected, current
        super().__init__(f"{what} changed since you read it: expected version {expected}, "
                         f"the current version is {current}; nothing was written (read it again and retry "
                         f"with version {current})")


class SecretRefused(TavernError, ValueError):
    """Text that looks like a credential was refused before anything was stored (seed 002
    decision 11). The message names the kind and where, never the secret itself.

    Attributes:
        kind: "api_key", "bearer_token", "private_key", "password" or "jwt".
        where: the write surface or field ("persona entry", "affirm", "message", …).
        configured: the text holds the configured provider API key itself (always refused).
        overridable: the caller may store it anyway on the person's explicit say-so (a chat
            message's `allow_secrets`); False for the persona and for the configured key.
    """

    def __init__(self, kind: str, where: str, *, configured: bool = False, overridable: bool = False,
                 advice: str = "secrets never go into the persona (remove it and try again)") -> None:
        self.kind, self.where = kind, where
        self.configured, self.overridable = configured, overridable
        if configured:
            found = "the configured provider API key"
        else:
            label = kind.replace("_", " ")
            article = "an" if label[:1] in "aeiou" else "a"
            found = f"what looks like {article} {label}"
        super().__init__(f"{where}: refused: the text contains {found}; {advice}")
