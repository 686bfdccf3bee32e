// The console's live charts: each <svg data-source="..."> is redrawn from its JSON samples every two seconds,
// {"series": [names], "points": [[time s, value per series], ...]}. No library; nothing leaves the broker.
"use strict";

const NS = "http://www.w3.org/2000/svg";
const HEIGHT = 160, PAD = 18;

function scaled(value) {
  const units = ["", "k", "M", "G"];
  let unit = 0;
  while (Math.abs(value) >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return (unit ? value.toFixed(1) : Math.round(value)) + units[unit];
}

function draw(svg, data) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const WIDTH = Math.max(200, svg.clientWidth || 600);  // drawn in the page's pixels: nothing stretched
  svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  const points = data.points;
  const top = Math.max(1, ...points.flatMap((point) => point.slice(1)));
  const first = points.length ? points[0][0] : 0, last = points.length ? points[points.length - 1][0] : 1;
  const span = Math.max(1, last - first);
  const label = document.createElementNS(NS, "text");
  label.setAttribute("x", 4); label.setAttribute("y", 12); label.setAttribute("class", "axis");
  label.textContent = scaled(top);
  svg.appendChild(label);
  data.series.forEach((name, index) => {
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("class", "series " + name);
    line.setAttribute("points", points.map((point) =>
      [PAD + (point[0] - first) / span * (WIDTH - 2 * PAD),
       HEIGHT - PAD - point[index + 1] / top * (HEIGHT - 2 * PAD)].join(",")).join(" "));
    svg.appendChild(line);
    if (points.length === 1) {  // one sample is a dot, not yet a line
      const dot = document.createElementNS(NS, "circle");
      dot.setAttribute("class", "series " + name);
      dot.setAttribute("cx", PAD);
      dot.setAttribute("cy", HEIGHT - PAD - points[0][index + 1] / top * (HEIGHT - 2 * PAD));
      dot.setAttribute("r", 3);
      svg.appendChild(dot);
    }
  });
  svg.dataset.points = points.length;
  if (points.length) svg.dataset.latest = points[points.length - 1].slice(1).join(",");
}

async function refresh(svg) {
  try {
    const answer = await fetch(svg.dataset.source, {credentials: "same-origin"});
    if (answer.ok) draw(svg, await answer.json());
  } catch (error) {
    // the broker stopped or restarted: keep the last drawing, try again on the next tick
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const charts = document.querySelectorAll("svg[data-source]");
  charts.forEach(refresh);
  if (charts.length) setInterval(() => charts.forEach(refresh), 2000);
});
