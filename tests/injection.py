"""Hostile labels for the report-injection tests (issue 26, defect 1): the payloads, every
report kind written from the stored golden inputs with a payload in the places that carry
user text, and checks of a written page that do not use servesim's own escaping code.

Import with ``from injection import ...`` (``tests/conftest.py`` puts this folder on the path).

- :data:`PAYLOADS`: labels that would run script, load something, link to ``javascript:``,
  break a table, open a code span or a comment, or be read as TeX or rich markup if a report
  passed them through. Several set ``document.title`` to :data:`MARKER` when they run, which
  the browser test looks for.
- :data:`WRITERS`: report kind -> ``writer(label, outdir)`` returning ``{"md": path, "html":
  path}``; the label goes where that report shows user text (scenario, sweep, plan and
  recorded-run names, tenant and slice labels, ``--vary`` values, model and GPU names,
  degrade policy names, plan labels, trace and record paths).
- :func:`markdown_problems` / :func:`html_problems`: what is active in a written ``.md``
  (rendered by a CommonMark renderer that passes raw HTML through, as many viewers do) or
  ``.html`` page: any element outside the few a report uses, any ``on*`` attribute, script
  or comment, a link with a scheme, an image that is not a figure of the report.
- :func:`shown`: whether a label is in a page's visible text, as written (line breaks read
  as spaces).
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
from report_cases import CASES, case_json, case_table

#: What the script payloads set ``document.title`` to when they run.
MARKER = "PWNED"
_JS = f"document.title='{MARKER}'"

#: id -> hostile label (none holds a comma: ``--vary`` splits its values on commas).
PAYLOADS: dict[str, str] = {
    "img_onerror": f'<img src=x onerror="{_JS}">',
    "script": f"<script>{_JS}</script>",
    "attr_break": f'"><svg onload="{_JS}">',
    "md_js_link": f"[a](javascript:{_JS})",
    "md_image_attr": f'![x](x" onerror="{_JS})',
    "table_break": f"</td></tr></table><script>{_JS}</script>",
    "pipes": "a|b || c",
    "backticks": "`code` ``two`` ` lone",
    "newline": f"line one\n<script>{_JS}</script>\n# heading",
    "autolink": f"<javascript:{_JS}>",
    "entity": "&lt;script&gt; &amp; &#60;b&#62;",
    "emphasis": r"*em* _u_ **b** \ back\slash ~~s~~",
    "tex_rich": r"$\foo$ [/bold] [red]x[/red] $x$",
    "comment": "<!-- unclosed comment",
    "definition": f"[q]: javascript:{_JS} [q]",
    "anchor": f'<a href="javascript:{_JS}">click</a>',
}

#: Elements a report page is made of (anything else in a page was injected).
PAGE_TAGS = frozenset({"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3",
                       "h4", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "img",
                       "a", "ul", "li", "details", "summary", "blockquote", "strong", "em",
                       "hr", "br"})
_SCHEME = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]*:")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.comments: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("style", "title", "script"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "title", "script"):
            self._skip = max(0, self._skip - 1)

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def _parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    p.close()
    return p


def html_problems(html: str, *, embedded: bool = True, web_links: bool = False) -> list[str]:
    """What is active in an HTML page (empty when nothing is).

    Parameters
    ----------
    html : str
        The page.
    embedded : bool
        True for servesim's ``.html`` pages (every image a ``data:image/png`` URI it
        embedded); False for the rendering of a ``.md`` file (every image a relative
        ``.png`` file of the report).
    web_links : bool
        Whether ``http(s)`` links are expected (no report links to the web by itself: in a
        page built from hostile labels, one was injected).
    """
    page = _parse(html)
    out = [f"comment <!--{c[:40]}" for c in page.comments]
    for tag, attrs in page.tags:
        if tag not in PAGE_TAGS:
            out.append(f"<{tag}> element")
        for name, value in attrs.items():
            if name.startswith("on"):
                out.append(f"<{tag} {name}=...> handler")
            web = web_links and re.match(r"https?://", value or "")
            if name == "href" and not web and (_SCHEME.match(value or "") or (
                    value or "").startswith(("/", "\\"))):
                out.append(f"<{tag} href={value!r}>")
            if name == "src":
                ok = (value or "").startswith("data:image/png;base64,") if embedded else \
                    bool(re.fullmatch(r"(figures/)?[\w.-]+\.png", value or ""))
                if not ok:
                    out.append(f"<{tag} src={(value or '')[:60]!r}>")
    if sum(tag == "style" for tag, _ in page.tags) > 1:
        out.append("a second <style>")
    return out


def _reference_html(markdown: str) -> str:
    """A ``.md`` file as a CommonMark viewer that passes raw HTML through shows it."""
    from markdown_it import MarkdownIt
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def markdown_problems(markdown: str) -> list[str]:
    """What is active in a ``.md`` report when a Markdown viewer renders it (raw HTML
    allowed, links validated only as CommonMark's reference renderer does)."""
    return html_problems(_reference_html(markdown), embedded=False)


def _norm(text: str) -> str:
    return " ".join(text.split())


def visible_text(html: str) -> str:
    """A page's visible text, whitespace runs as one space."""
    return _norm("".join(_parse(html).text))


def shown(label: str, html: str = "", *, markdown: str = "") -> bool:
    """Whether ``label`` (line breaks as spaces) is in the visible text of an HTML page, or
    of a ``.md`` file as a Markdown viewer shows it."""
    page = _reference_html(markdown) if markdown else html
    return _norm(label) in visible_text(page)


# ---------------------------------------------------------------------------- writers
def _swap(text: str, old: str, label: str) -> str:
    """``old`` replaced by ``label`` in JSON text (the label JSON-escaped)."""
    return text.replace(old, json.dumps(label)[1:-1])


def _json(case: str, name: str, swaps: dict[str, str]):
    text = (CASES / case / "input" / name).read_text()
    for old, label in swaps.items():
        text = _swap(text, old, label)
    return json.loads(text)


def write_run(label: str, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """The run report: scenario name, model, GPU, trace, slice and tenant labels, the slice
    share key, a degrade policy and the figure legends carry ``label``."""
    from simulator.report.run import write_run_report
    scenario = _json("run_plain", "scenario.json", {"golden_report": label})
    scenario["model"], scenario["hardware"]["gpu"] = label, label
    scenario["workload"]["slices"] = {label: 0.6, "code": 0.4}
    scenario["workload"]["trace"] = label
    summary = case_json("run_plain", "summary.json")
    summary["by_slice"] = {label: summary["by_slice"]["chat"], "code": summary["by_slice"]["code"]}
    summary["by_tenant"] = {label: summary["by_tenant"]["a"], "b": summary["by_tenant"]["b"]}
    summary["reject_reasons"] = {label: 1}
    summary["workload_synthesised"] = {"slice": label}
    summary["degrade"] = [{
        "name": label, "action": "shed", "when": {label: 0.9}, "release_fraction": 0.8,
        "min_hold_s": 1.0, "num_episodes": 1, "active_s": 2.0, "first_fired_s": 1.0,
        "num_requests": 3, "num_output_tokens_not_generated": 0, "ttft_p99_active_s": 0.2,
        "ttft_p99_inactive_s": 0.1, "e2e_p99_active_s": 2.0, "e2e_p99_inactive_s": 1.0,
        "episodes": [{"start_s": 1.0, "end_s": 3.0, "duration_s": 2.0, "trigger": label,
                      "trigger_value": 0.95}]}]
    requests = case_table("run_plain", "requests.parquet")
    requests["slice"] = requests["slice"].replace("chat", label)
    md = write_run_report(outdir, summary, requests, case_table("run_plain", "steps.parquet"),
                          scenario, figures=figures)
    return {"md": md, "html": md.with_suffix(".html")}


def write_compare(label: str, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """The comparison report: scenario name, a ``--vary`` key value and a variant name (as
    given, not made folder-safe) carry ``label``; model and GPU too."""
    from report_cases import compare_result

    from simulator.report.compare import write_compare_report
    cr = compare_result("compare")
    cr.scenario_name = label
    cr.varies = [(k, [label if v in ("static", "paged") else v for v in vals])
                 for k, vals in cr.varies]
    for v in cr.variants:
        v.assignments = [(k, label if x == "paged" else x) for k, x in v.assignments]
        v.scenario = v.scenario.model_copy(update={"model": label, "name": label})
    first = cr.variants[0]
    first.name = label
    cr.table = cr.table.copy()
    cr.table.loc[0, "variant"] = label
    files = write_compare_report(cr, outdir, figures=figures)
    return {**files, "md": files["markdown"]}


def write_sweep(label: str, outdir: Path) -> dict[str, Path]:
    """The sweep report: sweep name, varied key values, a point label and a failed point's
    error carry ``label``."""
    from simulator.report.sweep import write_sweep_report
    table = pd.DataFrame({
        "point_id": [0, 1], "label": [f"name={label}", "name=plain"], "status": ["ok", "error"],
        "error": [None, label], "cached": [False, False], "slo_attainment": [0.95, None],
        "ttft_s_p99": [0.12, None], "tpot_s_p99": [0.02, None],
        "output_token_throughput_tps": [900.0, None], "cost_per_1m_output_tokens_usd": [1.5, None],
        "slo.ttft_s": [0.25, 0.25]})
    return write_sweep_report(table, outdir, name=label, num_simulated=2, num_cached=0,
                              varied=[(label, [label, "plain"])])


def write_plan(label: str, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """The capacity plan report: plan name, baseline label and slice ``chat`` (gates, gate
    names, per-slice rows) carry ``label``."""
    from simulator.planner.plan import PlanResult
    from simulator.planner.report import write_plan_report
    from simulator.planner.spec import PlanSpec
    d = _json("plan", "plan_result.json", {"today": label, "chat": label})
    result = PlanResult(PlanSpec.model_validate(d["plan"]), d["status"], d["recommendation"],
                        d["candidates"], d["baseline"], d["pareto"], d["workload"], d["stats"],
                        d["base_scenario"], fallback=d.get("fallback") or {},
                        last_known_good=d.get("last_known_good"), quality=d.get("quality"))
    return write_plan_report(result, outdir, figures=figures)


def write_topology_plan(label: str, outdir: Path) -> dict[str, Path]:
    """The topology plan report: plan name, base file, candidate label and the verdict
    carry ``label``."""
    from simulator.planner.topology import write_topology_plan as write
    plan = {"name": label, "base": label, "num_requests": 100, "rate_scale": 1.0,
            "window_s": None, "slo": {"ttft_s": 0.5, "tpot_s": 0.05, "attainment_target": 0.9},
            "usd_per_gpu_hour": 2.5, "explanation": f"{label} is cheapest.",
            "rows": [{"label": label, "gpus": 2, "usd_per_hour": 5.0, "slo_attainment": 0.95,
                      "ttft_p99_s": 0.2, "tpot_p99_s": 0.02, "kv_transfer_p99_s": None,
                      "passed": True}]}
    files = write(plan, outdir)
    return {k: Path(v) for k, v in files.items()}


def write_spec_sweep(label: str, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """The acceptance-economics report: scenario name and slice ``chat`` carry ``label``."""
    from simulator.report.spec_sweep import write_spec_sweep_report
    from simulator.scenario.config import Scenario
    results = {float(k): v for k, v in
               _json("spec_sweep", "results.json", {"chat": label}).items()}
    scenario = Scenario.model_validate(
        _json("spec_sweep", "scenario.json", {"tiny_spec": label, "chat": label}))
    table = case_table("spec_sweep", "table.parquet")
    table["slice"] = table["slice"].replace("chat", label)
    return write_spec_sweep_report(outdir, table, results, scenario, source=label,
                                   figures=figures)


def write_validation(label: str, outdir: Path) -> dict[str, Path]:
    """The recorded-run validation report: run name and path, engine profile, peer name,
    a setting and its source, notes and approximations carry ``label``."""
    from simulator.observe.report import write_reports
    v = _json("validate", "validation.json", {"H100/Llama": label})
    v["run"]["path"], v["engine"]["name"] = label, label
    v["settings"][0]["source"] = label
    v["settings"].append({"key": label, "value": label, "source": label})
    v["notes"] = [*v["notes"], label]
    v["approximations"] = [label]
    v["constants_fitted_on"] = [label]
    v.setdefault("engine_features", {})[label] = {"value": label, "source": label}
    md, html = write_reports(outdir, v, [])
    return {"md": md, "html": html}


def write_self_check(label: str, outdir: Path) -> dict[str, Path]:
    """The self-check report (``servesim validate --self-check``): device, profile and trace
    carry ``label``."""
    from calibration.validate import render_report
    from simulator.report.render import write_report
    res = case_json("self_check", "validation.json")
    res["device"], res["profile"] = label, label
    res["workload"]["trace"] = label
    res["perf_provenance"] = {label: label}
    return write_report(outdir, "report", render_report(res, []))


#: Report kind -> writer(label, outdir) -> {"md": path, "html": path, ...}.
WRITERS = {
    "run": write_run,
    "compare": write_compare,
    "sweep": write_sweep,
    "plan": write_plan,
    "topology_plan": write_topology_plan,
    "spec_sweep": write_spec_sweep,
    "validation": write_validation,
    "self_check": write_self_check,
}
