// Usage per day: the API's rows as series (usageSeries), and a stacked bar chart of them drawn
// as inline SVG (no chart library: a few dozen elements, and nothing to load from anywhere).
// Colours come from classes in admin.css, so the page's CSP needs no inline style.

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 760;
const HEIGHT = 240;
const MARGIN = { top: 28, right: 12, bottom: 28, left: 56 };

function node(tag, attrs = {}, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

// 0, 1, 2, 5, 10, 20, 50, ... : the smallest such step that puts `max` under `lines` grid lines
function niceStep(max, lines) {
  const raw = max / lines;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const factor of [1, 2, 5, 10]) {
    if (factor * power >= raw) return factor * power;
  }
  return 10 * power;
}

export function shortNumber(value) {
  if (value >= 1e9) return `${+(value / 1e9).toFixed(1)}G`;
  if (value >= 1e6) return `${+(value / 1e6).toFixed(1)}M`;
  if (value >= 1e3) return `${+(value / 1e3).toFixed(1)}k`;
  return String(value);
}

// days: ["YYYY-MM-DD", ...], oldest first. series: [{label, cls, values: [number per day]}],
// stacked bottom-up in the order given. Replaces the container's content with the chart.
export function renderChart(container, days, series, unit) {
  const svg = node("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": `${unit} per day`,
  });
  const totals = days.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] || 0), 0));
  const max = Math.max(0, ...totals);
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const step = max > 0 ? niceStep(max, 4) : 1;
  const top = max > 0 ? Math.ceil(max / step) * step : 4;
  const y = (value) => MARGIN.top + plotHeight - (value / top) * plotHeight;

  const grid = node("g", { class: "grid" });
  const axis = node("g", { class: "axis" });
  for (let value = 0; value <= top; value += step) {
    grid.append(node("line", { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(value), y2: y(value) }));
    axis.append(node("text", { x: MARGIN.left - 6, y: y(value) + 4, "text-anchor": "end" }, shortNumber(value)));
  }
  svg.append(grid, axis);

  const slot = plotWidth / Math.max(1, days.length);
  const barWidth = Math.max(2, slot * 0.7);
  const labelEvery = Math.ceil(days.length / 10);  // at most about ten dates under the axis
  const bars = node("g", { class: "bars" });
  days.forEach((day, i) => {
    const x = MARGIN.left + i * slot + (slot - barWidth) / 2;
    let base = 0;
    const parts = [];
    for (const s of series) {
      const value = s.values[i] || 0;
      parts.push(`${value.toLocaleString("en-US")} ${s.label}`);
      if (value > 0) {
        const rect = node("rect", {
          class: s.cls, x: x.toFixed(1), width: barWidth.toFixed(1),
          y: y(base + value).toFixed(1), height: Math.max(0.5, y(base) - y(base + value)).toFixed(1),
          "data-day": day,
        });
        rect.append(node("title", {}, `${day}: ${parts[parts.length - 1]}`));
        bars.append(rect);
        base += value;
      }
    }
    // an invisible column over the whole day, so its figures show on hover even where bars are thin
    const column = node("rect", {
      class: "hover", x: (MARGIN.left + i * slot).toFixed(1), width: slot.toFixed(1),
      y: MARGIN.top, height: plotHeight, fill: "transparent",
    });
    column.append(node("title", {}, `${day}: ${parts.join(", ")}`));
    bars.append(column);
    if (i % labelEvery === 0 || i === days.length - 1) {
      axis.append(node("text", {
        x: (MARGIN.left + (i + 0.5) * slot).toFixed(1), y: HEIGHT - 8, "text-anchor": "middle",
      }, day.slice(5)));
    }
  });
  svg.append(bars);

  const legend = node("g", { class: "legend" });
  let lx = MARGIN.left;
  for (const s of series) {
    legend.append(node("rect", { class: s.cls, x: lx, y: 8, width: 10, height: 10 }));
    const label = node("text", { x: lx + 14, y: 17 }, s.label);
    legend.append(label);
    lx += 22 + s.label.length * 6.5;
  }
  svg.append(legend);
  if (max === 0) {
    svg.append(node("text", {
      class: "empty", x: MARGIN.left + plotWidth / 2, y: MARGIN.top + plotHeight / 2, "text-anchor": "middle",
    }, `no ${unit} in these days`));
  }
  container.replaceChildren(svg);
  return svg;
}

// --- usage rows to series ------------------------------------------------------------------------

export const METRICS = {
  tokens: { unit: "tokens", series: [["input tokens", "bar-input", "input_tokens"], ["output tokens", "bar-output", "output_tokens"]] },
  requests: { unit: "requests", series: [["requests", "bar-requests", "requests"]] },
  tools: {
    unit: "tool calls",
    series: [["web searches", "bar-searches", "web_searches"], ["extracts", "bar-extracts", "web_extracts"], ["MCP calls", "bar-mcp", "mcp_calls"]],
  },
};

// The last `days` UTC days, oldest first, as the API names them.
function lastDays(days) {
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  return Array.from({ length: days }, (_, i) => new Date(today - (days - 1 - i) * 86400000).toISOString().slice(0, 10));
}

// /v1/admin/usage rows (one per key and day; of every key when none is chosen, added up per day)
// as the chart's axis and stacked series for `metric` (a METRICS name).
export function usageSeries(rows, days, metric) {
  const { unit, series } = METRICS[metric];
  const axis = lastDays(days);
  const index = new Map(axis.map((day, i) => [day, i]));
  return {
    axis,
    unit,
    series: series.map(([label, cls, field]) => {
      const values = new Array(axis.length).fill(0);
      for (const row of rows) {
        if (index.has(row.day)) values[index.get(row.day)] += Number(row[field] || 0);
      }
      return { label, cls, values };
    }),
  };
}
