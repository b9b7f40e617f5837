// Charts, drawn by uPlot on canvas. Stacks are drawn as cumulative series from
// the top down, each filled to zero, so every lower series paints over the one
// above it; the legend and the hover values show each part's own value.
import uPlot from 'uplot';

import { CATEGORIES, CATEGORY_COLORS, COMPONENTS, COMPONENT_COLORS, fmtBytes, fmtInt, fmtNs, h, label } from './util.js';

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

// Axis ticks in one unit per axis, at round steps: "0", "50 ms", "100 ms" rather than
// "0 ns" beside ms; bytes at round binary steps (1, 2, 2.5, 5 × 10^k of a unit: 2 GiB,
// 4 GiB, not 2.33 GiB).
const NS_UNITS = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs'], [1, 'ns']];
const BYTE_UNITS = [[1024 ** 4, 'TiB'], [1024 ** 3, 'GiB'], [1024 ** 2, 'MiB'], [1024, 'KiB'], [1, 'B']];

function ticks(units) {
	return (u, splits) => {
		const top = Math.max(...splits.map(Math.abs));
		const [div, unit] = units.find(([d]) => top >= d) || units[units.length - 1];
		const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) / div : 1;
		const digits = step >= 1 || !step ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
		return splits.map((v) => (v === 0 ? '0' : (v / div).toFixed(digits) + ' ' + unit));
	};
}
export const nsTicks = ticks(NS_UNITS);
export const byteTicks = ticks(BYTE_UNITS);
const BYTE_INCRS = [];
for (const [div] of [...BYTE_UNITS].reverse())
	for (const k of [1, 10, 100])
		for (const m of [1, 2, 2.5, 5])
			BYTE_INCRS.push(div * k * m);

// The legend shows the values at the cursor; away from the chart, those at idx
// (the peak, the slowest step) rather than dashes.
function restingLegend(u, idx) {
	if (idx == null)
		return;
	u.setLegend({ idx });
	u.over.addEventListener('mouseleave', () => setTimeout(() => u.setLegend({ idx }), 0));
}

const axisStyle = { stroke: '#52525b', grid: { stroke: '#ececf0', width: 1 }, ticks: { stroke: '#d4d4d8', width: 1 } };

// Step time per step, stacked by component. steps: the /steps answer's array.
export function stepChart(el, steps, { yMax } = {}) {
	const n = steps.length;
	const cols = Object.fromEntries(COMPONENTS.map((c) => [c, steps.map((s) => s.breakdown_ns[c])]));
	const layers = stack(COMPONENTS, cols, n);
	const bars = uPlot.paths.bars({ size: [0.7, 48], gap: 1 });
	let slowest = null;
	steps.forEach((s, i) => { if (slowest == null || s.dur_ns > steps[slowest].dur_ns) slowest = i; });
	const u = mount(el, {
		class: 'chart',
		hooks: { ready: [(u) => restingLegend(u, slowest)] },
		cursor: { drag: { x: false, y: false }, points: { show: false } },
		scales: { x: { time: false, distr: 2, range: (u, min, max) => [min - 0.5, max + 0.5] }, y: { range: (u, min, max) => [0, yMax || max * 1.05 || 1] } },
		axes: [
			{ ...axisStyle, label: 'step', values: (u, splits) => splits.map((i) => (steps[i] ? (steps[i].whole_trace ? 'whole trace' : '#' + steps[i].step + (steps[i].incomplete ? '*' : '')) : '')),
				// every k-th step, k such that labels are 60 px apart at least
				splits: (u) => {
					const k = Math.max(1, Math.ceil(n / (u.bbox.width / devicePixelRatio / 60)));
					return steps.map((s, i) => i).filter((i) => i % k === 0);
				} },
			{ ...axisStyle, size: 70, values: nsTicks },
		],
		series: [
			{ label: 'step', value: (u, i) => (i == null || !steps[i] ? '' : `#${steps[i].step}: ${fmtNs(steps[i].dur_ns)}${steps[i].incomplete ? ' (incomplete)' : ''}`) },
			...layers.map(({ key }) => ({
				label: key, fill: COMPONENT_COLORS[key], stroke: COMPONENT_COLORS[key], width: 0, paths: bars,
				points: { show: false },
				value: (u, v, si, i) => (i == null ? '' : fmtNs(cols[key][i])),
			})),
		],
	}, [steps.map((s, i) => i), ...layers.map((l) => l.cum)]);
	const note = incompleteNote(steps);
	if (note)
		el.append(note);
	return u;
}

