"""The page shell and the small pieces pages are built from: every value escaped where it is
placed, links with their ids quoted, plain forms with labels (usable from the keyboard alone)."""

from __future__ import annotations

import datetime as _dt
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from .identity import FORM_FIELD, Viewer

__all__ = ["esc", "when", "link", "href", "table", "page", "form", "field", "select", "definition", "pre", "Html"]


class Html(str):
    """Text already made safe for HTML: placed as it is."""


def esc(value: Any) -> Html:
    if isinstance(value, Html):
        return value
    if value is None:
        return Html("<span class=none>—</span>")
    if isinstance(value, _dt.datetime):
        return Html(html.escape(when(value)))
    return Html(html.escape(str(value), quote=True))


def when(value: _dt.datetime | None) -> str:
    return value.astimezone(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "—"


def href(base: str, *parts: str, **query: Any) -> str:
    """base/part/part?query, each part percent-quoted (an id may hold '/', '?' or '#')."""
    path = "/".join([base.rstrip("/"), *(quote(p, safe="") for p in parts)])
    params = {k: v for k, v in query.items() if v is not None and v != ""}
    return path + ("?" + urlencode(params) if params else "")


def link(url: str, text: Any) -> Html:
    return Html(f'<a href="{html.escape(url, quote=True)}">{esc(text)}</a>')


def pre(value: Any) -> Html:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False,
                                                             default=str)
    return Html(f"<pre>{esc(text)}</pre>")


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, caption: str | None = None,
          empty: str = "none") -> Html:
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return Html(f"<p class=empty>{esc(empty)}</p>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    return Html(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def definition(items: Iterable[tuple[str, Any]]) -> Html:
    return Html("<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items) + "</dl>")


def field(name: str, label: str, *, value: str = "", kind: str = "text", required: bool = False,
          textarea: bool = False, ident: str | None = None) -> Html:
    ident = ident or f"f-{name}"
    req = " required" if required else ""
    if textarea:
        control = f'<textarea id="{esc(ident)}" name="{esc(name)}" rows="3"{req}>{esc(value)}</textarea>'
    elif kind == "checkbox":
        checked = " checked" if value else ""
        control = f'<input type="checkbox" id="{esc(ident)}" name="{esc(name)}" value="1"{checked}>'
    else:
        control = f'<input type="{kind}" id="{esc(ident)}" name="{esc(name)}" value="{esc(value)}"{req}>'
    return Html(f'<label for="{esc(ident)}">{esc(label)}</label> {control}')


def select(name: str, label: str, options: Sequence[str], chosen: str = "", *, blank: str | None = "any",
           ident: str | None = None) -> Html:
    ident = ident or f"f-{name}"
    opts = [("", blank)] if blank is not None else []
    opts += [(o, o) for o in options]
    body = "".join(f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(t)}</option>'
                   for v, t in opts)
    return Html(f'<label for="{esc(ident)}">{esc(label)}</label> <select id="{esc(ident)}" name="{esc(name)}">'
                f"{body}</select>")


def form(action: str, fields: Iterable[Html], submit: str, viewer: Viewer | None, *, method: str = "post",
         hidden: Mapping[str, str] | None = None, name: str | None = None, cls: str | None = None) -> Html:
    """A form: a POST carries the viewer's form token (pymem.inspector.identity)."""
    extra = dict(hidden or {})
    if method == "post" and viewer is not None:
        extra[FORM_FIELD] = viewer.form_token
    hid = "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">' for k, v in extra.items())
    label = f' aria-label="{esc(name)}"' if name else ""
    inner = "".join(f"<p>{f}</p>" for f in fields)
    klass = f' class="{esc(cls)}"' if cls else ""
    return Html(f'<form method="{method}" action="{esc(action)}"{label}{klass}>{hid}{inner}'
                f"<p><button type=submit>{esc(submit)}</button></p></form>")


STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center;flex-wrap:wrap}
header a{color:#cfe0ff}header strong{margin-right:1em}header .who{margin-left:auto;font-size:.9em}
main{padding:1em 1.4em;max-width:78em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em}
th,td{border:1px solid #d5d9e0;padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#eef1f5}caption{text-align:left;font-weight:600;padding:.2em 0}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
pre{background:#f0f2f5;padding:.6em;white-space:pre-wrap;word-break:break-word}
form{background:#fff;border:1px solid #d5d9e0;padding:.4em .9em;margin:.6em .6em .6em 0;display:inline-block;
     vertical-align:top;min-width:24em}
form.filters{display:block}form.filters p{display:inline-block;margin:.3em 1em .3em 0}
form.inline{background:none;border:0;min-width:0;padding:0;margin:0}form.inline p{margin:0}
a:focus,button:focus,input:focus,select:focus,textarea:focus{outline:3px solid #f5a623;outline-offset:1px}
.none{color:#8a93a3}.empty{color:#5b6577;font-style:italic}
.mark{font-weight:600;padding:0 .3em;border-radius:3px}.erased{background:#fde2e1}.superseded{background:#fff1c2}
.error{background:#fde2e1;border:1px solid #e0a4a1;padding:.6em 1em}
.ok{background:#def5e3;border:1px solid #9fd3ab;padding:.6em 1em}
.warn{background:#fff1c2;border:1px solid #e2c56b;padding:.6em 1em}
"""

NAV = (("memories", "Memories"), ("sessions", "Sessions"), ("quarantine", "Quarantine"), ("refusals", "Refusals"),
       ("integrity", "Integrity"))


def page(title: str, body: str, base: str, viewer: Viewer | None, *, status_line: str | None = None) -> str:
    """A whole page: the navigation (for a signed-in viewer), the title, an optional notice, the body."""
    nav = ""
    if viewer is not None:
        links = " ".join(str(link(f"{base}/{path}", text)) for path, text in NAV
                         if viewer.operator or path != "memories")  # the list is content: an operator's
        who = (f"{esc(viewer.ctx.actor or '?')} · {esc(viewer.role)} · tenant {esc(viewer.ctx.tenant)}")
        logout = form(f"{base}/logout", [], "Sign out", viewer, cls="inline")
        nav = f'<nav aria-label="pages">{links}</nav><span class=who>{who}</span>{logout}'
    notice = f'<p class=ok role="status">{esc(status_line)}</p>' if status_line else ""
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)} · pymem inspector</title><style>{STYLE}</style></head>"
            f"<body><header><strong>pymem inspector</strong>{nav}</header>"
            f"<main><h1>{esc(title)}</h1>{notice}{body}</main></body></html>")
