"""Values from input files in the reports: Markdown that shows a value as it is and cannot
become markup, and the sanitiser of the HTML page rendered from that Markdown.

Every report is a Markdown template (:mod:`simulator.report.render`) filled with values of
which many come from the user's files or command line: trace labels (tenants, slices),
scenario, sweep and plan names, ``--vary`` values, model and GPU names, recorded-run paths.
Two layers keep such a value from turning into markup (a ``<img onerror=...>`` tag, a
``[link](javascript:...)``, an image fetched from elsewhere):

1. **Markdown.** :class:`Md` is Markdown servesim wrote itself (a template, a table, a code
   span built here); any other value is data and is escaped on its way in by
   :func:`md_text`: line breaks become spaces (a value never starts a block), ``<`` before a
   letter, ``/``, ``!`` or ``?`` becomes ``&lt;`` (the only places where an HTML tag,
   comment or autolink can start, in CommonMark and in an HTML parser alike), ``&`` before
   an entity becomes ``&amp;``, and ``\\``, a backtick, ``*`` and an ``_`` at a word
   boundary are backslash-escaped (no code span or emphasis starts inside a value), as are
   a ``]`` before ``(``, ``[`` or ``:`` or at the end of the value and a ``!`` before ``[``
   (no link, image or link definition closes or opens there: a link needs ``](`` or
   ``][``, a definition ``]:``, an image ``![``). A ``[`` alone, a ``>``, a quote or an
   ``_`` inside a word starts nothing in Markdown text and stays as it is, so a normal label
   (``E[tokens/step]``, ``round_robin``, ``TTFT <= 250 ms``) reads the same in the ``.md``
   file. A value the report shows as code goes through :func:`md_code` (a fence
   longer than any backtick run in the value: a code span shows its content verbatim), a
   value inside a link target through :func:`md_url_segment` (percent-encoded).
   The report templates escape every ``{{ value }}`` that is not :class:`Md` this way
   (jinja2 autoescaping with :func:`md_text` as the escape), and
   :func:`~simulator.report.tables.markdown_table` escapes its cells the same way.
2. **HTML.** :func:`sanitize_tokens` goes over markdown-it's tokens before they are rendered:
   raw HTML is kept only when it consists of the tags the templates write (``<details>``,
   ``<summary>`` and their closing tags) and is shown as text otherwise; a link must be
   relative, a ``#`` fragment, ``http(s)`` or ``mailto`` (else it loses its target), an
   image relative (servesim embeds those itself; any other becomes its alt text). So even a
   value that slipped past the first layer cannot run script or load anything.
"""
from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

__all__ = ["Md", "is_safe_link", "md_code", "md_text", "md_url_segment", "sanitize_tokens"]

#: Line breaks of any kind (CommonMark's and those other tools split lines on).
_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
#: What :func:`md_text` escapes (see the module docstring); ``_SPECIAL_LAST`` also a ``]``
#: that ends the value (the template's next character is unknown: it might be ``(``).
_SPECIAL_PATTERN = (r"[\\`*]|!(?=\[)|\](?=[(\[:]{})|<(?=[A-Za-z/!?])|&(?=#?\w+;)"
                    r"|(?<![^\W_])_|_(?![^\W_])")
_SPECIAL = re.compile(_SPECIAL_PATTERN.format(""))
_SPECIAL_LAST = re.compile(_SPECIAL_PATTERN.format("|$"))
_ENTITY = {"<": "&lt;", "&": "&amp;"}
#: Raw HTML the templates write (anything else in an HTML token is shown as text).
_ALLOWED_TAG = re.compile(r"</?(?:details|summary)>", re.IGNORECASE)
#: Link schemes a report page may point at.
_LINK_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def _escape(text: str, *, last: bool = True) -> str:
    """``text`` as Markdown text (``last``: a final ``]`` escaped too)."""
    return (_SPECIAL_LAST if last else _SPECIAL).sub(
        lambda m: _ENTITY.get(m.group(), "\\" + m.group()), _BREAKS.sub(" ", text))


