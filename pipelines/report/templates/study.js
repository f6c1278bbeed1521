// The study page's behaviour: sortable tables, the domain filter, the charts (vega-embed, carried packed above), the YaRN
// toggle and the one-run view. It reads only the page: the specs and runs in the JSON script elements, the table
// cells' data-value attributes (summary.json's numbers, written exactly).
(async function () {
  "use strict";

  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser has no DecompressionStream, which unpacks the page's charts and runs");
  }

  // what the page carries gzipped in base64 (pipelines.report.html._packed), as text
  async function inflate(id) {
    const text = atob(document.getElementById(id).textContent.trim());
    const bytes = Uint8Array.from(text, (character) => character.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  async function unpack(id) {
    return JSON.parse(await inflate(id));
  }

  // the charting JavaScript, run as a script of the page: it defines window.vegaEmbed
  const bundle = document.createElement("script");
  bundle.textContent = await inflate("vega-bundle");
  document.head.appendChild(bundle);

  const charts = await unpack("charts-data");
  const runs = new Map((await unpack("runs-data")).map((run) => [run.label, run]));
  const views = {};

  // ------------------------------------------------------------------------------------------- sorting

  function cellValue(cell) {
    // data-order where the column sorts by something else than its value (a verdict's rank, a score or Δ turned
    // so that the better sorts first)
    const text = cell.dataset.order !== undefined ? cell.dataset.order : cell.dataset.value;
    if (text === undefined || text === "") return null;
    const number = Number(text);
    return Number.isNaN(number) ? text : number;
  }

  function compare(x, y, ascending) {
    if (x === null && y === null) return 0;
    if (x === null) return 1; // a missing value sorts last either way
    if (y === null) return -1;
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return ascending ? order : -order;
  }

  document.querySelectorAll("table.sortable").forEach((table) => {
    const headers = Array.from(table.tHead.rows[0].cells);
    headers.forEach((header, column) => {
      header.querySelector("button").addEventListener("click", () => {
        const ascending = header.getAttribute("aria-sort") !== "ascending";
        headers.forEach((other) => other.removeAttribute("aria-sort"));
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        // rows of several domains sort within their domain (the domains in the order they came): a score or Δ of
        // one domain is no measure of another's
        const domains = [...new Set(rows.map((row) => row.dataset.domain))];
        const block = (row) => (header.dataset.key === "domain" ? 0 : domains.indexOf(row.dataset.domain));
        rows.sort((a, b) => block(a) - block(b)
          || compare(cellValue(a.cells[column]), cellValue(b.cells[column]), ascending));
        rows.forEach((row) => body.appendChild(row));
      });
    });
  });

  // ------------------------------------------------------------------------------------- domain filter

  const filter = document.getElementById("domain-filter");
  const picker = document.getElementById("run-picker");

  // the run picker's options, one group per domain and encoding in the runs' order, built from the packed runs: a
  // study of a thousand runs carried them as 120 kB of markup, a twentieth of its page budget
  const pickerGroups = new Map();
  for (const run of runs.values()) {
    const key = `${run.domain} / ${run.encoding}`;
    if (!pickerGroups.has(key)) {
      const group = document.createElement("optgroup");
      group.label = key;
      group.dataset.domain = run.domain;
      pickerGroups.set(key, picker.appendChild(group));
    }
    const option = new Option(run.label, run.label);
    option.dataset.domain = run.domain;
    pickerGroups.get(key).appendChild(option);
  }
  picker.value = picker.dataset.first;

  function applyFilter() {
    const chosen = filter.value;
    document.querySelectorAll("[data-domain]").forEach((element) => {
      element.hidden = chosen !== "all" && element.dataset.domain !== chosen;
    });
    const current = picker.selectedOptions[0];
    if (current && current.hidden) {
      const first = Array.from(picker.options).find((option) => !option.hidden);
      if (first) {
        picker.value = first.value;
        showRun(first.value);
      }
    }
    window.dispatchEvent(new Event("resize")); // charts sized to their container measure it again once shown
  }
  filter.addEventListener("change", applyFilter);
  // a chart in a closed section has no width: opened, it measures its container again
  document.querySelectorAll("details").forEach((details) =>
    details.addEventListener("toggle", () => window.dispatchEvent(new Event("resize")))
  );

  // ------------------------------------------------------------------------------------- table heads

  // a table's head stays in view under the toolbar while any of its rows is (issue 64): a table wider than the
  // screen scrolls sideways inside its box, and a box that scrolls is where position: sticky sticks, never the page
  // (the head stuck inside a 732 px box, or was off screen while reading the last rows); the head is moved down by
  // hand instead, within its table
  const toolbar = document.querySelector("nav.toolbar");
  const heads = Array.from(document.querySelectorAll("main table.data > thead"));
  let placing = false;
  function placeHeads() {
    placing = false;
    const bar = toolbar ? toolbar.getBoundingClientRect() : null;
    const top = bar && bar.top <= 0.5 ? bar.bottom : 0; // under the toolbar once it is pinned to the top
    heads.forEach((head) => {
      const table = head.parentElement.getBoundingClientRect();
      const height = head.offsetHeight;
      const shift = Math.max(0, Math.min(top - table.top, table.height - 2 * height));
      head.style.transform = shift > 0 ? `translateY(${shift}px)` : "";
    });
  }
  function schedulePlaceHeads() {
    if (!placing) {
      placing = true;
      requestAnimationFrame(placeHeads);
    }
  }
  window.addEventListener("scroll", schedulePlaceHeads, { passive: true });
  window.addEventListener("resize", schedulePlaceHeads);
  placeHeads();

  // -------------------------------------------------------------------------------------------- charts

  // a click or a tap on a mark writes its tooltip's figures next to it: a phone has no hover, and written under a
  // tall chart they landed 680 px below the point (issue 64)
  function showPoint(element, event, item) {
    if (!item || !item.tooltip || typeof item.tooltip !== "object") return;
    const figure = element.closest("figure") || element.parentElement;
    let detail = figure.querySelector(":scope > .point-detail");
    if (!detail) {
      detail = document.createElement("p");
      detail.className = "point-detail";
      detail.setAttribute("aria-live", "polite");
      detail.setAttribute("role", "status");
      detail.title = "tap to close";
      detail.addEventListener("click", () => detail.remove()); // it lies over the points below it
      figure.appendChild(detail);
    }
    detail.textContent = Object.entries(item.tooltip).map(([name, value]) => `${name}: ${value}`).join("; ");
    // just below the point, within the figure's width
    const box = figure.getBoundingClientRect();
    const y = event && Number.isFinite(event.clientY) ? event.clientY - box.top : 0;
    detail.style.top = `${Math.round(y + 14)}px`;
  }

  function embed(element, spec) {
    const name = element.dataset.chart;
    return vegaEmbed(element, spec, { actions: false, renderer: "svg" }).then((result) => {
      views[name] = result.view;
      result.view.addEventListener("click", (event, item) => showPoint(element, event, item));
      nameChart(element); // vega-embed sets the element's role: named again once drawn
      element.dataset.rendered = "true";
    });
  }

  // a chart is an image to a screen reader, named by its text alternative (Vega names it a graphics document, which
  // no browser maps to a named role: the charts read as unnamed)
  function nameChart(element) {
    element.setAttribute("role", "img");
    element.setAttribute("aria-label", charts[element.dataset.chart].description || element.dataset.chart);
  }

  // the one-run view's charts are drawn with a run's rows, and only once a run has some: drawn empty (the reference's
  // own run has no examples to set against the reference's, a published run may have no training log), Vega warned of
  // an infinite extent in the console
  const RUN_DATA = { "run-train": "train", "run-examples": "examples" };
  const pendingRun = {};
  function drawRun(name, rows) {
    const element = document.getElementById(name);
    if (!rows.length) return; // hidden by showRun, its last drawing kept for the next run that has rows
    if (views[name]) {
      views[name].data(RUN_DATA[name], rows).runAsync();
    } else if (!pendingRun[name]) {
      const spec = charts[name];
      pendingRun[name] = embed(element, { ...spec, data: { ...spec.data, values: rows } });
    } else {
      pendingRun[name].then(() => views[name].data(RUN_DATA[name], rows).runAsync());
    }
  }

  const embedded = Array.from(document.querySelectorAll("div.chart[data-chart]")).map((element) => {
    if (RUN_DATA[element.dataset.chart]) {
      nameChart(element);
      element.dataset.rendered = "on-demand"; // drawn by showRun, with the first run that has rows for it
      return Promise.resolve();
    }
    return embed(element, charts[element.dataset.chart]);
  });

  const yarn = document.getElementById("show-yarn");
  if (yarn) {
    yarn.addEventListener("change", () => {
      document.querySelectorAll("div.chart[data-yarn]").forEach((element) => {
        const view = views[element.dataset.chart];
        if (view) view.signal("show_yarn", yarn.checked).runAsync();
      });
    });
  }

  // the extrapolation charts draw the encodings ticked in the curve picker (each chart those of them it has)
  const curvePicker = document.getElementById("curve-picker");
  if (curvePicker) {
    const boxes = Array.from(curvePicker.querySelectorAll("input[type=checkbox]"));
    const firstShown = boxes.filter((box) => box.checked).map((box) => box.value);
    const drawCurves = () => {
      const picked = boxes.filter((box) => box.checked).map((box) => box.value);
      document.querySelectorAll("div.chart[data-curves]").forEach((element) => {
        const view = views[element.dataset.chart];
        if (!view) return;
        const present = new Set(chartEncodings(element));
        view.signal("shown", picked.filter((name) => present.has(name))).runAsync();
      });
    };
    boxes.forEach((box) => box.addEventListener("change", drawCurves));
    curvePicker.querySelectorAll("button[data-pick]").forEach((button) => {
      button.addEventListener("click", () => {
        boxes.forEach((box) => {
          box.checked = button.dataset.pick === "all" || firstShown.includes(box.value);
        });
        drawCurves();
      });
    });
  }

  function chartEncodings(element) {
    // the encodings a chart has values of: its colour scale's domain (page_charts.Colours.scale)
    const spec = charts[element.dataset.chart];
    const layers = spec.layer || [spec];
    return layers.flatMap((layer) => ((layer.encoding || {}).color || {}).scale?.domain || []);
  }

  // ------------------------------------------------------------------------------------------- one run

  function setText(id, text) {
    document.getElementById(id).textContent = text;
  }

  // a run's rows for the one-run charts: its training curves, its examples against the reference's
  function runRows(run) {
    if (!run) return null;
    const train = (run.train || []).map(([curve, step, loss]) => ({ curve, step, loss }));
    const reference = run.ref ? new Map(runs.get(run.ref).examples) : new Map();
    const examples = run.examples
      .filter(([example]) => reference.has(example))
      .map(([example, nll]) => ({ example: String(example), run: nll, ref: reference.get(example) }));
    return { train, examples };
  }

  function showRun(label) {
    const run = runs.get(label);
    if (!run) return;
    const { train, examples } = runRows(run);
    setText(
      "run-note",
      `${run.label}: encoding ${run.encoding}, seed ${run.seed}` +
        (run.ref ? `; compared example by example with ${run.ref}.` : `; ${run.note}.`)
    );
    // a run without a training log shows why instead of an empty chart
    document.getElementById("run-train").hidden = !train.length;
    setText(
      "run-train-note",
      run.train === null
        ? "No training log was kept for this run: it was published before studies carried their runs' logs " +
            "(format 4), or its folder held none."
        : ""
    );
    // a run with nothing to set its examples against (the reference's own, one without per-example scores) says
    // so instead of an empty chart
    document.getElementById("run-examples").hidden = !run.ref || !examples.length;
    const stride = Math.ceil(run.total_examples / Math.max(run.examples.length, 1));
    const thinned = stride > 1 ? ` (one in ${stride} of its ${run.total_examples})` : "";
    setText("run-examples-note", run.ref ? `${examples.length} test examples scored by both runs${thinned}.` : run.note);
    setText("run-manifest", JSON.stringify(run.manifest, null, 1));
    // drawn once shown: a chart first drawn in a hidden box would measure no width
    drawRun("run-train", train);
    drawRun("run-examples", run.ref ? examples : []);
    window.dispatchEvent(new Event("resize")); // a chart shown again measures its container
  }
  picker.addEventListener("change", () => showRun(picker.value));

  await Promise.all(embedded);
  if (picker.value) showRun(picker.value);
  await Promise.all(Object.values(pendingRun)); // the run the page opens on drawn
  placeHeads();
  document.body.dataset.ready = "true";
})().catch((error) => {
  // said on the page, not only in the console: a reader whose browser cannot run the script sees why the charts
  // are missing, and that the numbers are in the tables and in summary.md
  console.error(error);
  const box = document.getElementById("page-error");
  box.textContent =
    "This page's script stopped (" + (error && error.message ? error.message : String(error)) + "): the charts, " +
    "sorting, the domain filter and the one-run view may be missing or incomplete. The answer and the tables are " +
    "here, and every number is in summary.md.";
  box.hidden = false;
  document.body.dataset.failed = "true";
});
