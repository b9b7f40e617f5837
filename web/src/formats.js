// The run page's views of other profilers' outputs, each drawn only when the run holds
// such a file on the rank: Lightning profiler reports (GET /actions), folded stacks (a flame
// graph of the raw files, GET /stacks for the frames) and nvidia-smi logs (GET /gpu).
import { api, apiBuffer, runUrl } from './api.js';
import { gpuChart } from './charts.js';
import { foldedText, parseFolded, stackTree } from './flame.js';
import { openInViewer } from './viewer.js';
import { nameCell, table } from './table.js';
import { DASH, fmtBytes, fmtInt, fmtNs, fmtPct, h, segmented } from './util.js';

const TOP_N = 25;
const FRAMES_MAX = 2000;		/* the frames table: TOP_N shown, the rest behind "show all" */
const FLAME_MAX_BYTES = 64 << 20;	/* stacks files larger than this together are not drawn inline */

export const readyOf = (info, rank, kind) => info.artifacts.filter((a) => a.kind === kind && a.status === 'ready' && a.rank === rank);

// ---- Lightning reports ----

// The actions of one report (a picker when the rank has several), largest total first;
// AdvancedProfiler's functions per action, where the answer carries them, below.
export async function actionsView(box, run, rank, names, artifact = null) {
	const ans = await api(runUrl(run, '/actions', { rank }));
	const reports = [...new Set(ans.actions.map((a) => a.artifact))].sort((a, b) => a - b);	/* in upload order */
	const shown = reports.includes(artifact) ? artifact : reports[0];
	const rows = ans.actions.filter((a) => a.artifact === shown);
	const t = table({
		sort: 'total_ns', rows, top: TOP_N, filter: rows.length > TOP_N, empty: 'No actions.',
		columns: [
			{ key: 'action', label: 'Action', name: true },
			{ key: 'calls', label: 'Calls', num: true, fmt: fmtInt },
			{ key: 'mean_ns', label: 'Mean', num: true, fmt: fmtNs },
			{ key: 'total_ns', label: 'Total', num: true, fmt: fmtNs },
			{ key: 'share', label: 'Share', num: true, fmt: (v) => fmtPct(v == null ? null : v / 100, 2) },
		],
	});
	box.dataset.artifact = shown;
	box.replaceChildren(h('div', { class: 'toolbar' },
		reports.length > 1 ? segmented(reports.map((id) => [id, names[id] || '#' + id]), shown, (id) => actionsView(box, run, rank, names, id)) : null,
		h('span', { class: 'muted small', text: `${fmtInt(rows.length)} actions in ${names[shown] || 'the report'}; share: of the report's total, as printed` })),
	t.el, functionsList(rows) ?? '');
}

// A column for each field the functions carry: names as names, *_ns as times, numbers as numbers.
function functionColumns(fns) {
	const keys = [...new Set(fns.flatMap((f) => Object.keys(f)))];
	return keys.map((key) => {
		const sample = fns.find((f) => f[key] != null)?.[key];
		if (typeof sample === 'string')
			return { key, label: key.replace(/_/g, ' '), name: true };
		if (key.endsWith('_ns'))
			return { key, label: key.slice(0, -3).replace(/_/g, ' '), num: true, fmt: fmtNs };
		return { key, label: key.replace(/_/g, ' '), num: true, fmt: (v) => (typeof v === 'number' ? fmtInt(v) : v ?? DASH) };
	});
}

function functionsList(actions) {
	const withFns = actions.filter((a) => Array.isArray(a.functions) && a.functions.length)
		.sort((a, b) => (b.total_ns ?? 0) - (a.total_ns ?? 0));
	if (!withFns.length)
		return null;
	return h('div', { class: 'functions' }, h('h3', { text: 'Functions per action' }),
		withFns.map((a) => {
			const d = h('details', { class: 'action-functions' }, h('summary', null, nameCell(a.action),
				h('span', { class: 'muted small', text: ` ${fmtInt(a.functions.length)} functions, ${fmtNs(a.total_ns)}` })));
			// built when opened: a report can list thousands
			d.addEventListener('toggle', () => {
				if (d.open && d.children.length === 1) {
					const cols = functionColumns(a.functions);
					const sort = cols.find((c) => /cum|total/.test(c.key))?.key ?? cols.find((c) => c.num)?.key;
					d.append(table({ sort, rows: a.functions, top: TOP_N, filter: a.functions.length > TOP_N, columns: cols }).el);
				}
			});
			return d;
		}));
}

