"""``shardplan show FILE --html OUT``: the plan as one self-contained page.

One row per parameter, input or output of each module, one column per mesh axis, each
placement a coloured cell; modules alike but for a layer number are one row group
(``model.layers.[0-31].mlp``). No script, no font, no link: the page needs no network.
"""

from __future__ import annotations

import html
from pathlib import Path

from shardplan.artifact.atomic import atomic_write_bytes
from shardplan.review.fold import fold_keyed, name_text, natural_key
from shardplan.review.view import Blocks, PlanView, compact, member_of, mesh_line, plan_lines

# Colours by the kind of placement: replicated grey, shards by dimension, partials warm.
_COLOURS = {
    "R": "#e4e4e4",
    "S(0)": "#8ec5ff",
    "S(1)": "#9be39b",
    "S(2)": "#d3b5ff",
    "S(-1)": "#7fd6cf",
}
_SHARD_OTHER = "#b8d0ea"
_STRIDED = "#c9a7e8"
_PARTIAL = "#ffbe7a"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
th.module { background: #f6f6f6; font-family: monospace; max-width: 40em; overflow-wrap: anywhere; }
td.field, td.value { font-family: monospace; }
td.p { font-family: monospace; text-align: center; }
.legend td { font-family: monospace; }
"""


def colour(text: str) -> str:
    """The cell colour of a placement text."""
    if text in _COLOURS:
        return _COLOURS[text]
    if text.startswith("SS("):
        return _STRIDED
    if text.startswith("P("):
        return _PARTIAL
    return _SHARD_OTHER


def render(view: PlanView) -> str:
    """The page of ``view``."""
    blocks = Blocks(view)
    texts = blocks.texts
    keyed = blocks.keys()
    groups = sorted(
        fold_keyed(keyed.items()),
        key=lambda group: natural_key(name_text(group[0])),
    )
    # Every axis a placement names: the mesh's first, in mesh order.
    rows: list[tuple[str, int, list[tuple[str, dict[str, str] | str]]]] = []
    axes = list(view.mesh or ())
    seen: set[str] = set()
    for segments, _ in groups:
        member = member_of(segments)
        cells: list[tuple[str, dict[str, str] | str]] = []
        entry, rule = view.entries.get(member) or {}, view.rules.get(member) or {}
        for prefix, fields in (("", entry), ("rule.", rule)):
            for key_name in sorted(fields):
                value = fields[key_name]
                table = texts.table(value)
                if table is not None:
                    for name in table:
                        placement = {str(a): str(p) for a, p in value[name].items()}
                        cells.append((f"{prefix}{key_name}[{name}]", placement))
                        seen.update(placement)
                elif texts.placement(value) is not None:
                    placement = {str(a): str(p) for a, p in value.items()}
                    cells.append((prefix + key_name, placement))
                    seen.update(placement)
                else:
                    cells.append((prefix + key_name, compact(value)))
        count = _count(segments)
        rows.append((name_text(segments), count, cells))
    axes += sorted(seen - set(axes))
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>shardplan: {html.escape(view.source)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(view.source)}</h1>",
        f"<p>{html.escape(mesh_line(view))}; {len(keyed):,} modules in {len(rows):,} groups</p>",
    ]
    out += _legend(rows)
    plan = plan_lines(view)
    if plan:
        out.append("<details><summary>plan-level keys</summary><pre>")
        out += [html.escape(line) for line in plan]
        out.append("</pre></details>")
    out.append('<table class="plan"><thead><tr><th>module</th><th>field</th>')
    out += [f"<th>{html.escape(axis)}</th>" for axis in axes]
    out.append("</tr></thead>")
    for name, count, cells in rows:
        out.append(f'<tbody data-module="{html.escape(name)}">')
        span = max(1, len(cells))
        label = html.escape(name) + (f" <small>({count} modules)</small>" if count > 1 else "")
        head = f'<th class="module" rowspan="{span}">{label}</th>'
        if not cells:
            out.append(f"<tr>{head}<td></td>" + "<td></td>" * len(axes) + "</tr>")
        for index, (field_name, value) in enumerate(cells):
            row = [head if index == 0 else "", f'<td class="field">{html.escape(field_name)}</td>']
            if isinstance(value, str):
                row.append(
                    f'<td class="value" colspan="{max(1, len(axes))}">{html.escape(value)}</td>'
                )
            else:
                for axis in axes:
                    text = value.get(axis)
                    if text is None:
                        row.append("<td></td>")
                    else:
                        style = f"background:{colour(text)}"
                        row.append(f'<td class="p" style="{style}">{html.escape(text)}</td>')
            out.append("<tr>" + "".join(row) + "</tr>")
        out.append("</tbody>")
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"


def _count(segments: tuple[str | frozenset[int], ...]) -> int:
    count = 1
    for segment in segments:
        if not isinstance(segment, str):
            count *= len(segment)
    return count


def _legend(rows: list[tuple[str, int, list[tuple[str, dict[str, str] | str]]]]) -> list[str]:
    used = sorted(
        {p for _, _, cells in rows for _, v in cells if isinstance(v, dict) for p in v.values()}
    )
    if not used:
        return []
    cells = "".join(
        f'<td style="background:{colour(text)}">{html.escape(text)}</td>' for text in used
    )
    return [f'<table class="legend"><tr><th>placements</th>{cells}</tr></table>']


def write_page(view: PlanView, out: Path) -> int:
    """Write the page of ``view`` to ``out``; returns the number of module groups."""
    text = render(view)
    atomic_write_bytes(out, text.encode("utf-8"))  # ArtifactWriteError, naming out
    return text.count("<tbody ")
