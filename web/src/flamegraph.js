// The flame graph of a stackTree() (flame.js), drawn by d3-flame-graph. A module of its own,
// loaded by the run page only when a rank has folded stacks: d3 is 70 KB of the script.
import flamegraph from 'd3-flame-graph';
import { select } from 'd3-selection';

import { fmtInt } from './util.js';

// Draws the tree in el, as wide as el; click a frame to zoom into it, the root to zoom out.
// el.dataset.frames: the frames drawn.
export function flameGraph(el, tree) {
	const total = tree.value || 1;
	const chart = flamegraph()
		.width(Math.max(el.clientWidth, 300))
		.cellHeight(18)
		.minFrameSize(1)
		.transitionDuration(250)
		.sort(true)
		.setLabelHandler((d) => `${d.data.name}: ${fmtInt(d.value)} (${(100 * d.value / total).toFixed(1)} %)`);
	select(el).datum(tree).call(chart);
	const count = () => { el.dataset.frames = el.querySelectorAll('g.frame').length; };
	count();
	new ResizeObserver(() => {
		const w = Math.max(el.clientWidth, 300);
		if (w !== chart.width()) {
			chart.width(w).update();
			count();
		}
	}).observe(el);
	return chart;
}
