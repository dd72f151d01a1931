"""Provides `LOG_REDACTION`: the filter that keeps the configured credentials out of the HTTP
client's log records. httpx logs each request's URL, which may hold `user:password@`; httpcore logs
response headers, which a server may echo the key in. Rule: API keys never reach the database, a
request body, the trace, logs or the screen (DESIGN "Secrets").

Importing this module installs the filter on httpx's and httpcore's loggers; a provider adds its
secrets (`LOG_REDACTION.add`) before anything sent with them can be logged.
"""

from __future__ import annotations

import logging

from tavern_tui.providers.errors import redact

__all__ = ["LOG_REDACTION"]


class _RedactingFilter(logging.Filter):
    """Redacts the configured credentials, in any form, from the HTTP client's log records
    (httpx logs each request's URL, which may hold `user:password@`; httpcore logs response
    headers, which a server may echo the key in). Issue 23 item 3."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: list[str] = []

    def add(self, *secrets: str) -> None:
        self.secrets = list(dict.fromkeys([*self.secrets, *(s for s in secrets if s)]))

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            cleaned = redact(message, self.secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


LOG_REDACTION = _RedactingFilter()
# A filter on a logger sees only that logger's own records, so each logging module is named.
for _name in ("httpx", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy"):
    logging.getLogger(_name).addFilter(LOG_REDACTION)
