// scoreprobe report page: draws the charts, basin maps and score fields from the JSON embedded in
// the page (#report-data) and links them to one step slider. Plain JavaScript, no library, no network.
// The page's script is this file, page_gallery.js and page_compare.js in one function scope, in
// "use strict", then start() (reports/render.py, SCRIPT_PARTS).
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const S = { step: 0, sigma: 0, timer: null };
  const SHORT = { invalid: "non-finite", rule_violating: "rule-violating", valid_novel: "valid, novel",
                  valid_heldout: "held-out item", valid_memorized: "training item (copy)" };
  const redraw = [];

  function decode(b64, Type) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }
  function el(tag, attrs, parent, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
    // style through the CSSOM: the page's content policy allows no inline style attributes
    for (const k in attrs || {}) if (k === "style") e.style.cssText = attrs[k]; else e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  const fmtStep = (s) => s >= 1e4 ? (s / 1e3).toFixed(0) + "k" : s >= 1e3 ? (s / 1e3).toFixed(1).replace(/\.0$/, "") + "k" : String(Math.round(s));
  const pct = (x) => x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%";

  // ------------------------------------------------------------------ SVG line chart
  // opt: {w, h, xs (data x per point), xt (x -> axis units), xticks [[x, label]], xlabel, ylabel,
  //       series [{label, color, y, lo, hi, dash, marks (dots only where true)}], vlines [{x, lo, hi, color, label}],
  //       bands [[x0, x1]], hlines [{y, color}], legend (its width, default 170)}
  function chart(host, opt) {
    host.textContent = "";
    const W = opt.w || 760, H = opt.h || 300, m = { l: 52, r: opt.legend || 170, t: (opt.vlines || []).length > 1 ? 34 : 22, b: 40 };
    const root = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" }, host);
    const ux = opt.xs.map(opt.xt), x0 = Math.min(...ux), x1 = Math.max(...ux);
    const X = (x) => m.l + (opt.xt(x) - x0) / ((x1 - x0) || 1) * (W - m.l - m.r);
    const Y = (y) => H - m.b - y * (H - m.t - m.b);
    const clampX = (x) => Math.max(m.l, Math.min(W - m.r, x));
    for (const [a, b] of opt.bands || [])
      el("svg:rect", { x: clampX(X(a)), y: m.t, width: Math.max(0, clampX(X(b)) - clampX(X(a))), height: H - m.t - m.b, fill: "#2ca02c", "fill-opacity": 0.1 }, root);
    const placed = [];   // label x positions: a label close to an earlier one goes one line up
    for (const v of opt.vlines || []) {
      if (v.lo !== null && v.lo !== undefined) {
        const a = clampX(X(v.lo)), b = v.hi === null ? W - m.r : clampX(X(v.hi));
        el("svg:rect", { x: a, y: m.t, width: Math.max(1, b - a), height: H - m.t - m.b, fill: v.color, "fill-opacity": 0.13 }, root);
      }
      const x = clampX(X(v.x));
      el("svg:line", { x1: x, x2: x, y1: m.t, y2: H - m.b, stroke: v.color, "stroke-width": 1.5, "stroke-dasharray": "5 3" }, root);
      const up = placed.filter((p) => Math.abs(p - x) < 70).length % 2;
      placed.push(x);
      el("svg:text", { x: x, y: m.t - 6 - 13 * up, "text-anchor": "middle", "font-size": 11, fill: v.color }, root, v.label);
    }
    for (const g of [0, 0.25, 0.5, 0.75, 1]) {
      el("svg:line", { x1: m.l, x2: W - m.r, y1: Y(g), y2: Y(g), stroke: "#e6e8ee" }, root);
      el("svg:text", { x: m.l - 6, y: Y(g) + 4, "text-anchor": "end", "font-size": 11, fill: "#5b6475" }, root, g.toFixed(2));
    }
    for (const hl of opt.hlines || [])
      el("svg:line", { x1: m.l, x2: W - m.r, y1: Y(hl.y), y2: Y(hl.y), stroke: hl.color, "stroke-dasharray": "2 3" }, root);
    for (const [x, label] of opt.xticks) {
      if (opt.xt(x) < x0 - 1e-9 || opt.xt(x) > x1 + 1e-9) continue;
      el("svg:line", { x1: X(x), x2: X(x), y1: H - m.b, y2: H - m.b + 4, stroke: "#5b6475" }, root);
      el("svg:text", { x: X(x), y: H - m.b + 16, "text-anchor": "middle", "font-size": 11, fill: "#5b6475" }, root, label);
    }
    el("svg:text", { x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12 }, root, opt.xlabel);
    el("svg:text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle", "font-size": 12, transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})` }, root, opt.ylabel);
    el("svg:rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "none", stroke: "#9aa1ad" }, root);
    opt.series.forEach((s, k) => {
      const pts = opt.xs.map((x, i) => [X(x), s.y[i], i]).filter((p) => p[1] !== null);
      if (s.lo) {
        const up = opt.xs.map((x, i) => `${X(x)},${Y(s.hi[i])}`), dn = opt.xs.map((x, i) => `${X(x)},${Y(s.lo[i])}`).reverse();
        el("svg:polygon", { points: up.concat(dn).join(" "), fill: s.color, "fill-opacity": 0.18, stroke: "none" }, root);
      }
      el("svg:polyline", { points: pts.map((p) => `${p[0]},${Y(p[1])}`).join(" "), fill: "none", stroke: s.color, "stroke-width": 2, "stroke-dasharray": s.dash || "" }, root);
      for (const p of pts) if (!s.marks || s.marks[p[2]]) el("svg:circle", { cx: p[0], cy: Y(p[1]), r: 2.6, fill: s.color }, root);
      const ly = m.t + 8 + 18 * k;
      el("svg:line", { x1: W - m.r + 12, x2: W - m.r + 34, y1: ly, y2: ly, stroke: s.color, "stroke-width": 2, "stroke-dasharray": s.dash || "" }, root);
      el("svg:text", { x: W - m.r + 40, y: ly + 4, "font-size": 12 }, root, s.label);
    });
    const cur = el("svg:line", { y1: m.t, y2: H - m.b, stroke: "#1d2330", "stroke-width": 1, opacity: 0 }, root);
    return { mark(x) { if (x === null || x === undefined) { cur.setAttribute("opacity", 0); return; } const px = X(x); cur.setAttribute("x1", px); cur.setAttribute("x2", px); cur.setAttribute("opacity", 0.6); } };
  }
  const logStep = (s) => Math.log10(s + 1);
  // The step axis: log from the first positive checkpoint p0 on; 0 … p0 linear in a short stretch
  // (as the matplotlib figures' symlog), so step 0 is shown without wasting the axis on 1 … p0.
  function stepAxis(steps) {
    const pos = steps.filter((s) => s > 0), p0 = pos.length ? Math.min(...pos) : 1, top = Math.max(...steps);
    const xt = (s) => s >= p0 ? Math.log10(s) : Math.log10(p0) - 0.35 + 0.35 * Math.max(s, 0) / p0;
    const ticks = steps.includes(0) ? [[0, "0"]] : [];
    for (let e = 0; e <= 8; e++) for (const mnt of [1, 2, 5]) { const v = mnt * 10 ** e; if (v >= p0 && v <= top * 1.01) ticks.push([v, fmtStep(v)]); }
    return { xt, ticks };
  }

  // ------------------------------------------------------------------ clocks
  function clocks(c) {
    const host = document.getElementById("clocks-chart");
    const colors = { tau_rule: "#2ca02c", tau_novel: "#9467bd", tau_mem: "#ff9f1c" };
    const names = { tau_rule: "τ_rule", tau_novel: "τ_novel", tau_mem: "τ_mem" };
    const axis = stepAxis(c.steps);
    const vlines = Object.keys(c.taus).filter((k) => c.taus[k].value !== null).map((k) => ({
      x: c.taus[k].value, color: colors[k], label: `${names[k]} ${Math.round(c.taus[k].value)}`,
      lo: c.taus[k].ci ? c.taus[k].ci[0] : undefined, hi: c.taus[k].ci ? c.taus[k].ci[1] : undefined }));
    const ch = chart(host, {
      w: 900, h: 320, xs: c.steps, xt: axis.xt, xticks: axis.ticks, xlabel: "training step (log scale)", ylabel: c.curves.group_acc ? "fraction of samples (dotted: of groups)" : "fraction of samples",
      bands: c.window.open ? c.window.intervals : [], vlines: vlines,
      hlines: [{ y: c.thresholds.rule, color: "#2ca02c" }, { y: c.thresholds.mem, color: "#ff9f1c" }, { y: c.thresholds.novel, color: "#9467bd" }],
      series: [{ label: "rule accuracy", color: "#2ca02c", ...c.curves.rule_acc },
               { label: "valid, not a copy", color: "#9467bd", dash: "6 3", ...c.curves.novel_valid },
               { label: "memorized", color: "#ff9f1c", ...c.curves.mem_ratio }]
        .concat(c.curves.group_acc ? [{ label: "group accuracy", color: "#7bc96f", dash: "2 3", ...c.curves.group_acc }] : [])
        .concat(c.curves.group_mem ? [{ label: "group memorization", color: "#f5b971", dash: "2 3", ...c.curves.group_mem }] : []) });
    const note = el("p", { class: "small" }, host, (c.window.open ? "green shading: the innovation window; " :
      "innovation window " + c.window.status + "; ") + "vertical bands: the τ CIs; dotted lines: thresholds; grey line: the slider's step." +
      (c.curves.group_acc ? " Dotted curves: group level (share of a sample's groups that obey the rule; share equal to those of its " +
        "nearest training item), which moves where the sample-level curves stay near 0 (hard rules)." : ""));
    redraw.push((step) => ch.mark(step));
    return note;
  }

  // ------------------------------------------------------------------ plane panels
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
  function hex(c) { return [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)); }
  const VIR = VIRIDIS.map(hex);
  function viridis(t) {
    t = Math.max(0, Math.min(1, t)) * (VIR.length - 1);
    const i = Math.min(VIR.length - 2, Math.floor(t)), f = t - i;
    return VIR[i].map((a, k) => Math.round(a + f * (VIR[i + 1][k] - a)));
  }
  function planeGeom(g, px) {
    const n = g.u.length, du = (g.u[n - 1] - g.u[0]) / (n - 1), dv = (g.v[g.v.length - 1] - g.v[0]) / (g.v.length - 1);
    const u0 = g.u[0] - du / 2, u1 = g.u[n - 1] + du / 2, v0 = g.v[0] - dv / 2, v1 = g.v[g.v.length - 1] + dv / 2;
    return { nu: n, nv: g.v.length, X: (u) => (u - u0) / (u1 - u0) * px, Y: (v) => px - (v - v0) / (v1 - v0) * px };
  }
  function anchors(ctx, g, geo) {
    const marks = ["circle", "square", "triangle"];
    ctx.font = "11px system-ui, sans-serif";
    g.anchors.forEach((a, k) => {
      const x = geo.X(a.u), y = geo.Y(a.v);
      ctx.beginPath();
      if (marks[k % 3] === "circle") ctx.arc(x, y, 5, 0, 2 * Math.PI);
      else if (marks[k % 3] === "square") ctx.rect(x - 5, y - 5, 10, 10);
      else { ctx.moveTo(x, y - 6); ctx.lineTo(x + 6, y + 5); ctx.lineTo(x - 6, y + 5); ctx.closePath(); }
      ctx.fillStyle = "#fff"; ctx.fill(); ctx.lineWidth = 2; ctx.strokeStyle = a.color || "#000"; ctx.stroke();
      const tw = ctx.measureText(a.label).width;
      const tx = Math.min(x + 7, ctx.canvas.width - tw - 4), ty = y < 16 ? y + 16 : y - 7;
      ctx.fillStyle = "rgba(255,255,255,0.8)"; ctx.fillRect(tx - 2, ty - 10, tw + 4, 13);
      ctx.fillStyle = "#000"; ctx.fillText(a.label, tx, ty);
    });
  }
  function panel(host, cap, px) {
    const p = el("div", { class: "panel" }, host);
    const cv = el("canvas", { width: px, height: px }, p);
    const c = el("div", { class: "cap" }, p, cap);
    return { cv, cap: c };
  }

  // ------------------------------------------------------------------ basins
  function basins(b) {
    const px = 330, geo = planeGeom(b, px), nS = b.sigma_start.length, cells = geo.nu * geo.nv;
    const maps = decode(b.maps, Int8Array), rgb = b.colors.map(hex);
    const host = document.getElementById("basin-panel"), share = document.getElementById("shares-panel");
    const p = panel(host, "", px);
    p.cv.id = "basin-canvas";
    const legend = el("div", { class: "legend" }, share);
    el("div", {}, legend, "endpoint state (thresholded bits):").style.fontWeight = 600;
    b.states.forEach((s, k) => { const row = el("div", {}, legend); el("span", { class: "sw", style: `background:${b.colors[k]}` }, row); el("span", {}, row, SHORT[s] || s); });
    el("div", {}, legend, "anchors (a, b, c; marker edge):").style.fontWeight = 600;
    b.anchors.forEach((a) => { const row = el("div", { class: "anchor-key" }, legend); el("span", { class: "sw", style: `background:#fff;border:2px solid ${a.color}` }, row); el("span", {}, row, a.label); });
    if (b.anchors.length === 3)
      el("div", { class: "small", id: "uv-axes" }, legend, `u: along ${b.anchors[0].label} → ${b.anchors[1].label}; v: towards ${b.anchors[2].label}, at right angles (units of the ±1 images; origin: the anchors' centroid)`);
    const table = el("table", { class: "shares", id: "shares" }, share);
    const evo = el("div", { class: "small" }, share);
    const mini = evolution(evo, b);
    const ctx = p.cv.getContext("2d");
    function draw(i, s) {
      const img = ctx.createImageData(geo.nu, geo.nv), off = (i * nS + s) * cells;
      for (let r = 0; r < geo.nv; r++) for (let q = 0; q < geo.nu; q++) {
        const code = maps[off + r * geo.nu + q], dst = ((geo.nv - 1 - r) * geo.nu + q) * 4, c = rgb[code] || [0, 0, 0];
        img.data[dst] = c[0]; img.data[dst + 1] = c[1]; img.data[dst + 2] = c[2]; img.data[dst + 3] = 255;
      }
      const tmp = document.createElement("canvas"); tmp.width = geo.nu; tmp.height = geo.nv;
      tmp.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, 0, 0, px, px);
      anchors(ctx, b, geo);
      p.cv.dataset.frame = `step=${b.steps[i]} sigma_start=${b.sigma_start[s]}`;
      p.cap.textContent = `step ${b.steps[i]}, σ_start = ${b.sigma_start[s]} (${geo.nu}×${geo.nv} grid)`;
      table.textContent = "";
      el("b", {}, el("td", { colspan: 3 }, el("tr", {}, table)), `share of the plane at step ${b.steps[i]}`);
      b.states.slice().reverse().forEach((st) => {
        const k = b.states.indexOf(st), f = b.fraction[i][s][k], tr = el("tr", {}, table);
        el("td", {}, tr, SHORT[st] || st);
        el("div", { style: `width:${Math.round(120 * f)}px;background:${b.colors[k]}` }, el("td", { class: "bar" }, tr));
        el("td", { style: "text-align:right" }, tr, pct(f));
      });
      mini(i, s);
      const tr = el("tr", {}, table); el("td", {}, tr, "off-vertex (flag)"); el("td", {}, tr); el("td", { style: "text-align:right" }, tr, pct(b.off_vertex[i][s]));
    }
    redraw.push((step, i, s) => draw(i, s));
  }

  // One stacked column of the five shares per checkpoint (at the chosen σ_start), the slider's outlined.
  function evolution(host, b) {
    const n = b.steps.length, W = 300, H = 96, cw = (W - 10) / n;
    el("div", {}, host, "shares at every checkpoint (the slider's outlined):");
    const root = el("svg:svg", { width: W, height: H + 16 }, host);
    return (i, s) => {
      root.textContent = "";
      b.steps.forEach((step, k) => {
        let y = H;
        b.states.forEach((st, c) => {
          const h = b.fraction[k][s][c] * H;
          if (h > 0) el("svg:rect", { x: 5 + k * cw + 1, y: y - h, width: cw - 2, height: h, fill: b.colors[c] }, root);
          y -= h;
        });
        if (k === 0 || k === n - 1 || k === i)
          el("svg:text", { x: 5 + (k + 0.5) * cw, y: H + 12, "text-anchor": "middle", "font-size": 10, fill: "#5b6475" }, root, fmtStep(step));
      });
      el("svg:rect", { x: 5 + i * cw, y: 0, width: cw, height: H, fill: "none", stroke: "#1d2330", "stroke-width": 2 }, root);
    };
  }

  // ------------------------------------------------------------------ score field
  function field(f, sigmas) {
    const host = document.getElementById("field-panel"), px = 250, geo = planeGeom(f, px), cells = geo.nu * geo.nv;
    const who = Object.keys(f.fields), nSig = f.sigma.length;
    const arr = {};
    for (const w of who) arr[w] = { su: decode(f.fields[w].su, Float32Array), sv: decode(f.fields[w].sv, Float32Array), mag: decode(f.fields[w].mag, Float32Array), per: f.fields[w].per_step };
    const panels = who.map((w) => panel(host, w, px));
    const bar = el("div", { class: "panel small" }, host);
    function range(s) {   // one colour scale per σ: over every field and step shown
      let lo = Infinity, hi = -Infinity;
      for (const w of who) {
        const a = arr[w], nst = a.per ? f.steps.length : 1;
        for (let i = 0; i < nst; i++) { const o = (i * nSig + s) * cells; for (let k = 0; k < cells; k++) { const v = a.mag[o + k]; if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } } }
      }
      return [lo, hi];
    }
    function draw(step, sIdx) {
      const s = f.sigma.indexOf(sigmas[sIdx]), i = f.steps.indexOf(step);
      const [lo, hi] = s < 0 ? [0, 1] : range(s);
      who.forEach((w, k) => {
        const a = arr[w], cv = panels[k].cv, ctx = cv.getContext("2d");
        ctx.clearRect(0, 0, px, px);
        if (s < 0 || (a.per && i < 0)) {
          ctx.fillStyle = "#f1f3f7"; ctx.fillRect(0, 0, px, px); ctx.fillStyle = "#5b6475"; ctx.font = "12px system-ui, sans-serif";
          ctx.fillText(s < 0 ? `no field at σ = ${sigmas[sIdx]}` : `no field at step ${step}`, 12, px / 2);
          panels[k].cap.textContent = w; return;
        }
        const o = ((a.per ? i : 0) * nSig + s) * cells, img = ctx.createImageData(geo.nu, geo.nv);
        for (let r = 0; r < geo.nv; r++) for (let q = 0; q < geo.nu; q++) {
          const c = viridis((a.mag[o + r * geo.nu + q] - lo) / ((hi - lo) || 1)), dst = ((geo.nv - 1 - r) * geo.nu + q) * 4;
          img.data[dst] = c[0]; img.data[dst + 1] = c[1]; img.data[dst + 2] = c[2]; img.data[dst + 3] = 255;
        }
        const tmp = document.createElement("canvas"); tmp.width = geo.nu; tmp.height = geo.nv; tmp.getContext("2d").putImageData(img, 0, 0);
        ctx.imageSmoothingEnabled = true; ctx.drawImage(tmp, 0, 0, px, px);
        const every = Math.max(1, Math.round(geo.nu / 12)), len = px / geo.nu * every * 0.42;
        ctx.strokeStyle = "rgba(255,255,255,0.9)"; ctx.lineWidth = 1.2;
        for (let r = Math.floor(every / 2); r < geo.nv; r += every) for (let q = Math.floor(every / 2); q < geo.nu; q += every) {
          const u = a.su[o + r * geo.nu + q], v = a.sv[o + r * geo.nu + q], n = Math.hypot(u, v) || 1;
          const x = geo.X(f.u[q]), y = geo.Y(f.v[r]), dx = u / n * len, dy = -v / n * len;
          ctx.beginPath(); ctx.moveTo(x - dx, y - dy); ctx.lineTo(x + dx, y + dy);
          const ang = Math.atan2(dy, dx);
          ctx.lineTo(x + dx - 4 * Math.cos(ang - 0.5), y + dy - 4 * Math.sin(ang - 0.5)); ctx.moveTo(x + dx, y + dy);
          ctx.lineTo(x + dx - 4 * Math.cos(ang + 0.5), y + dy - 4 * Math.sin(ang + 0.5)); ctx.stroke();
        }
        anchors(ctx, f, geo);
        panels[k].cap.textContent = `${w}${a.per ? ", step " + step : ""}, σ = ${f.sigma[s]}`;
        cv.dataset.frame = `step=${a.per ? step : "none"} sigma=${f.sigma[s]}`;
      });
      bar.textContent = "";   // text and elements only: the page sets no innerHTML (Trusted Types refuse it)
      el("div", {}, bar, "colour: log10 |score|");
      const sw = el("div", {}, bar);
      for (const c of VIRIDIS) el("span", { class: "sw", style: `display:inline-block;width:14px;height:10px;background:${c}` }, sw);
      el("div", {}, bar, `${lo.toFixed(2)} … ${hi.toFixed(2)}`);
      el("div", {}, bar, "arrows: direction of the in-plane score");
    }
    redraw.push((step, i, s) => draw(step, s));
  }

  // ------------------------------------------------------------------ retention
  function retention(r) {
    const host = document.getElementById("retention-chart");
    const colors = { train: "#ff9f1c", heldout: "#1f77b4", other: "#7f7f7f" };
    function draw(step) {
      const i = r.steps.indexOf(step);
      if (i < 0) { host.textContent = `retention was not computed at step ${step} (it was at ${r.steps.join(", ")})`; return; }
      const series = [];
      for (const [name, d] of Object.entries(r.splits)) {
        series.push({ label: `${name}: returns (${d.n})`, color: colors[name] || "#333", y: d.retained[i] });
        series.push({ label: `${name}: captured`, color: colors[name] || "#333", dash: "6 3", y: d.captured[i] });
      }
      chart(host, { w: 640, h: 260, xs: r.sigma, xt: Math.log10, xticks: r.sigma.map((s) => [s, String(s)]),
                    xlabel: `noise level σ of the restart (step ${step})`, ylabel: "fraction of restarts", series });
    }
    redraw.push((step) => draw(step));
  }

  // ------------------------------------------------------------------ the slider
  function controls(b, c) {
    const host = document.getElementById("plane-controls"), n = b.steps.length;
    const play = el("button", { id: "play", type: "button" }, host, "▶ play");
    const box = el("div", { class: "slider-box" }, host);
    const slider = el("input", { id: "step-slider", type: "range", min: 0, max: n - 1, step: 1, value: 0, "aria-label": "training step" }, box);
    const label = el("span", { id: "step-label" }, host);
    const sig = el("span", {}, host, "σ_start: ");
    const buttons = b.sigma_start.map((s, k) => { const bt = el("button", { type: "button" }, sig, String(s)); bt.onclick = () => { S.sigma = k; update(); }; return bt; });
    S.sigma = Math.max(0, b.sigma_start.indexOf(1)); if (b.sigma_start.indexOf(1) < 0) S.sigma = Math.floor(b.sigma_start.length / 2);
    const pos = (t) => {   // slider fraction of a step between checkpoints (log(step + 1))
      const L = b.steps.map(logStep), v = logStep(t);
      if (v <= L[0]) return 0; if (v >= L[n - 1]) return 1;
      let k = 0; while (L[k + 1] < v) k++;
      return (k + (v - L[k]) / (L[k + 1] - L[k])) / (n - 1);
    };
    const tauColors = { tau_rule: "#2ca02c", tau_mem: "#d97706" }, tauNames = { tau_rule: "τ_rule", tau_mem: "τ_mem" };
    for (const k of ["tau_rule", "tau_mem"]) {
      const t = c && c.taus[k].value;
      if (t === null || t === undefined) continue;
      el("span", { class: "tick", style: `left:${(100 * pos(t)).toFixed(2)}%;color:${tauColors[k]}`, title: `${tauNames[k]} = ${Math.round(t)}` }, box, tauNames[k]);
    }
    slider.addEventListener("input", () => { S.step = +slider.value; update(); });
    play.onclick = () => {
      if (S.timer) { clearInterval(S.timer); S.timer = null; play.textContent = "▶ play"; return; }
      play.textContent = "❚❚ pause";
      S.timer = setInterval(() => { S.step = (S.step + 1) % n; slider.value = S.step; update(); }, 800);
    };
    function update() {
      const step = b.steps[S.step];
      const rel = c ? [["tau_rule", "τ_rule"], ["tau_mem", "τ_mem"]].map(([k, nm]) => { const t = c.taus[k].value; return t === null ? `${nm} not reached` : (step < t ? `before ${nm}` : `after ${nm}`); }).join(", ") : "";
      label.textContent = `step ${step} (${S.step + 1}/${n})` + (rel ? ` · ${rel}` : "");
      buttons.forEach((bt, k) => bt.classList.toggle("on", k === S.sigma));
      for (const f of redraw) f(step, S.step, S.sigma);
    }
    return update;
  }

  function start() {
    let update = () => {};
    if (DATA.compare) compareRuns(DATA.compare);
    if (DATA.clocks) clocks(DATA.clocks);
    if (DATA.gallery) gallery(DATA.gallery);
    if (DATA.basins) {
      basins(DATA.basins);
      if (DATA.gallery && DATA.gallery.endpoints) picker(DATA.gallery, DATA.basins);   // draws on the map: after it
      if (DATA.field) field(DATA.field, DATA.basins.sigma_start);
      if (DATA.retention) retention(DATA.retention);
      update = controls(DATA.basins, DATA.clocks);
    } else if (DATA.retention) {
      retention(DATA.retention);
      update = () => redraw.forEach((f) => f(DATA.retention.steps[DATA.retention.steps.length - 1], 0, 0));
    }
    update();
    window.__report = { ready: performance.now(), state: S, update: () => update() };
  }
