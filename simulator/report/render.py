"""Rendering every report: jinja2 templates to Markdown, Markdown to one self-contained HTML
page.

A report is written once, as a Markdown template in ``simulator/report/templates/``
(``<name>.md.j2``) filled from a context of already formatted strings
(:mod:`simulator.report.format`, :func:`~simulator.report.tables.markdown_table`). The HTML
page is that Markdown rendered by ``markdown-it-py`` (CommonMark plus tables, raw HTML
allowed for ``<details>``), put in the page shell ``base.html.j2``, with every image
embedded as a base64 ``data:`` URI: one file to mail or attach, with exactly the content of
the Markdown report (same prose, tables and figures). Links to other reports' ``.md`` files
point at their ``.html`` pages; every heading has an ``id`` (its text as a slug) to link to.

Template conventions (the environment of :func:`environment`): ``trim_blocks`` and
``lstrip_blocks`` (a line holding only a tag leaves no blank line), undefined names are
errors, and ``{% filter oneline %}...{% endfilter %}`` writes a paragraph across template
lines that renders as one line.

Values are data (:mod:`simulator.report.escape`): the Markdown templates autoescape, every
``{{ value }}`` that is not :class:`~simulator.report.escape.Md` (Markdown servesim wrote) is
escaped as Markdown text by :func:`~simulator.report.escape.md_text`; ``{{ value | code }}``
shows a value as a code span, ``{{ value | url_segment }}`` puts it in a link target, and the
``table`` helper escapes its cells. The HTML page shell (``base.html.j2``) autoescapes as HTML;
its body is markdown-it's rendering of tokens that :func:`~simulator.report.escape.sanitize_tokens`
made safe (raw HTML only ``<details>`` / ``<summary>``, no unsafe link or foreign image; every
text and attribute escaped by markdown-it), which is why the shell marks the body ``safe``.
"""
from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.report.escape import (
    Md,
    is_safe_link,
    md_code,
    md_text,
    md_url_segment,
    sanitize_tokens,
)
from simulator.report.tables import cell, markdown_table

if TYPE_CHECKING:  # pragma: no cover
    from markdown_it import MarkdownIt

__all__ = ["TEMPLATES", "environment", "markdown_to_html", "oneline", "render", "write_report"]

#: Folder of the report templates (package data).
TEMPLATES = Path(__file__).resolve().parent / "templates"

_SPACES = re.compile(r"\s+")
_IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg",
                ".jpeg": "image/jpeg"}


def oneline(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) as one space, stripped
    (Markdown stays :class:`~simulator.report.escape.Md`)."""
    out = _SPACES.sub(" ", str(text)).strip()
    return Md(out) if hasattr(text, "__html__") else out


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` of a Markdown template: data is escaped, Markdown kept."""
    return value if hasattr(value, "__html__") else md_text(value)


@cache
def _environment(markdown: bool):
    import jinja2  # heavy: loaded with the first report, not with the package

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=True,
                             finalize=_finalize if markdown else None)
    env.filters.update(cell=cell, oneline=oneline, code=md_code, url_segment=md_url_segment)
    env.globals["table"] = markdown_table
    return env


def environment(template: str = ".md.j2"):
    """The jinja2 environment of a report template (built once per kind).

    Both kinds autoescape: ``*.md.j2`` templates escape values as Markdown text
    (:func:`~simulator.report.escape.md_text`), ``*.html.j2`` as HTML. Filters: ``cell``
    (a table cell), ``oneline``, ``code`` (a code span), ``url_segment`` (a link target
    segment); globals: ``table(header, rows, align=None)``
    (:func:`~simulator.report.tables.markdown_table`).
    """
    return _environment(not template.endswith(".html.j2"))


def render(template: str, **context: Any) -> str:
    """Render the template ``template`` (a file name in :data:`TEMPLATES`) with ``context``.

    Returns
    -------
    str
        The text (plain ``str``; embed it in another report as ``Md(text)``).

    Raises
    ------
    jinja2.UndefinedError
        When the template uses a name the context lacks (a bug, not a user error).
    """
    return str(environment(template).get_template(template).render(**context))


def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt  # loaded with the first report, not at start-up

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.validateLink = is_safe_link  # an unsafe target is no link at all (text instead)
    return md


def _data_uri(path: Path) -> str:
    kind = _IMAGE_TYPES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"cannot embed {path.name}: not one of "
                         f"{', '.join(sorted(_IMAGE_TYPES))}")
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _is_relative(url: str) -> bool:
    return not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^/|^#", url)


