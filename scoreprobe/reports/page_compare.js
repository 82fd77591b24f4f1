  // ------------------------------------------------------------------ runs compared (page_compare.js)
  // The curves of every run of DATA.compare (reports/compare_page.py) on one step axis, one colour
  // per run: rule accuracy solid, memorized dashed, dots at the run's own checkpoints; τ_rule and
  // τ_mem as dashed lines in the run's colour with their CIs shaded; the thresholds dotted.
  function compareRuns(c) {
    const host = document.getElementById("compare-chart"), axis = stepAxis(c.steps);
    const series = [], vlines = [];
    c.runs.forEach((name, k) => {
      const color = c.colors[k], marks = c.measured[k];
      if (c.curves.rule_acc) series.push({ label: `${name}: rule accuracy`, color, y: c.curves.rule_acc[k], marks });
      if (c.curves.mem_ratio) series.push({ label: `${name}: memorized`, color, dash: "6 3", y: c.curves.mem_ratio[k], marks });
      for (const [key, nm] of [["tau_rule", "τ_rule"], ["tau_mem", "τ_mem"]]) {
        const t = c.taus[key];
        if (!t || t.value[k] === null) continue;
        vlines.push({ x: t.value[k], lo: t.ci[k][0], hi: t.ci[k][1], color, label: nm });
      }
    });
    const longest = Math.max(0, ...series.map((s) => s.label.length));
    const ch = chart(host, {
      w: 1000, h: Math.max(320, 80 + 18 * series.length), legend: Math.min(360, 50 + 7 * longest), xs: c.steps, xt: axis.xt,
      xticks: axis.ticks, xlabel: "training step (log scale)", ylabel: "fraction of samples", series, vlines,
      hlines: [{ y: c.thresholds.rule, color: "#5b6475" }, { y: c.thresholds.mem, color: "#5b6475" }].filter((h) => h.y !== null) });
    ch.mark(null);
    el("p", { class: "small" }, host, "Solid: rule accuracy; dashed: memorized share; dots: each run's own checkpoints " +
      "(between them a run's curve is interpolated on the common step axis); vertical dashed lines: τ_rule and τ_mem of " +
      "each run in its colour, shaded: their CIs; dotted: the thresholds.");
  }
