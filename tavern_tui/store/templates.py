"""Provides the configuration-template repository: named selection intents (`models.ConfigTemplate`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from tavern_tui.errors import NotFound, TavernError
from tavern_tui.store.models import ConfigTemplate
from tavern_tui.store.times import as_utc


@dataclass(frozen=True, slots=True)
class TemplateRecord:
    """A stored configuration template; `data` as `ConfigTemplate.data` describes it."""

    id: int
    name: str
    data: dict[str, Any]
    created_at: datetime
    updated_at: datetime


def _record(row: ConfigTemplate) -> TemplateRecord:
    data = json.loads(row.data or "{}")
    return TemplateRecord(row.id, row.name, data if isinstance(data, dict) else {}, as_utc(row.created_at),
                          as_utc(row.updated_at))


class TemplateRepository:
    """Configuration templates: save (new or replacing one of the same name), list, get and delete by name."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def save(self, name: str, data: dict[str, Any], *, replace: bool = False) -> TemplateRecord:
        """Store `data` under `name`.

        Raises:
            TavernError: a template has that name and `replace` is False.
        """
        row = self._session.scalars(select(ConfigTemplate).where(ConfigTemplate.name == name)).first()
        now = datetime.now(UTC)
        text = json.dumps(data, ensure_ascii=False, sort_keys=True)
        if row is not None and not replace:
            raise TavernError(f"a template named {name!r} exists (save it with --force to replace it)")
        if row is None:
            row = ConfigTemplate(name=name, data=text, created_at=now, updated_at=now)
            self._session.add(row)
        else:
            row.data, row.updated_at = text, now
        self._session.flush()
        return _record(row)

    def list(self) -> list[TemplateRecord]:
        """Every template, by name."""
        return [_record(row) for row in self._session.scalars(select(ConfigTemplate).order_by(ConfigTemplate.name))]

    def get(self, name: str) -> TemplateRecord:
        """The template named `name`. Raises NotFound."""
        row = self._session.scalars(select(ConfigTemplate).where(ConfigTemplate.name == name)).first()
        if row is None:
            raise NotFound(f"no configuration template named {name!r} (`tavern template list` shows them)")
        return _record(row)

    def delete(self, name: str) -> None:
        """Remove the template named `name`. Raises NotFound."""
        self.get(name)
        self._session.execute(delete(ConfigTemplate).where(ConfigTemplate.name == name))
        self._session.flush()
