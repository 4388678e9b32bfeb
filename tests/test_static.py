"""Static CSS and JavaScript are sent gzipped to browsers that accept it; pages never are."""

from __future__ import annotations

import gzip


def fetch(client, path, **headers):
    """Status, headers and body, with the response closed as a WSGI server closes it (static
    files are streamed from an open file)."""
    response = client.get(path, headers=headers)
    try:
        return response.status_code, response.headers, response.get_data()
    finally:
        response.close()


def test_static_assets_go_out_gzipped_and_still_revalidate(app):
    client = app.test_client()
    status, headers, plain = fetch(client, "/static/vendor/htmx.min.js")
    assert status == 200 and "Content-Encoding" not in headers
    status, headers, zipped = fetch(client, "/static/vendor/htmx.min.js", **{"Accept-Encoding": "gzip, br"})
    assert headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in headers["Vary"]
    assert gzip.decompress(zipped) == plain and len(zipped) < len(plain) / 2
    assert int(headers["Content-Length"]) == len(zipped)
    status, _, _ = fetch(client, "/static/vendor/htmx.min.js", **{"Accept-Encoding": "gzip", "If-None-Match": headers["ETag"]})
    assert status == 304


def test_pages_are_not_compressed(app, alice):
    status, headers, _ = fetch(alice.client, "/", **{"Accept-Encoding": "gzip"})
    assert status == 200 and "Content-Encoding" not in headers
    _, headers, _ = fetch(alice.client, "/static/app.css", **{"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"


def test_every_page_links_an_icon_that_is_served(app, alice):
    """A page names its icon (the browser asks /favicon.ico, a 404, when it does not)."""
    import re

    for client, path in ((app.test_client(), "/login"), (alice.client, "/")):
        _, _, page = fetch(client, path)
        [href] = re.findall(rb'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
        status, headers, icon = fetch(client, href.decode())
        assert status == 200 and headers["Content-Type"].startswith("image/svg+xml") and icon.startswith(b"<svg")