def _plain_text(inline) -> str:
    """The text a reader sees in an inline token (escapes and entities resolved)."""
    return "".join(" " if c.type in ("softbreak", "hardbreak") else c.content
                   for c in inline.children or () if c.type in
                   ("text", "code_inline", "softbreak", "hardbreak"))


def _rewrite(tokens, figure_dir: Path) -> None:
    """Embed relative images; point relative ``.md`` links at the ``.html`` pages."""
    for tok in tokens:
        if tok.children:
            _rewrite(tok.children, figure_dir)
        if tok.type == "image":
            src = str(tok.attrGet("src") or "")
            if _is_relative(src):
                path = figure_dir / src
                if not path.is_file():
                    raise ValueError(f"the report embeds {src}, which is not in {figure_dir}")
                tok.attrSet("src", _data_uri(path))
        elif tok.type == "link_open":
            href = str(tok.attrGet("href") or "")
            if _is_relative(href) and href.endswith(".md"):
                tok.attrSet("href", href[:-3] + ".html")


def _slug(text: str) -> str:
    """``Why each configuration fails`` -> ``why-each-configuration-fails``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def _heading_ids(tokens) -> None:
    """An ``id`` on every heading (its text as a slug; ``-2``, ``-3`` for repeats), so a
    section can be linked to (``plan.html#recommendation-and-fallback``)."""
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and i + 1 < len(tokens):
            slug = _slug(tokens[i + 1].content)
            seen[slug] = seen.get(slug, 0) + 1
            tok.attrSet("id", slug if seen[slug] == 1 else f"{slug}-{seen[slug]}")


def _mark_verdicts(tokens) -> None:
    """Class ``ok`` on table cells reading ``pass``; ``bad`` on the other cells of a column
    headed ``gates`` (the plan's candidate tables)."""
    gate_col, col, in_head = None, 0, False
    for i, tok in enumerate(tokens):
        if tok.type == "thead_open":
            in_head, gate_col = True, None
        elif tok.type == "thead_close":
            in_head = False
        elif tok.type == "tr_open":
            col = 0
        elif tok.type in ("th_open", "td_open"):
            text = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            if in_head and text == "gates":
                gate_col = col
            elif tok.type == "td_open":
                if text == "pass":
                    tok.attrSet("class", "ok")
                elif col == gate_col and text:
                    tok.attrSet("class", "bad")
            col += 1


def markdown_to_html(markdown: str, *, title: str | None = None,
                     figure_dir: str | Path | None = None) -> str:
    """One self-contained HTML page with the content of a Markdown report.

    Parameters
    ----------
    markdown : str
        The report (as written to its ``.md`` file).
    title : str, optional
        The page title (default: the first ``# `` heading, else ``servesim report``).
    figure_dir : str or Path, optional
        Where the report's relative image paths resolve (default: the working folder).

    Returns
    -------
    str
        The HTML document (UTF-8 text).

    Raises
    ------
    ValueError
        When an image the report shows is missing or of an unknown type.
    """
    md = _markdown()
    env: dict = {}
    tokens = md.parse(markdown, env)
    sanitize_tokens(tokens)
    _rewrite(tokens, Path(figure_dir) if figure_dir is not None else Path("."))
    _heading_ids(tokens)
    _mark_verdicts(tokens)
    # safe to mark safe in the shell: every text and attribute is escaped by markdown-it and
    # sanitize_tokens left no raw HTML but <details> / <summary>, no unsafe link or image
    body = md.renderer.render(tokens, md.options, env)
    if title is None:
        h1 = [tokens[i + 1] for i, t in enumerate(tokens[:-1])
              if t.type == "heading_open" and t.tag == "h1"]
        title = _plain_text(h1[0]).strip() if h1 else ""
    return render("base.html.j2", title=title or "servesim report", body=body)


def write_report(outdir: str | Path, stem: str, markdown: str, *,
                 title: str | None = None) -> dict[str, Path]:
    """Write ``stem.md`` and its self-contained ``stem.html`` into ``outdir``.

    The images the Markdown shows must already be in ``outdir`` (they are embedded in the
    HTML; the Markdown links them).

    Returns
    -------
    dict
        ``{"md": path, "html": path}``.
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    md_path, html_path = out / f"{stem}.md", out / f"{stem}.html"
    md_path.write_text(markdown, encoding="utf-8")
    html_path.write_text(markdown_to_html(markdown, title=title, figure_dir=out),
                         encoding="utf-8")
    return {"md": md_path, "html": html_path}


def context_mapping(obj: Any) -> Mapping[str, Any]:
    """A scenario (or any settings object) given as a dict or a pydantic model, as a mapping."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    return dump() if callable(dump) else {}
