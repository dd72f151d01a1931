"""Provides `probe_endpoint`: "test connection" for the settings screen (issue 21 item 1), one
`GET {base_url}/models` (the OpenAI list-models call, which llama.cpp, vLLM, Ollama's `/v1`,
LM Studio and OpenRouter answer) and what the endpoint said."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from tavern_tui.providers.base import ProviderSettings
from tavern_tui.text.secret_values import without_credentials

PROBE_TIMEOUT = 10.0
"""Seconds the probe waits at most (the configured timeout when it is shorter)."""


@dataclass(frozen=True)
class EndpointReport:
    """What the endpoint answered to `GET /models`.

    Attributes:
        ok: it answered 2xx with a model list.
        message: one plain line for the person ("200 OK: 3 models", "401: Invalid API key",
            "cannot connect: …"); never holds the API key.
        models: the listed model ids (`data[].id`), in the endpoint's order.
    """

    ok: bool
    message: str
    models: list[str] = field(default_factory=list)


def probe_endpoint(settings: ProviderSettings) -> EndpointReport:
    """Ask `settings.base_url` for its models (a synchronous request: call it off the event loop).

    Never raises for the endpoint's behaviour: an unreachable host, a non-2xx status or a body
    that is not a model list is reported in `message`. The key is sent as `Authorization:
    Bearer` (when set) and scrubbed from anything the endpoint echoes back.
    """
    base = settings.base_url.strip().rstrip("/")
    if not base:
        return EndpointReport(False, "no endpoint set: the offline demo model answers")
    headers = {"Authorization": f"Bearer {settings.key}"} if settings.key else {}
    where = without_credentials(base) + "/models"

    def scrub(text: str) -> str:
        return text.replace(settings.key, "<key>") if settings.key else text

    try:
        response = httpx.get(base + "/models", headers=headers, timeout=min(PROBE_TIMEOUT, settings.timeout))
    except httpx.HTTPError as exc:
        return EndpointReport(False, scrub(f"cannot reach {where}: {type(exc).__name__}: {exc}"))
    if response.status_code >= 400:
        detail = response.text.strip().replace("\n", " ")[:200]
        try:
            body = response.json()
            error = body.get("error") if isinstance(body, dict) else None
            detail = str(error.get("message") if isinstance(error, dict) else error or detail)
        except ValueError:
            pass
        return EndpointReport(False, scrub(f"{where} answered {response.status_code}: {detail}"))
    try:
        listed = response.json()
    except ValueError:
        return EndpointReport(False, f"{where} answered {response.status_code}, but not with JSON")
    data = listed.get("data") if isinstance(listed, dict) else listed
    if not isinstance(data, list):
        return EndpointReport(False, f"{where} answered {response.status_code}, but with no model list (`data`)")
    models = [str(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    return EndpointReport(True, f"{where} answered {response.status_code}: {len(models)} "
                                f"model{'s' if len(models) != 1 else ''}", models)