// ---- folded stacks ----

// The flame graph of the rank's stacks files (their raw bytes, root first) and the top frames.
export async function stacksView(box, run, rank, artifacts) {
	const graph = h('div', { class: 'flame', id: 'flame' });
	const note = h('span', { class: 'muted small' });
	const bytes = artifacts.reduce((a, x) => a + x.bytes, 0);
	const raw = () => Promise.all(artifacts.map((a) => apiBuffer(runUrl(run, `/artifacts/${a.id}/raw`))))
		.then((bufs) => bufs.flatMap((b) => parseFolded(new TextDecoder().decode(b))));
	const viewer = h('button', { type: 'button', class: 'button', id: 'open-stacks-viewer', title: 'speedscope, served by this server: works offline',
		onclick: () => openInViewer(() => raw().then(foldedText), `${run} rank ${rank} stacks`, note, (s) => s) }, 'Open in viewer');
	const framesBox = h('div');
	box.replaceChildren(h('div', { class: 'toolbar' },
		h('span', { class: 'muted small', text: 'Weights as the file gives them: µs of self time for torch export_stacks, samples for py-spy. Click a frame to zoom in, the bottom one to zoom out.' }),
		h('span', { class: 'spacer' }), note, viewer), graph, h('h3', { text: 'Top frames' }), framesBox);
	const frames = api(runUrl(run, '/stacks', { rank, top: FRAMES_MAX }));
	let tree = null;
	if (bytes > FLAME_MAX_BYTES)
		graph.replaceChildren(h('p', { class: 'muted', text: `${fmtBytes(bytes)} of stacks: too many to draw here; open them in the viewer.` }));
	else {
		const [{ flameGraph }, stacks] = await Promise.all([import('./flamegraph.js'), raw()]);
		flameGraph(graph, tree = stackTree(stacks));
	}
	framesTable(framesBox, (await frames).frames, tree?.value);
}

// total: every stack's weight (the flame graph's bottom frame), for the shares; unknown when
// the stacks were not read here (a file may have several roots: no frame's total is it).
function framesTable(box, frames, total) {
	const share = (key, label) => total && { key: key + '_share', label, num: true, value: (f) => f[key] / total, fmt: (v) => fmtPct(v) };
	box.replaceChildren(table({
		sort: 'self', rows: frames, top: TOP_N, filter: frames.length > TOP_N,
		columns: [
			{ key: 'frame', label: 'Frame', name: true },
			{ key: 'self', label: 'Self', num: true, fmt: fmtInt },
			share('self', 'Self %'),
			{ key: 'total', label: 'Total', num: true, fmt: fmtInt },
			share('total', 'Total %'),
		].filter(Boolean),
	}).el);
}

// ---- nvidia-smi logs ----

const UNIT_TITLES = [['%', 'Utilization'], ['B', 'Memory'], ['C', 'Temperature'], ['W', 'Power'], ['Hz', 'Clocks']];
const UNIT_FMT = { '%': (v) => v.toFixed(1) + ' %', B: fmtBytes, C: (v) => v.toFixed(1) + ' °C', W: (v) => v.toFixed(1) + ' W',
	Hz: (v) => (v / 1e6).toFixed(0) + ' MHz' };

// A chart per unit the logs have (a line per GPU and column), then each column's mean, min, max.
export async function gpuView(box, run, rank) {
	const ans = await api(runUrl(run, '/gpu', { rank }));
	const lines = ans.gpus.flatMap((g) => g.columns.map((c) => ({ gpu: g.index, ...c })));
	const charts = UNIT_TITLES.filter(([unit]) => lines.some((l) => l.unit === unit)).map(([unit, title]) => {
		const el = h('div', { class: 'chart-box gpu-chart', 'data-unit': unit });
		return { unit, el, part: h('div', null, h('h3', { text: title }), el) };
	});
	const fmt = (l, v) => (v == null ? DASH : (UNIT_FMT[l.unit] || String)(v));
	const st = ans.steps;
	const clock = !st ? '' : st.clock === 'utc' ? ' The trace\'s steps are shaded (the log\'s clock read as UTC).'
		: ` The trace's steps are shaded, shifted by ${st.utc_offset_min / 60} h: the log is in the node's local time (${st.clock === 'given' ? 'the offset given' : 'the offset that puts the steps in the log'}).`;
	box.replaceChildren(h('p', { class: 'muted small', text: `${ans.gpus.length} GPU${ans.gpus.length === 1 ? '' : 's'}, as the log's rows give them. Drag to zoom, double-click to reset.${clock}` }),
		...charts.map((c) => c.part),
		table({
			sort: null, rows: lines,
			columns: [
				{ key: 'gpu', label: 'GPU', num: true },
				{ key: 'name', label: 'Column' },
				{ key: 'points', label: 'Rows', num: true, value: (l) => l.values.filter((v) => v != null).length, fmt: fmtInt },
				{ key: 'mean', label: 'Mean', num: true, fmt: (v, l) => fmt(l, v) },
				{ key: 'min', label: 'Min', num: true, fmt: (v, l) => fmt(l, v) },
				{ key: 'max', label: 'Max', num: true, fmt: (v, l) => fmt(l, v) },
			],
		}).el);
	for (const c of charts)
		gpuChart(c.el, c.unit, lines.filter((l) => l.unit === c.unit), st?.steps);
	return ans;
}

