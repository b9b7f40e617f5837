// Charts, drawn by uPlot on canvas. Stacks are drawn as cumulative series from
// the top down, each filled to zero, so every lower series paints over the one
// above it; the legend and the hover values show each part's own value.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import { CATEGORIES, CATEGORY_COLORS, COMPONENTS, COMPONENT_COLORS, fmtBytes, fmtNs, h, label } from './util.js';

const HEIGHT = 300;

// cols: {key: [values]} -> [{key, cum}] top first, cum = sum of key and those under it
function stack(keys, cols, n) {
	const out = [];
	let below = new Float64Array(n);
	for (const key of keys) {
		const cum = new Float64Array(n);
		const v = cols[key];
		for (let i = 0; i < n; i++)
			cum[i] = below[i] + (v[i] ?? 0);
		out.push({ key, cum });
		below = cum;
	}
	return out.reverse();
}

// uPlot in el, as wide as el, following its width.
function mount(el, opts, data) {
	const u = new uPlot({ ...opts, width: Math.max(el.clientWidth, 300), height: opts.height || HEIGHT }, data, el);
	new ResizeObserver(() => {
		const w = Math.max(el.clientWidth, 300);
		if (w !== u.width)
			u.setSize({ width: w, height: u.height });
	}).observe(el);
	return u;
}

const axisStyle = { stroke: '#52525b', grid: { stroke: '#ececf0', width: 1 }, ticks: { stroke: '#d4d4d8', width: 1 } };

// Step time per step, stacked by component. steps: the /steps answer's array.
export function stepChart(el, steps, { yMax } = {}) {
	const n = steps.length;
	const cols = Object.fromEntries(COMPONENTS.map((c) => [c, steps.map((s) => s.breakdown_ns[c])]));
	const layers = stack(COMPONENTS, cols, n);
	const bars = uPlot.paths.bars({ size: [0.7, 48], gap: 1 });
	return mount(el, {
		class: 'chart',
		cursor: { drag: { x: false, y: false }, points: { show: false } },
		scales: { x: { time: false, distr: 2, range: (u, min, max) => [min - 0.5, max + 0.5] }, y: { range: (u, min, max) => [0, yMax || max * 1.05 || 1] } },
		axes: [
			{ ...axisStyle, label: 'step', values: (u, splits) => splits.map((i) => (steps[i] ? '#' + steps[i].step : '')),
				// every k-th step, k such that labels are 60 px apart at least
				splits: (u) => {
					const k = Math.max(1, Math.ceil(n / (u.bbox.width / devicePixelRatio / 60)));
					return steps.map((s, i) => i).filter((i) => i % k === 0);
				} },
			{ ...axisStyle, size: 70, values: (u, splits) => splits.map(fmtNs) },
		],
		series: [
			{ label: 'step', value: (u, i) => (i == null || !steps[i] ? '' : `#${steps[i].step}: ${fmtNs(steps[i].dur_ns)}`) },
			...layers.map(({ key }) => ({
				label: key, fill: COMPONENT_COLORS[key], stroke: COMPONENT_COLORS[key], width: 0, paths: bars,
				points: { show: false },
				value: (u, v, si, i) => (i == null ? '' : fmtNs(cols[key][i])),
			})),
		],
	}, [steps.map((s, i) => i), ...layers.map((l) => l.cum)]);
}

