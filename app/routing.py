"""URL converters shared by the blueprints."""

from __future__ import annotations

from typing import Any

from werkzeug.routing import IntegerConverter, Map

from app.models import ROW_ID_MAX


class RowIdConverter(IntegerConverter):
    """A row id in a URL: a positive integer that fits an INTEGER column; anything else is a 404
    before a query is built (a larger number would overflow the database driver)."""

    def __init__(self, map: Map, *args: Any, **kwargs: Any) -> None:
        super().__init__(map, min=1, max=ROW_ID_MAX)