// The mean utilization.gpu over every GPU's rows, or null: a headline figure.
export function meanUtilization(gpu) {
	let sum = 0, n = 0;
	for (const g of gpu?.gpus ?? [])
		for (const c of g.columns.filter((x) => x.name === 'utilization.gpu'))
			for (const v of c.values.filter((x) => x != null)) {
				sum += v;
				n++;
			}
	return n ? { pct: sum / n, gpus: gpu.gpus.length } : null;
}

// ---- rlhf-canary metrics.json ----

// The canary's figures as its notebook prints them (step time, tokens/s, max memory), its
// step-time distribution and stability, and its profiler summary's top CUDA and CPU ops.
export async function canaryView(box, run, rank) {
	const c = await api(runUrl(run, '/canary', { rank }));
	const st = c.step_time;
	const fig = (title, value, sub) => h('div', { class: 'stat' }, h('div', { class: 'stat-title', text: title }),
		h('div', { class: 'stat-value', text: value }), sub ? h('div', { class: 'stat-sub', text: sub }) : null);
	const p = c.profiler;
	const opsTable = (rows, total) => table({
		sort: 'self_ns', rows, empty: 'None recorded.',
		columns: [
			{ key: 'name', label: 'Operator', name: true },
			{ key: 'calls', label: 'Calls', num: true, fmt: fmtInt },
			{ key: 'self_ns', label: 'Self', num: true, fmt: fmtNs },
			{ key: 'share', label: 'Of total', num: true, value: (r) => (total ? r.self_ns / total : null), fmt: (v) => fmtPct(v) },
		],
	}).el;
	box.dataset.canaryRun = c.run_id;
	box.replaceChildren(
		h('p', { class: 'muted small', text: `${c.run_id}${c.timestamp ? ' · ' + c.timestamp : ''}${c.status ? ' · ' + c.status : ''}; step times after the canary's warm-up steps` }),
		h('div', { class: 'headline canary-figures' },
			fig('Step time', st.count ? fmtNs(st.mean_ns) : DASH, st.count ? `mean of ${fmtInt(st.count)} · p95 ${fmtNs(st.p95_ns)} · std ${fmtNs(st.std_ns)}` : 'no steps'),
			fig('Tokens/s', c.tokens_per_s == null ? DASH : fmtInt(Math.round(c.tokens_per_s)), 'approximate: padding counted'),
			fig('Max memory', fmtBytes(c.max_mem_bytes), 'max allocated'),
			c.gpu_utilization_pct != null && fig('GPU utilization', fmtPct(c.gpu_utilization_pct / 100)),
			c.dataloader_wait_pct != null && fig('Dataloader wait', fmtPct(c.dataloader_wait_pct / 100)),
			c.stability && fig('Stability', c.stability.loss_diverged ? 'loss diverged' : 'stable',
				`${fmtInt(c.stability.nan_steps ?? 0)} NaN · ${fmtInt(c.stability.inf_steps ?? 0)} Inf steps`)),
		p ? h('div', { class: 'canary-ops' },
			h('h3', { text: `Top CUDA ops (CUDA total ${fmtNs(p.cuda_time_total_ns)})` }), opsTable(p.top_cuda_ops, p.self_cuda_time_total_ns ?? p.cuda_time_total_ns),
			h('h3', { text: `Top CPU ops (CPU total ${fmtNs(p.cpu_time_total_ns)})` }), opsTable(p.top_cpu_ops, p.cpu_time_total_ns))
			: h('p', { class: 'muted', text: 'No profiler summary in this file (profiling was off).' }));
	return c;
}