// The memory timeline: stacked area by category, allocated and reserved lines,
// the peak marked (click it: onPeak()). Drag to zoom, double-click to reset.
// x is seconds since t0 (ns); xMax and yMax fix the axes (for side by side).
// fetchWindow(startNs, endNs, points): the timeline of a window, so that a
// zoomed chart shows that window's own detail rather than magnified points.
export function memoryChart(el, mem, { t0 = mem.t_ns[0], xMax, yMax, onPeak, fetchWindow } = {}) {
	const hasReserved = mem.reserved.some((v) => v != null);
	const columns = (m) => {
		const layers = stack(CATEGORIES, m.categories, m.t_ns.length);
		const d = [m.t_ns.map((t) => (t - t0) / 1e9), ...layers.map((l) => l.cum), m.allocated];
		return hasReserved ? [...d, m.reserved] : d;
	};
	const data = columns(mem);
	const x = data[0];
	const keys = [...CATEGORIES].reverse();	// stack()'s order: top first
	let shown = mem;	// the timeline drawn now: the whole one, or a window's
	let seq = 0, timer = null, win = null;
	const peakX = mem.peak ? (mem.peak.t_ns - t0) / 1e9 : null;
	const marker = h('button', { class: 'peak-marker', type: 'button', title: 'What was alive at the peak',
		onmousedown: (e) => e.stopPropagation(), onclick: () => onPeak && onPeak() }, 'peak ' + fmtBytes(mem.peak?.bytes));

	const series = [
		{ label: 'time', value: (u, v) => (v == null ? '' : v.toFixed(4) + ' s') },
		...keys.map((key) => ({
			label: label(key), stroke: CATEGORY_COLORS[key], fill: CATEGORY_COLORS[key] + 'dd', width: 0,
			points: { show: false }, value: (u, v, si, i) => (i == null ? '' : fmtBytes(shown.categories[key][i])),
		})),
		{ label: 'allocated', stroke: '#18181b', width: 1.5, points: { show: false }, value: (u, v) => fmtBytes(v) },
	];
	if (hasReserved)
		series.push({ label: 'reserved', stroke: '#71717a', width: 1.5, dash: [6, 4], points: { show: false },
			value: (u, v) => fmtBytes(v) });
	const u = mount(el, {
		class: 'chart',
		cursor: { drag: { x: true, y: false }, points: { show: false } },
		scales: { x: { time: false }, y: { range: (u, min, max) => [0, yMax || max * 1.08 || 1] } },
		axes: [
			{ ...axisStyle, label: 'seconds', values: (u, splits) => splits.map((s) => +s.toFixed(3)) },
			{ ...axisStyle, size: 80, values: (u, splits) => splits.map(fmtBytes) },
		],
		series,
		hooks: {
			ready: [(u) => {
				u.over.append(marker);
				if (xMax != null)
					u.setScale('x', { min: 0, max: xMax });
				u.over.addEventListener('click', () => {
					if (peakX != null && onPeak && Math.abs(u.cursor.left - u.valToPos(peakX, 'x')) < 8)
						onPeak();
				});
				// double-click: back to the whole timeline
				u.over.addEventListener('dblclick', () => {
					seq++;
					if (win) {
						win = null;
						shown = mem;
						u.setData(data);
					}
				});
			}],
			setScale: [(u, key) => {
				if (key !== 'x' || !fetchWindow)
					return;
				const { min, max } = u.scales.x;
				const whole = min <= x[0] && max >= x[x.length - 1];
				if (whole || (win && win[0] === min && win[1] === max))
					return;
				const my = ++seq;
				clearTimeout(timer);
				timer = setTimeout(async () => {
					const m = await fetchWindow(Math.max(0, Math.floor(t0 + min * 1e9)), Math.ceil(t0 + max * 1e9),
						Math.round(u.bbox.width / devicePixelRatio));
					if (my !== seq || !m)
						return;
					win = [min, max];
					shown = m;
					u.setData(columns(m), false);
					el.dataset.windowPoints = m.t_ns.length;
				}, 150);
			}],
			draw: [(u) => {
				// the axes' extent, for tests that check two charts share them
				el.dataset.xMax = u.scales.x.max;
				el.dataset.yMax = u.scales.y.max;
				if (peakX == null)
					return;
				const px = u.valToPos(peakX, 'x'), py = u.valToPos(mem.peak.bytes, 'y');
				const inside = px >= 0 && px <= u.over.clientWidth;
				marker.hidden = !inside;
				if (!inside)
					return;
				marker.style.left = px + 'px';
				marker.style.top = py + 'px';
				const ctx = u.ctx, cx = u.valToPos(peakX, 'x', true);
				ctx.save();
				ctx.strokeStyle = '#b91c1c';
				ctx.setLineDash([4, 4]);
				ctx.lineWidth = devicePixelRatio;
				ctx.beginPath();
				ctx.moveTo(cx, u.bbox.top);
				ctx.lineTo(cx, u.bbox.top + u.bbox.height);
				ctx.stroke();
				ctx.restore();
			}],
		},
	}, data);
	return u;
}
