"""A server-rendered SVG bar chart of decisions per day by outcome (no chart library)."""

from __future__ import annotations

from markupsafe import Markup, escape

from app.copilot.review import Dashboard
from app.status import OUTCOMES, Status


def decisions_svg(stats: Dashboard, width: int = 720, height: int = 180) -> Markup:
    """Stacked bars, one per day, labelled for screen readers by a <title> per bar."""
    days = stats.days
    top = max([sum(stats.per_day.get(d, {}).values()) for d in days] + [1])
    gap, left, bottom = 2, 28, 20
    bar = (width - left) / len(days) - gap
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Decisions per day over the last {len(days)} days" class="chart">',
        f'<text x="0" y="12" class="chart__axis">{top}</text>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" class="chart__base"/>',
    ]
    for i, day in enumerate(days):
        counts = stats.per_day.get(day, {})
        x = left + i * (bar + gap)
        y = float(height - bottom)
        label = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"
        parts.append(f"<g><title>{escape(day.isoformat())}: {escape(label)}</title>")
        for outcome, n in sorted(counts.items()):
            h = (height - bottom - 16) * n / top
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{OUTCOMES[Status(outcome)].colour}"/>'
            )
        parts.append("</g>")
        if i % 7 == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 4}" class="chart__axis">{day.strftime("%d %b")}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def decisions_legend(stats: Dashboard) -> Markup:
    """The chart's legend: a swatch of each outcome's colour and its name, for the outcomes drawn."""
    drawn = sorted({outcome for counts in stats.per_day.values() for outcome in counts})
    if not drawn:
        return Markup('<p class="muted">No decisions in these days.</p>')
    items = "".join(
        f'<li><svg width="12" height="12" viewBox="0 0 12 12" aria-hidden="true" focusable="false">'
        f'<rect width="12" height="12" fill="{OUTCOMES[Status(outcome)].colour}"/></svg> {escape(outcome)}</li>'
        for outcome in drawn
    )
    return Markup(f'<ul class="chart__legend" aria-label="Legend">{items}</ul>')
