"""`GET docs`: the OpenAPI document as a page of our own, fetched from a real server: it names
every path and method of `openapi.json`, every parameter and schema, loads nothing from
elsewhere, and the dashboard links it."""

from __future__ import annotations

import re

from .conftest import Live


def test_the_docs_page_renders_the_whole_document(live: Live) -> None:
    with live.client(token=None) as c:
        page = c.get("/docs")
        spec = c.get("/openapi.json").json()
        dashboard = c.get("/dashboard").text
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    html = page.text
    for path, item in spec["paths"].items():
        assert f">{path}<" in html, path
        for method, operation in item.items():
            assert f'id="{method}-{path.strip("/").replace("/", "-")}"' in html, (method, path)
            for parameter in operation.get("parameters", []):
                assert f"<code>{parameter['name']}</code>" in html
    strict = spec["info"]["x-strict-fields"]
    assert f"Strict fields, version {strict['version']}" in html
    for names in strict["tolerated"].values():
        for name in names:
            assert f"<code>{name}</code>" in html
    for name in spec["components"]["schemas"]:
        assert f'id="schema-{name}"' in html, name
    # nothing from elsewhere: no script, no external source, stylesheet or link
    assert "<script" not in html.lower()
    assert not re.findall(r"""(?:src|href)=["']?(?:https?:)?//""", html), "an external asset"
    assert 'href="docs"' in dashboard
