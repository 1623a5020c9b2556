"""Write an analysis: tables (CSV + markdown), figures (PNG + SVG) and one self-contained
HTML report (images embedded as base64 PNG, tables inline)."""
from __future__ import annotations

import base64
import html
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure


@dataclass
class Analysis:
    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    table_captions: dict[str, str] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    figure_captions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    statistical_notes: str = ""


def _cell(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}".rstrip("0").rstrip(".")
    return str(value)


def to_markdown(frame: pd.DataFrame) -> str:
    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


# "tight": the saved image grows to hold every label and title, so none is cut at the edge
SAVE = dict(bbox_inches="tight", pad_inches=0.15)


def _png_base64(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, **SAVE)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _html_table(frame: pd.DataFrame) -> str:
    table = frame.to_html(index=False, border=0, classes="t", na_rep="", float_format=lambda v: _cell(float(v)))
    return f"<div class='scroll'>{table}</div>"  # wide tables scroll inside the page, not past its edge


def markdown_to_html(text: str) -> str:
    """CommonMark to HTML, raw HTML in the text escaped (it is shown, not run)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).render(text)


# The page is as wide as the widest table (the pairwise table's 15 columns at 1,400 px);
# prose keeps a readable measure. On a phone the figures scale down to the screen's width
# (a column as narrow as the screen, not 440 px) and wide tables scroll in their own box.
_CSS = """body{font-family:system-ui,sans-serif;max-width:1360px;margin:2em auto;padding:0 1em;color:#222}
p,ul,ol,figcaption,.notes{max-width:1000px}
table.t{border-collapse:collapse;font-size:12.5px;margin:.5em 0 1.5em}table.t td,table.t th{border-bottom:1px solid #ddd;
padding:3px 6px;text-align:right}table.t th{background:#f4f4f4}img{max-width:100%;height:auto}details{margin:.4em 0}
pre{overflow-x:auto}h1{overflow-wrap:anywhere}
.note{color:#555;font-size:14px}.scroll{overflow-x:auto}figure{margin:1em 0}figcaption{color:#555;font-size:14px}
.notes{font-size:14px;line-height:1.45}.notes code{background:#f4f4f4;padding:0 3px}
.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(440px,100%),1fr));gap:1em;align-items:start}
.figures figure{margin:0}.figures figure.wide{grid-column:1/-1}"""
WIDE_FIGURE_INCHES = 7
FIRST_TABLE = "summary"  # the report opens with it: each system's mean, CI and rank per metric


def render_html(analysis: Analysis, *, progress: bool = False) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(analysis.title)}</title>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             f"<style>{_CSS}</style></head><body><h1>{html.escape(analysis.title)}</h1>"]
    # the comparison first (the summary table), then the figures side by side to the page's
    # width, then every other table
    first = [n for n in analysis.tables if n == FIRST_TABLE]
    for name in first:
        caption = html.escape(analysis.table_captions.get(name, name))
        parts.append(f"<h2>Comparison</h2><p class='note'>{caption}</p>{_html_table(analysis.tables[name])}")
    if analysis.figures:
        parts.append("<h2>Figures</h2><div class='figures'>")
        from tqdm.auto import tqdm

        for name, fig in tqdm(analysis.figures.items(), desc="report.html", unit="figure", disable=not progress):
            caption = html.escape(analysis.figure_captions.get(name, name))
            wide = " class='wide'" if fig.get_figwidth() > WIDE_FIGURE_INCHES else ""  # a row of its own
            parts.append(f"<figure{wide}><img alt='{caption}' src='data:image/png;base64,{_png_base64(fig)}'>"
                         f"<figcaption>{caption}</figcaption></figure>")
        parts.append("</div>")
    if analysis.notes:
        parts.append("<h2>Notes</h2><ul class='note'>" + "".join(f"<li>{html.escape(n)}</li>" for n in analysis.notes) + "</ul>")
    rest = [n for n in analysis.tables if n not in first]
    if rest:
        parts.append("<h2>Tables</h2>")
        for name in rest:
            frame = analysis.tables[name]
            caption = html.escape(analysis.table_captions.get(name, name))
            parts.append(f"<details{' open' if len(frame) <= 40 else ''}><summary><b>{html.escape(name)}</b> — {caption} "
                         f"({len(frame)} rows)</summary>{_html_table(frame)}</details>")
    if analysis.statistical_notes:
        parts.append(f"<h2>Statistical notes</h2><div class='notes'>{markdown_to_html(analysis.statistical_notes)}</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(analysis: Analysis, out_dir: str | Path, *, progress: bool = False) -> dict[str, list[Path]]:
    """Write everything under `out_dir`; returns the written paths by kind. `progress`: a bar
    over the figures (each is drawn three times: PNG, SVG and the page's embedded PNG)."""
    from tqdm.auto import tqdm

    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = {"tables": [], "figures": [], "report": []}
    md = [f"# {analysis.title}\n"]
    if analysis.notes:
        md.append("## Notes\n\n" + "\n".join(f"- {n}" for n in analysis.notes) + "\n")
    for name, frame in analysis.tables.items():
        csv_path = out / "tables" / f"{name}.csv"
        frame.to_csv(csv_path, index=False)
        md_path = out / "tables" / f"{name}.md"
        body = f"## {name}\n\n{analysis.table_captions.get(name, '')}\n\n{to_markdown(frame)}"
        md_path.write_text(body, encoding="utf-8")
        md.append(body)
        written["tables"] += [csv_path, md_path]
    for name, fig in tqdm(analysis.figures.items(), desc="figures", unit="figure", disable=not progress):
        for ext in ("png", "svg"):
            path = out / "figures" / f"{name}.{ext}"
            fig.savefig(path, dpi=150 if ext == "png" else None, **SAVE)
            written["figures"].append(path)
    if analysis.statistical_notes:
        md.append("## Statistical notes\n\n" + analysis.statistical_notes)
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    (out / "report.html").write_text(render_html(analysis, progress=progress), encoding="utf-8")
    written["report"] += [out / "report.md", out / "report.html"]
    return written