// Below a step chart: which steps are incomplete (starred on the axis) and why, or nothing.
function incompleteNote(steps) {
	const bad = steps.filter((s) => s.incomplete);
	if (!bad.length)
		return null;
	const list = bad.length <= 5 ? bad.map((s) => '#' + s.step).join(', ') : `${bad.length} steps`;
	return h('p', { class: 'small muted incomplete-note' }, `* incomplete: ${list}`,
		bad[0].note ? ` (${bad[0].note})` : '', '; left out of the means, medians, utilization and compare.');
}

// The memory timeline: stacked area by category, allocated and reserved lines,
// the peak marked (click it: onPeak()). Drag to zoom, double-click to reset.
// x is seconds since t0 (ns); xMax and yMax fix the axes (for side by side).
// fetchWindow(startNs, endNs, points): the timeline of a window, so that a
// zoomed chart shows that window's own detail rather than magnified points.
// Rows of the columns d (d[0]: x in seconds) with a row of nulls inside each gap (where
// nothing was recorded: between profiling cycles or recordings), so that lines and areas
// break there; idx maps each row to its point (-1: a gap's row).
function breakAtGaps(d, gaps, t0) {
	const mids = (gaps || []).map((g) => ((g.start_ns + g.end_ns) / 2 - t0) / 1e9).sort((a, b) => a - b);
	const out = d.map(() => []), idx = [];
	let k = 0;
	for (let i = 0; i < d[0].length; i++) {
		for (; k < mids.length && mids[k] < d[0][i]; k++) {
			if (i === 0)
				continue;
			out[0].push(mids[k]);
			for (let c = 1; c < d.length; c++)
				out[c].push(null);
			idx.push(-1);
		}
		for (let c = 0; c < d.length; c++)
			out[c].push(d[c][i]);
		idx.push(i);
	}
	return { data: out, idx };
}

