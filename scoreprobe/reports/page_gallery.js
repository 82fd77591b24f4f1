  // ------------------------------------------------------------------ gallery (page_gallery.js)
  // Pixel grids of samples, the plane's anchors and endpoints picked on the basin map, from
  // DATA.gallery (reports/gallery.py). A record: its cells (pixels 0 / 1; for puzzles the symbol
  // 1..n, 0 none, -1 several), its state's title and colour, the groups it violates (tinted red)
  // and whether an image is known; the rule's group outlines are drawn over every image.
  const TINT = "#d62728", OUTLINE = "#ff7f0e", MAX_PICKS = 8;

  function records(rec, n) {   // the records of one image_records block, each with its n cells
    const cells = decode(rec.cells, Int8Array);
    return rec.state.map((st, k) => ({ cells: cells.subarray(k * n, (k + 1) * n), state: st, label: rec.label[k],
      color: rec.color[k], train: rec.train[k], heldout: rec.heldout[k], violated: rec.violated[k], image: rec.image[k] }));
  }
  function cellSize(rule, big) {
    const H = rule.shape[1], W = rule.shape[2], side = big ? 180 : 84;
    return rule.symbols ? (big ? 20 : 15) : Math.max(4, Math.min(big ? 24 : 12, Math.floor(side / Math.max(H, W))));
  }
  // One image as SVG: cells (rect.px, or text.sym for puzzles), violated groups tinted, the
  // rule's outline, a frame in the state's colour.
  function drawGrid(host, G, r, big) {
    const H = G.rule.shape[1], W = G.rule.shape[2], u = cellSize(G.rule, big);
    const svg = el("svg:svg", { width: W * u + 4, height: H * u + 4, viewBox: `-2 -2 ${W * u + 4} ${H * u + 4}`, class: "grid" }, host);
    if (!r.image) {
      el("svg:rect", { x: 0, y: 0, width: W * u, height: H * u, fill: "#f1f3f7" }, svg);
      el("svg:text", { x: W * u / 2, y: H * u / 2 + 4, "text-anchor": "middle", "font-size": 10, fill: "#5b6475" }, svg, "no image");
    }
    for (let y = 0; r.image && y < H; y++) for (let x = 0; x < W; x++) {
      const v = r.cells[y * W + x];
      if (!G.rule.symbols) { el("svg:rect", { class: "px", x: x * u, y: y * u, width: u, height: u, fill: v ? "#000" : "#fff" }, svg); continue; }
      el("svg:rect", { x: x * u, y: y * u, width: u, height: u, fill: "#fff" }, svg);
      el("svg:text", { class: "sym", x: (x + 0.5) * u, y: (y + 0.5) * u + 4, "text-anchor": "middle", "font-size": u - 4,
                       fill: v > 0 ? "#000" : TINT }, svg, v > 0 ? String(v) : v === 0 ? "·" : "?");
    }
    for (const g of r.violated) for (const [y, x] of G.rule.groups[g])
      el("svg:rect", { class: "tint", x: x * u, y: y * u, width: u, height: u, fill: TINT, "fill-opacity": 0.35 }, svg);
    for (const [x0, y0, x1, y1] of G.rule.outline)
      el("svg:line", { x1: x0 * u, y1: y0 * u, x2: x1 * u, y2: y1 * u, stroke: OUTLINE, "stroke-width": 2 }, svg);
    el("svg:rect", { x: 0, y: 0, width: W * u, height: H * u, fill: "none", stroke: r.color, "stroke-width": 2 }, svg);
    return svg;
  }
  function card(host, G, r, caption, big) {
    const c = el("div", { class: "card" }, host);
    c.dataset.state = G.states[r.state]; c.dataset.train = r.train; c.dataset.heldout = r.heldout;
    drawGrid(c, G, r, big);
    el("div", { class: "cap", style: `color:${r.color}` }, c, caption ? `${caption}: ${r.label}` : r.label);
    return c;
  }
  function counts(G, recs) {
    const n = G.states.map(() => 0);
    for (const r of recs) n[r.state]++;
    return G.states.map((s, k) => n[k] ? `${n[k]} ${SHORT[s] || s}` : "").filter((t) => t).join(", ");
  }

  function gallery(G) {
    const host = document.getElementById("gallery-panel"), n = G.rule.shape[1] * G.rule.shape[2];
    const legend = el("div", { class: "legend gallery-legend" }, host);
    G.states.forEach((s, k) => { const row = el("div", {}, legend); el("span", { class: "sw", style: `background:${G.colors[k]}` }, row); el("span", {}, row, SHORT[s] || s); });
    el("div", { class: "small" }, legend, (G.rule.outline.length ? "orange lines: the rule's groups; " : "") +
      "red cells: a group the image violates" + (G.rule.symbols ? "; symbols 1…n, · an empty cell, ? a cell with several" : "; black = 1"));
    if (G.samples) {
      el("h3", {}, host, `Samples at each checkpoint: the first ${G.samples.n} of the clocks (seed ${G.samples.seed})`);
      G.samples.steps.forEach((step, i) => {
        const recs = records(G.samples.records[i], n), row = el("div", { class: "gallery-row" }, host);
        row.dataset.step = step;
        el("div", { class: "row-head" }, row, `step ${step}: ${counts(G, recs)}`);
        const strip = el("div", { class: "strip" }, row);
        recs.forEach((r, k) => card(strip, G, r, `#${k}`));
      });
      const rows = host.querySelectorAll(".gallery-row");   // the slider's checkpoint outlined
      redraw.push((step) => rows.forEach((row) => row.classList.toggle("on", +row.dataset.step === step)));
    }
    if (G.anchors) {
      el("h3", {}, host, "The plane's anchors");
      const strip = el("div", { class: "strip", id: "anchor-strip" }, host);
      records(G.anchors, n).forEach((r, k) => card(strip, G, r, G.anchors.labels[k]));
    }
    if (G.endpoints) {
      el("h3", {}, host, "Endpoints picked on the basin map");
      el("p", { class: "small" }, host, `Click a cell of the basin map (above): its endpoint is shown beside the map and ` +
        `added here (the last ${MAX_PICKS} picks, newest first).` + (G.endpoints.stored ? "" :
        " The basins store holds no endpoint bits (it was made before the gallery): only endpoints that are items or anchors have an image."));
      el("div", { class: "strip", id: "picks" }, host);
    }
  }

  // A click on the basin map shows that cell's endpoint beside it (and follows the slider and σ_start).
  function picker(G, b) {
    const E = G.endpoints, n = G.rule.shape[1] * G.rule.shape[2], recs = records(E.records, n);
    const index = decode(E.index, Int16Array), maps = decode(b.maps, Int8Array);
    const cv = document.getElementById("basin-canvas"), px = cv.width, geo = planeGeom(b, px);
    const nS = b.sigma_start.length, cells = geo.nu * geo.nv, ctx = cv.getContext("2d");
    const shares = document.getElementById("shares-panel"), panel = el("div", { id: "endpoint-panel", class: "endpoint" });
    shares.parentNode.insertBefore(panel, shares);   // beside the map
    el("div", { class: "small" }, panel, "Click a cell of the basin map: its endpoint's image and state.");
    cv.style.cursor = "crosshair";
    let pick = null;
    function show(i, s) {
      const off = (i * nS + s) * cells + pick.r * geo.nu + pick.q, k = index[off], code = maps[off];
      panel.textContent = "";
      panel.dataset.cell = `${b.steps[i]},${b.sigma_start[s]},${pick.r},${pick.q}`;
      panel.dataset.state = b.states[code];
      el("div", { class: "small" }, panel, `endpoint from u = ${b.u[pick.q].toFixed(2)}, v = ${b.v[pick.r].toFixed(2)}`);
      el("div", { class: "small" }, panel, `step ${b.steps[i]}, σ_start = ${b.sigma_start[s]}`);
      if (k >= 0) card(panel, G, recs[k], "", true);
      else el("div", { class: "cap" }, panel, `${SHORT[b.states[code]] || b.states[code]} (left out: more than ${G.max_records} distinct endpoints)`);
      return k;
    }
    function mark() {
      const w = px / geo.nu, h = px / geo.nv;
      ctx.lineWidth = 2; ctx.strokeStyle = "#1d2330"; ctx.strokeRect(pick.q * w + 1, (geo.nv - 1 - pick.r) * h + 1, w - 2, h - 2);
    }
    cv.addEventListener("click", (ev) => {
      const box = cv.getBoundingClientRect();
      const fx = (ev.clientX - box.left - cv.clientLeft) / cv.clientWidth, fy = (ev.clientY - box.top - cv.clientTop) / cv.clientHeight;
      if (fx < 0 || fx >= 1 || fy < 0 || fy >= 1) return;
      pick = { q: Math.floor(fx * geo.nu), r: geo.nv - 1 - Math.floor(fy * geo.nv) };
      window.__report.update();   // redraws the map (and the mark) and the panel at the slider's step
      const k = index[(S.step * nS + S.sigma) * cells + pick.r * geo.nu + pick.q], strip = document.getElementById("picks");
      if (!strip || k < 0) return;
      const c = card(strip, G, recs[k], `step ${b.steps[S.step]}, σ ${b.sigma_start[S.sigma]}, (${b.u[pick.q].toFixed(1)}, ${b.v[pick.r].toFixed(1)})`);
      strip.insertBefore(c, strip.firstChild);
      while (strip.children.length > MAX_PICKS) strip.removeChild(strip.lastChild);
    });
    redraw.push((step, i, s) => { if (pick) { mark(); show(i, s); } });
  }
