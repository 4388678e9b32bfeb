"""Static CSS and JavaScript go out gzipped when the browser accepts it: they are most of the
chat page's bytes (htmx alone is ~50 KB raw, ~16 KB gzipped). Pages are never compressed here:
they carry CSRF and card tokens beside text a visitor can make them reflect (BREACH)."""

from __future__ import annotations

import gzip
from functools import lru_cache

from flask import Flask, Response, request

COMPRESSIBLE = {"text/css", "text/javascript", "application/javascript"}


@lru_cache(maxsize=64)
def _gzipped(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def init_app(app: Flask) -> None:
    @app.after_request
    def gzip_static(response: Response) -> Response:
        if (
            request.endpoint != "static"
            or response.status_code != 200
            or response.mimetype not in COMPRESSIBLE
            or "gzip" not in request.headers.get("Accept-Encoding", "")
        ):
            return response
        original = response.response  # send_file's file wrapper: read it, then close the file now
        data = b"".join(c if isinstance(c, bytes) else c.encode() for c in original)
        if hasattr(original, "close"):
            original.close()
        response.direct_passthrough = False
        response.set_data(_gzipped(data))
        response.headers["Content-Encoding"] = "gzip"
        response.vary.add("Accept-Encoding")
        etag, _ = response.get_etag()
        if etag:
            response.set_etag(etag, weak=True)  # the same file, another encoding: a weak match still gives 304
        return response