export function memoryChart(el, mem, { t0 = mem.t_ns[0], xMax, yMax, onPeak, fetchWindow } = {}) {
	const hasReserved = mem.reserved.some((v) => v != null);
	const columns = (m) => {
		const layers = stack(CATEGORIES, m.categories, m.t_ns.length);
		const d = [m.t_ns.map((t) => (t - t0) / 1e9), ...layers.map((l) => l.cum), m.allocated];
		return breakAtGaps(hasReserved ? [...d, m.reserved] : d, m.gaps, t0);
	};
	const whole = columns(mem), data = whole.data;
	const x = data[0];
	const gapX = (mem.gaps || []).map((g) => [(g.start_ns - t0) / 1e9, (g.end_ns - t0) / 1e9]);
	el.dataset.gaps = gapX.length;
	el.dataset.gapRows = whole.idx.filter((i) => i < 0).length;
	const keys = [...CATEGORIES].reverse();	// stack()'s order: top first
	let shown = mem, shownIdx = whole.idx;	// the timeline drawn now: the whole one, or a window's
	let seq = 0, timer = null, win = null;
	const peakX = mem.peak ? (mem.peak.t_ns - t0) / 1e9 : null;
	let peakPoint = null;	// the point nearest the peak: the legend's resting values
	mem.allocated.forEach((v, i) => { if (peakPoint == null || v > mem.allocated[peakPoint]) peakPoint = i; });
	const peakIdx = peakPoint == null ? null : whole.idx.indexOf(peakPoint);
	const marker = h('button', { class: 'peak-marker', type: 'button', title: 'What was alive at the peak',
		onmousedown: (e) => e.stopPropagation(), onclick: () => onPeak && onPeak() }, 'peak ' + fmtBytes(mem.peak?.bytes));

	const series = [
		{ label: 'time', value: (u, v) => (v == null ? '' : v.toFixed(4) + ' s') },
		...keys.map((key) => ({
			label: label(key), stroke: CATEGORY_COLORS[key], fill: CATEGORY_COLORS[key] + 'dd', width: 0,
			points: { show: false },
			value: (u, v, si, i) => (i == null || shownIdx[i] < 0 ? '' : fmtBytes(shown.categories[key][shownIdx[i]])),
		})),
		{ label: 'allocated', stroke: '#18181b', width: 1.5, points: { show: false },
			value: (u, v) => (v == null ? 'not recorded' : fmtBytes(v)) },
	];
	if (hasReserved)
		series.push({ label: 'reserved', stroke: '#71717a', width: 1.5, dash: [6, 4], points: { show: false },
			value: (u, v) => (v == null ? '' : fmtBytes(v)) });
	const u = mount(el, {
		class: 'chart',
		cursor: { drag: { x: true, y: false }, points: { show: false } },
		scales: { x: { time: false }, y: { range: (u, min, max) => [0, yMax || max * 1.08 || 1] } },
		axes: [
			{ ...axisStyle, label: 'seconds', values: (u, splits) => splits.map((s) => +s.toFixed(3)) },
			{ ...axisStyle, size: 80, values: byteTicks, incrs: BYTE_INCRS },
		],
		series,
		hooks: {
			ready: [(u) => {
				u.over.append(marker);
				restingLegend(u, peakIdx);
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
						shownIdx = whole.idx;
						u.setData(data);
					}
				});
			}],
			setScale: [(u, key) => {
				if (key !== 'x' || !fetchWindow)
					return;
				const { min, max } = u.scales.x;
				const all = min <= x[0] && max >= x[x.length - 1];
				if (all || (win && win[0] === min && win[1] === max))
					return;
				const my = ++seq;
				clearTimeout(timer);
				timer = setTimeout(async () => {
					const m = await fetchWindow(Math.max(0, Math.floor(t0 + min * 1e9)), Math.ceil(t0 + max * 1e9),
						Math.round(u.bbox.width / devicePixelRatio));
					if (my !== seq || !m)
						return;
					win = [min, max];
					const c = columns(m);
					shown = m;
					shownIdx = c.idx;
					u.setData(c.data, false);
					el.dataset.windowPoints = m.t_ns.length;
				}, 150);
			}],
			draw: [(u) => {
				// the axes' extent, for tests that check two charts share them
				el.dataset.xMax = u.scales.x.max;
				el.dataset.yMax = u.scales.y.max;
				// where nothing was recorded: shaded, lines broken (breakAtGaps)
				const ctx0 = u.ctx;
				ctx0.save();
				ctx0.fillStyle = 'rgba(113, 113, 122, 0.12)';
				for (const [a, b] of gapX) {
					const l = Math.max(u.bbox.left, u.valToPos(a, 'x', true));
					const r = Math.min(u.bbox.left + u.bbox.width, u.valToPos(b, 'x', true));
					if (r > l)
						ctx0.fillRect(l, u.bbox.top, r - l, u.bbox.height);
				}
				ctx0.restore();
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

// A memory "timeline" of one instant (a snapshot with segments but no trace
// entries: the state at dump time): no time axis to make up, one bar of what
// was allocated, by category, inside what was reserved.
export function memoryState(el, mem) {
	const reserved = mem.reserved[0], allocated = mem.allocated[0];
	const whole = Math.max(reserved ?? 0, allocated) || 1;
	const bar = h('div', { class: 'state-bar', title: `allocated ${fmtBytes(allocated)} of ${fmtBytes(reserved)} reserved` });
	const parts = CATEGORIES.filter((c) => mem.categories[c][0] > 0);
	for (const c of parts) {
		const seg = h('div', { class: 'state-part', 'data-cat': c, title: `${label(c)}: ${fmtBytes(mem.categories[c][0])}` });
		seg.style.width = (100 * mem.categories[c][0] / whole) + '%';
		seg.style.background = CATEGORY_COLORS[c];
		bar.append(seg);
	}
	el.dataset.state = '1';
	el.classList.add('state');
	el.replaceChildren(
		h('p', { class: 'small' }, 'A snapshot without trace entries: the state at dump time, ',
			h('b', { text: fmtBytes(allocated) }), ' allocated', reserved != null ? [' of ', h('b', { text: fmtBytes(reserved) }), ' reserved'] : '', '.'),
		bar,
		h('div', { class: 'state-legend small' }, parts.map((c) => h('span', { class: 'cat' },
			h('i', { class: 'swatch', 'data-cat': c }), `${label(c)} ${fmtBytes(mem.categories[c][0])}`)),
		reserved != null && reserved > allocated && h('span', { class: 'cat' }, h('i', { class: 'swatch reserved-free' }),
			`reserved, free ${fmtBytes(reserved - allocated)}`)));
}

const SEGMENTS_SHOWN = 32;

// A snapshot's allocator segments at dump time (GET /memory/segments): one row
// per segment, largest first, as wide as its share of the largest; inside it
// each block where it lies, alive ones in their category's colour (pending
// free paler), free ones as the reserved-but-free hatching. Above, what the
// fragmentation is: the free bytes and the largest free block.
export function memorySegments(el, seg, { names = {}, onPick } = {}) {
	const segs = [...seg.segments].sort((a, b) => b.total_size - a.total_size || a.address - b.address);
	const widest = segs[0]?.total_size || 1;
	let free = 0, largestFree = 0, alive = 0, nfree = 0;
	for (const s of segs)
		for (const b of s.blocks)
			if (b.category) {
				alive++;
			} else if (b.state === 'inactive') {
				free += b.size;
				nfree++;
				largestFree = Math.max(largestFree, b.size);
			}
	const row = (s) => {
		const bar = h('div', { class: 'seg-bar', title: `${fmtBytes(s.total_size)} segment at 0x${s.address.toString(16)}` +
			`, stream ${s.stream}${s.segment_type ? ', ' + s.segment_type + ' pool' : ''}: ${fmtBytes(s.allocated_bytes)} alive` });
		bar.style.width = Math.max(0.5, 100 * s.total_size / widest) + '%';
		for (const b of s.blocks) {
			if (!b.category)
				continue;	/* free space is the bar's own background */
			const blk = h('div', { class: 'seg-block' + (b.state === 'active_pending_free' ? ' pending' : ''), 'data-cat': b.category,
				title: `${label(b.category)} ${fmtBytes(b.size)}` + (b.requested_size !== b.size ? ` (${fmtBytes(b.requested_size)} requested)` : '') +
					(b.state === 'active_pending_free' ? ', freed, waiting on its stream' : '') + (b.op ? `\nallocated by ${b.op}` : '') });
			blk.style.left = (100 * b.offset / s.total_size) + '%';
			blk.style.width = (100 * b.size / s.total_size) + '%';
			blk.style.background = CATEGORY_COLORS[b.category];
			bar.append(blk);
		}
		return h('div', { class: 'seg-row' }, h('span', { class: 'seg-label small', text: fmtBytes(s.total_size) }), h('div', { class: 'seg-track' }, bar));
	};
	const rows = h('div', { class: 'seg-rows' }, segs.slice(0, SEGMENTS_SHOWN).map(row));
	const more = segs.length > SEGMENTS_SHOWN && h('button', { type: 'button', class: 'button small', text: `Show all ${fmtInt(segs.length)} segments`,
		onclick: () => { rows.replaceChildren(...segs.map(row)); more.remove(); } });
	const cats = CATEGORIES.filter((c) => segs.some((s) => s.blocks.some((b) => b.category === c)));
	const pick = seg.snapshots.length > 1 && h('label', { class: 'snapshot-pick small' }, 'snapshot ',
		h('select', { onchange: (e) => onPick?.(+e.target.value) },
			seg.snapshots.map((id) => h('option', { value: id, selected: id === seg.artifact, text: names[id] ?? `#${id}` }))));
	el.dataset.segments = segs.length;
	el.dataset.blocks = alive;
	el.replaceChildren(
		h('div', { class: 'toolbar' }, h('p', { class: 'small' },
			`${fmtInt(segs.length)} segment${segs.length === 1 ? '' : 's'} on ${seg.device}, `, h('b', { text: fmtBytes(seg.reserved_bytes) }),
			' reserved; ', h('b', { text: fmtBytes(seg.allocated_bytes) }), ` alive in ${fmtInt(alive)} block${alive === 1 ? '' : 's'}; `,
			h('b', { text: fmtBytes(free) }), ` free in ${fmtInt(nfree)} block${nfree === 1 ? '' : 's'}`,
			nfree ? [', the largest ', h('b', { text: fmtBytes(largestFree) }), ': a larger allocation needs a new segment'] : '', '.'),
		h('span', { class: 'spacer' }), pick),
		rows, ...(more ? [more] : []),
		h('div', { class: 'state-legend small' }, cats.map((c) => h('span', { class: 'cat' }, h('i', { class: 'swatch', 'data-cat': c }), label(c))),
			h('span', { class: 'cat' }, h('i', { class: 'swatch reserved-free' }), 'reserved, free')));
}

// The ranks side by side (GET /distributed): one bar per rank and step, stacked as
// computation alone, computation with communication under it (overlap), communication
// no computation hides, idle, and the rest of the step (copies, host work).
export const DIST_PARTS = ['compute', 'overlap', 'communication', 'idle', 'other'];
export const DIST_COLORS = { compute: '#2563eb', overlap: '#7c3aed', communication: '#dc2626', idle: '#d4d4d8', other: '#a3a3a3' };

export function distChart(el, dist) {
	const bars = [];
	for (const r of dist.ranks)
		for (const s of r.steps)
			bars.push({ rank: r.rank, s });
	const n = bars.length;
	const cols = {
		compute: bars.map(({ s }) => s.compute_ns - s.overlap_ns),
		overlap: bars.map(({ s }) => s.overlap_ns),
		communication: bars.map(({ s }) => s.communication_ns),
		idle: bars.map(({ s }) => s.idle_ns),
		other: bars.map(({ s }) => Math.max(0, s.dur_ns - s.compute_ns - s.communication_ns - s.idle_ns)),
	};
	const layers = stack(DIST_PARTS, cols, n);
	const name = (i) => (bars[i] ? `r${bars[i].rank} ${bars[i].s.step == null ? 'trace' : '#' + bars[i].s.step}` : '');
	el.dataset.bars = n;
	return mount(el, {
		class: 'chart',
		cursor: { drag: { x: false, y: false }, points: { show: false } },
		scales: { x: { time: false, distr: 2, range: (u, min, max) => [min - 0.5, max + 0.5] }, y: { range: (u, min, max) => [0, max * 1.05 || 1] } },
		axes: [
			{ ...axisStyle, label: 'rank, step', values: (u, splits) => splits.map(name),
				splits: (u) => {
					const k = Math.max(1, Math.ceil(n / (u.bbox.width / devicePixelRatio / 60)));
					return bars.map((b, i) => i).filter((i) => i % k === 0);
				} },
			{ ...axisStyle, size: 70, values: nsTicks },
		],
		series: [
			{ label: 'rank, step', value: (u, i) => (i == null || !bars[i] ? '' : `${name(i)}: ${fmtNs(bars[i].s.dur_ns)}`) },
			...layers.map(({ key }) => ({
				label: key, fill: DIST_COLORS[key], stroke: DIST_COLORS[key], width: 0,
				paths: uPlot.paths.bars({ size: [0.7, 48], gap: 1 }), points: { show: false },
				value: (u, v, si, i) => (i == null ? '' : fmtNs(cols[key][i])),
			})),
		],
	}, [bars.map((b, i) => i), ...layers.map((l) => l.cum)]);
}

// The critical path of a step (GET /critical_path) over the ranks' timelines: one lane per
// rank (its step window in grey), the path's segments in their kind's colour, and where the
// path moves between ranks (a collective waiting for its last rank), a line between lanes.
export const PATH_COLORS = { cpu_op: '#2563eb', runtime: '#0891b2', sync: '#ea580c', kernel: '#16a34a', memcpy: '#ca8a04',
	memset: '#a16207', collective: '#dc2626', idle: '#d4d4d8', host_gap: '#7c3aed' };
const LANE = 28;

export function pathChart(el, cp) {
	const ranks = cp.ranks.map((r) => r.rank);
	const t0 = Math.min(Number(cp.start_ns), ...cp.ranks.map((r) => Number(r.start_ns)));
	const t1 = Math.max(Number(cp.end_ns), ...cp.ranks.map((r) => Number(r.end_ns)));
	const canvas = h('canvas', { class: 'path-canvas' });
	const legend = h('div', { class: 'path-legend small' }, Object.entries(PATH_COLORS)
		.filter(([k]) => cp.by_kind.some((x) => x.kind === k))
		.map(([k, c]) => {
			const sw = h('span', { class: 'swatch' });
			sw.style.background = c;	/* through the CSSOM: the page's CSP refuses style attributes */
			return h('span', { class: 'path-key' }, sw, ` ${k} `);
		}));
	el.replaceChildren(canvas, legend);
	el.dataset.segments = cp.segments.length;
	el.dataset.ranks = ranks.length;
	el.dataset.pathRanks = [...new Set(cp.segments.map((s) => s.rank))].sort((a, b) => a - b).join(',');
	const draw = () => {
		const dpr = window.devicePixelRatio || 1, left = 56, w = Math.max(el.clientWidth, 300), hgt = ranks.length * LANE + 24;
		canvas.width = w * dpr;
		canvas.height = hgt * dpr;
		canvas.style.width = w + 'px';
		canvas.style.height = hgt + 'px';
		const g = canvas.getContext('2d');
		g.scale(dpr, dpr);
		const x = (t) => left + (w - left - 8) * (t - t0) / Math.max(1, t1 - t0);
		const y = (rank) => ranks.indexOf(rank) * LANE + 4;
		g.font = '12px system-ui, sans-serif';
		g.fillStyle = '#52525b';
		for (const r of cp.ranks) {
			g.fillText('rank ' + r.rank, 4, y(r.rank) + 15);
			g.fillStyle = '#f4f4f5';
			g.fillRect(x(Number(r.start_ns)), y(r.rank), x(Number(r.end_ns)) - x(Number(r.start_ns)), LANE - 8);
			g.fillStyle = '#52525b';
		}
		let prev = null;
		for (const s of cp.segments) {
			const a = x(Number(s.start_ns)), b = x(Number(s.start_ns) + s.dur_ns);
			g.fillStyle = PATH_COLORS[s.kind] || '#a3a3a3';
			g.fillRect(a, y(s.rank) + 3, Math.max(1, b - a), LANE - 14);
			if (prev && prev.rank !== s.rank) {
				g.strokeStyle = '#18181b';
				g.beginPath();
				g.moveTo(a, y(prev.rank) + LANE / 2);
				g.lineTo(a, y(s.rank) + LANE / 2);
				g.stroke();
			}
			prev = s;
		}
		g.fillStyle = '#52525b';
		g.fillText('0', left, hgt - 6);
		const total = fmtNs(t1 - t0);
		g.fillText(total, w - 8 - g.measureText(total).width, hgt - 6);
	};
	draw();
	new ResizeObserver(() => {
		if (Math.max(el.clientWidth, 300) !== canvas.width / (window.devicePixelRatio || 1))
			draw();
	}).observe(el);
}

// nvidia-smi columns of one unit (GET /gpu) on one chart: a line per GPU and column, the
// GPUs told apart by colour, a unit's columns (utilization.gpu, utilization.memory) by dash.
// x: the log's timestamps, wall-clock time as nvidia-smi wrote it (the server reads it as UTC,
// so it is shown in UTC: the clock of the file), or the row number where the log has none.
// lines: [{gpu, name, t_ns, values}]. el.dataset.points: the points drawn per line.
const GPU_COLORS = ['#4477aa', '#ee6677', '#228833', '#ccbb44', '#66ccee', '#aa3377', '#bbbbbb', '#000000'];
const GPU_DASHES = [null, [6, 4], [2, 3], [10, 3, 2, 3]];
const HZ_UNITS = [[1e9, 'GHz'], [1e6, 'MHz'], [1e3, 'kHz'], [1, 'Hz']];
const GPU_UNITS = {
	'%': { fmt: (v) => v.toFixed(v % 1 ? 1 : 0) + ' %', ticks: (u, s) => s.map((v) => v + ' %'), floor: 100 },
	B: { fmt: fmtBytes, ticks: byteTicks, incrs: BYTE_INCRS },
	W: { fmt: (v) => v.toFixed(2) + ' W', ticks: (u, s) => s.map((v) => v + ' W') },
	C: { fmt: (v) => v + ' °C', ticks: (u, s) => s.map((v) => v + ' °C') },
	Hz: { fmt: (v) => ticks(HZ_UNITS)(null, [v])[0], ticks: ticks(HZ_UNITS) },
};

// steps: the rank's trace steps on the log's clock (GET /gpu's steps), drawn as alternate bands
// under the lines, each labelled with its number when there is room.
export function gpuChart(el, unit, lines, steps = null) {
	const timed = lines.every((l) => l.t_ns.every((t) => t != null));
	const bands = timed && steps ? steps.map((s) => [s.start_ns / 1e9, s.end_ns / 1e9, s.step]) : [];
	el.dataset.steps = bands.length;
	const xs = (l) => (timed ? l.t_ns.map((t) => t / 1e9) : l.values.map((v, i) => i));
	const data = uPlot.join(lines.map((l) => [xs(l), l.values]));
	const gpus = [...new Set(lines.map((l) => l.gpu))];
	const u = GPU_UNITS[unit] || { fmt: String, ticks: (u, s) => s };
	const nth = {};	/* a line's rank among its GPU's columns on this chart: its dash */
	const series = lines.map((l) => {
		nth[l.gpu] = (nth[l.gpu] ?? -1) + 1;
		const color = GPU_COLORS[gpus.indexOf(l.gpu) % GPU_COLORS.length];
		return { label: `GPU ${l.gpu} ${l.name}`, stroke: color, width: 1.5, dash: GPU_DASHES[nth[l.gpu] % GPU_DASHES.length] ?? undefined,
			spanGaps: true, points: { show: false }, value: (self, v) => (v == null ? '' : u.fmt(v)) };
	});
	el.dataset.points = JSON.stringify(Object.fromEntries(series.map((s, i) =>
		[s.label, data[i + 1].filter((v) => v != null).length])));
	return mount(el, {
		class: 'chart', height: 220,
		tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
		cursor: { drag: { x: true, y: false }, points: { show: false } },
		scales: { x: { time: timed }, y: { range: (self, min, max) => [0, Math.max(u.floor || 0, max * 1.08) || 1] } },
		axes: [
			{ ...axisStyle, label: timed ? null : 'row' },
			{ ...axisStyle, size: 80, values: u.ticks, incrs: u.incrs },
		],
		series: [{ label: timed ? 'time (as logged)' : 'row', value: timed ? '{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}' : (self, v) => v ?? '' }, ...series],
		hooks: { drawClear: [(u) => {
			const ctx = u.ctx;
			ctx.save();
			ctx.font = `${Math.round(10 * devicePixelRatio)}px system-ui, sans-serif`;
			bands.forEach(([a, b, n], i) => {
				const l = Math.max(u.bbox.left, u.valToPos(a, 'x', true));
				const r = Math.min(u.bbox.left + u.bbox.width, u.valToPos(b, 'x', true));
				if (r <= l)
					return;
				ctx.fillStyle = i % 2 ? 'rgba(37, 99, 235, 0.07)' : 'rgba(37, 99, 235, 0.14)';
				ctx.fillRect(l, u.bbox.top, r - l, u.bbox.height);
				if (r - l > 40 * devicePixelRatio) {
					ctx.fillStyle = 'rgba(30, 64, 175, 0.8)';
					ctx.fillText(`step ${n}`, l + 4 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
				}
			});
			ctx.restore();
		}] },
	}, data);
}