class Md(Markup):
    """Markdown servesim wrote (trusted): templates and tables show it as it is.

    Combining it with a plain value escapes the value (:func:`md_text`):
    ``Md("{}: {}").format(key, value)``, ``Md(", ").join(names)``, ``Md("[baseline] ") + label``.
    ``Md(text)`` itself escapes nothing: use it only for text written here, never for a value.
    """

    __slots__ = ()

    @classmethod
    def escape(cls, s: Any) -> Md:
        """``s`` as Markdown text (unchanged when it is already Markdown)."""
        if hasattr(s, "__html__"):
            return cls(s.__html__())
        return cls(_escape(str(s)))


def md_text(value: Any, *, final_bracket: bool = True) -> Md:
    """A value (any type, through ``str``) as Markdown text that shows it as it is.

    Parameters
    ----------
    value : object
        The value; :class:`Md` (or any ``__html__`` object) is returned unchanged.
    final_bracket : bool
        Escape a ``]`` that ends the value (the default: what follows is unknown). False
        where the next character is known to start nothing, as the `` |`` after a table
        cell.

    Returns
    -------
    Md
        One line (line breaks become spaces) in which no HTML, code span, emphasis, link or
        image can start (see the module docstring).
    """
    if hasattr(value, "__html__") or final_bracket:
        return Md.escape(value)
    return Md(_escape(str(value), last=False))


def md_code(value: Any) -> Md:
    """A value as a Markdown code span (shown verbatim in a monospace font).

    The fence is one backtick longer than the longest backtick run in the value, padded
    with a space where the value starts or ends with a backtick or a space, so the span
    closes exactly at its end; line breaks become spaces. An empty value gives an empty
    string (an empty code span does not exist).
    """
    text = _BREAKS.sub(" ", str(value))
    if not text:
        return Md("")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if (text[0] == "`" or text[-1] == "`"
                  or (text[0] == " " and text[-1] == " " and text.strip())) else ""
    return Md(f"{fence}{pad}{text}{pad}{fence}")


def md_url_segment(value: Any) -> Md:
    """A value as one relative path segment of a link target: percent-encoded but for
    ``=``, ``,``, ``+`` and ``@`` (a ``k=v`` name stays readable); ``/``, ``:``, ``\\``,
    parentheses and spaces are encoded, so it can neither leave the folder, name a scheme
    nor end the link."""
    return Md(quote(str(value), safe="=,+@"))


def is_safe_link(url: str) -> bool:
    """Whether a report page may link to ``url``: a relative path, a ``#`` fragment, or an
    ``http``, ``https`` or ``mailto`` URL (not ``javascript:``, ``data:``, ``file:``, ...).

    The URL is read as a browser reads it (leading / trailing control characters and
    spaces dropped, tabs and line breaks removed), and a relative path may not start with
    ``/`` or ``\\`` (``//host`` would leave the page's folder for another host).
    """
    url = re.sub(r"[\t\n\r]", "", str(url)).strip("".join(map(chr, range(33))))
    m = _SCHEME.match(url)
    if m is not None:
        return m.group(1).lower() in _LINK_SCHEMES
    return not url.startswith(("/", "\\")) and ":" not in url.split("/")[0].split("?")[0]


def _is_relative_path(url: str) -> bool:
    return is_safe_link(url) and _SCHEME.match(url.strip()) is None \
        and not url.strip().startswith("#")


def sanitize_tokens(tokens) -> None:
    """Make markdown-it tokens safe to render (in place; see the module docstring).

    Raw HTML that is not only ``<details>`` / ``<summary>`` tags becomes text, a link with
    an unsafe target (:func:`is_safe_link`) loses it, and an image that is not a relative
    path (one servesim embeds) becomes its alt text.
    """
    for tok in tokens:
        if tok.children:
            sanitize_tokens(tok.children)
        if tok.type in ("html_block", "html_inline"):
            if "<" in _ALLOWED_TAG.sub("", tok.content):
                tok.content = html.escape(tok.content, quote=False)
        elif tok.type == "link_open":
            if not is_safe_link(str(tok.attrGet("href") or "")):
                tok.attrs.pop("href", None)
        elif tok.type == "image" and not _is_relative_path(str(tok.attrGet("src") or "")):
            tok.type, tok.tag, tok.attrs, tok.children = "text", "", {}, None
