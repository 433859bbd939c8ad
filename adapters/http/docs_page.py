"""`GET docs`: the OpenAPI document (`openapi.json`) as one HTML page of our own, rendered here
from the same document: every route with its parameters, request body and responses, then
every schema. No script, no stylesheet or font from elsewhere: it works offline and behind
a strict Content-Security-Policy."""

from __future__ import annotations

from html import escape
from typing import Any

METHODS = ("get", "post", "put", "patch", "delete")

STYLE = """
:root { color-scheme: light dark; --line: #8884; --muted: #888; --accent: #2a6fdb; }
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; }
h1 { margin-bottom: 0; } h2 { margin-top: 2.5rem; border-bottom: 1px solid var(--line); }
h3 { margin: 1.5rem 0 .3rem; font-size: 1.05rem; }
code, .path { font-family: ui-monospace, monospace; font-size: .92em; }
.method { display: inline-block; min-width: 3.5rem; font-weight: 700; color: var(--accent); }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin: .3rem 0 .8rem; }
th, td { text-align: left; vertical-align: top; padding: .25rem .5rem;
         border-bottom: 1px solid var(--line); }
th { font-weight: 600; }
nav ul { columns: 2; padding-left: 1.2rem; }
a { color: var(--accent); }
"""


def docs_html(spec: dict[str, Any], openapi_url: str = "openapi.json") -> str:
    """The page for `spec` (an OpenAPI 3.0 document); `openapi_url` links the raw one."""
    info = spec.get("info", {})
    title = str(info.get("title", "API"))
    paths: dict[str, Any] = spec.get("paths", {})
    schemas: dict[str, Any] = spec.get("components", {}).get("schemas", {})
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">version {escape(str(info.get("version", "")))} · '
        f'<a href="{escape(openapi_url)}">openapi.json</a> · '
        '<a href="dashboard">dashboard</a></p>',
        f"<p>{escape(str(info.get('description', '')))}</p>",
        *_strict(info.get("x-strict-fields")),
        "<nav><h2>Routes</h2><ul>",
    ]
    for path, item in paths.items():
        for method in METHODS:
            if method in item:
                out.append(
                    f'<li><a href="#{_anchor(method, path)}"><span class="method">'
                    f'{method.upper()}</span> <span class="path">{escape(path)}</span></a></li>'
                )
    out.append("</ul></nav>")
    for path, item in paths.items():
        for method in METHODS:
            if method in item:
                out.extend(_operation(method, path, item[method]))
    out.append("<h2>Schemas</h2>")
    for name, schema in schemas.items():
        out.append(f'<h3 id="schema-{escape(name)}">{escape(name)}</h3>')
        out.extend(_schema_block(schema))
    out.append("</body></html>")
    return "\n".join(out)


def _strict(strict: Any) -> list[str]:
    """The strict-fields note: its version and the fields accepted and ignored."""
    if not isinstance(strict, dict):
        return []
    tolerated = strict.get("tolerated") or {}
    items = "".join(
        f"<li>{escape(str(where))}: "
        + ", ".join(f"<code>{escape(str(n))}</code>" for n in names)
        + "</li>"
        for where, names in tolerated.items()
    )
    return [
        f"<p>Strict fields, version {escape(str(strict.get('version')))}: an unknown body "
        "field is a 400 naming it. Accepted and ignored (sent by the original clients):</p>",
        f"<ul>{items}</ul>",
    ]


def _anchor(method: str, path: str) -> str:
    return escape(f"{method}-{path.strip('/').replace('/', '-')}")


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    out = [
        f'<h3 id="{_anchor(method, path)}"><span class="method">{method.upper()}</span> '
        f'<span class="path">{escape(path)}</span></h3>',
        f"<p>{escape(str(op.get('summary', '')))}"
        + (" <span class='muted'>(bearer token)</span>" if op.get("security") else "")
        + "</p>",
    ]
    params = op.get("parameters") or []
    if params:
        out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>about</th></tr>")
        for p in params:
            required = " (required)" if p.get("required") else ""
            out.append(
                f"<tr><td><code>{escape(str(p.get('name')))}</code>{required}</td>"
                f"<td>{escape(str(p.get('in')))}</td><td>{_type(p.get('schema', {}))}</td>"
                f"<td>{escape(str(p.get('description', '')))}</td></tr>"
            )
        out.append("</table>")
    body = op.get("requestBody")
    if body:
        schema = body.get("content", {}).get("application/json", {}).get("schema", {})
        out.append(f"<p><b>Body</b> (JSON): {_type(schema)}</p>")
        if "properties" in schema:
            out.extend(_schema_block(schema))
    out.append("<table><tr><th>status</th><th>answer</th><th>body</th></tr>")
    for status, response in (op.get("responses") or {}).items():
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        shown = _type(schema) if schema else ""
        out.append(
            f"<tr><td>{escape(str(status))}</td>"
            f"<td>{escape(str(response.get('description', '')))}</td><td>{shown}</td></tr>"
        )
    out.append("</table>")
    return out


def _schema_block(schema: dict[str, Any]) -> list[str]:
    props: dict[str, Any] = schema.get("properties") or {}
    if not props:
        return [f"<p>{_type(schema)}</p>"]
    required = set(schema.get("required") or ())
    out = ["<table><tr><th>field</th><th>type</th><th>about</th></tr>"]
    for name, prop in props.items():
        mark = " (required)" if name in required else ""
        out.append(
            f"<tr><td><code>{escape(name)}</code>{mark}</td><td>{_type(prop)}</td>"
            f"<td>{escape(str(prop.get('description', '')))}</td></tr>"
        )
    out.append("</table>")
    return out


def _type(schema: dict[str, Any] | None) -> str:
    """A schema in a few words of HTML: a link for a reference, `array of ...`, the enum."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f'<a href="#schema-{escape(name)}">{escape(name)}</a>'
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        text = f"array of {_type(schema.get('items'))}"
    elif kind == "object" and "additionalProperties" in schema:
        text = f"object of {_type(schema['additionalProperties'])}"
    else:
        text = escape(kind)
    details = []
    if "enum" in schema:
        details.append(" | ".join(escape(str(v)) for v in schema["enum"]))
    for key in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"):
        if key in schema:
            details.append(f"{key} {escape(str(schema[key]))}")
    if "default" in schema:
        details.append(f"default {escape(str(schema['default']))}")
    if "pattern" in schema:
        details.append(f"pattern <code>{escape(str(schema['pattern']))}</code>")
    if schema.get("nullable"):
        details.append("or null")
    return text + (f" <span class='muted'>({'; '.join(details)})</span>" if details else "")
