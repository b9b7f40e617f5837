// A run's page (/runs/{run}[?rank=R]): headline numbers, step time by
// component, the memory timeline (click the peak for what was alive), top
// operators and kernels, the diagnosis, ranks, the trace window (download or
// open in Perfetto) and the artifacts.
import { api, apiBuffer, errorBox, runUrl } from './api.js';
import { memoryChart, stepChart } from './charts.js';
import { openInPerfetto } from './perfetto.js';
import { table } from './table.js';
import { CATEGORIES, card, fmtBytes, fmtDate, fmtInt, fmtNs, fmtPct, fmtSignedPct, h, label, ready,
	setCrumbs } from './util.js';

const TOP_N = 25;

export async function runPage(app, run) {
	setCrumbs(h('a', { href: '/', text: 'Runs' }), run);
	document.title = run + ' · Trainscope';
	let info, ranks;
	try {
		[info, ranks] = await Promise.all([api(runUrl(run)), api(runUrl(run, '/ranks'))]);
	} catch (err) {
		app.replaceChildren(errorBox(err));
		return;
	}
	const params = new URLSearchParams(location.search);
	const rankList = ranks.ranks.map((r) => r.rank);
	const rank = rankList.includes(+params.get('rank')) ? +params.get('rank') : rankList[0] ?? 0;
	const hasTrace = info.artifacts.some((a) => a.kind === 'trace' && a.status === 'ready' && a.rank === rank);
	const hasMemory = info.run.peak_allocated_bytes != null;

	const headline = h('div', { class: 'headline' });
	const stepsBox = h('div', { class: 'chart-box' });
	const memBox = h('div', { class: 'chart-box' });
	const peakBox = h('div', { id: 'peak-detail' });
	const opsBox = h('div');
	const kernelsBox = h('div');
	const diagBox = h('div');
	const traceBox = h('div');

	const rankPicker = rankList.length > 1 ? h('label', { class: 'rank-pick' }, 'rank ',
		h('select', { onchange: (e) => { location.search = '?rank=' + e.target.value; } },
			rankList.map((r) => h('option', { value: r, selected: r === rank, text: r })))) : null;
	const meta = [info.run.project && h('span', { class: 'chip', text: info.run.project }),
		...info.run.tags.map((t) => h('span', { class: 'chip', text: t })),
		info.run.baseline && h('span', { class: 'chip base', text: 'baseline' })];

	app.replaceChildren(...[
		h('div', { class: 'title' }, h('h1', { text: run }), ...meta, h('span', { class: 'spacer' }), rankPicker),
		headline,
		hasTrace && card('Step time by component', h('p', { class: 'muted small', text: 'Every instant of a step counted once, in the first of kernel, memcpy, memset, runtime, dataloader, cpu that is active then; idle otherwise.' }), stepsBox),
		hasMemory && card('Memory timeline', h('p', { class: 'muted small', text: 'By category, with allocated and reserved. Drag to zoom, double-click to reset; click the peak for what was alive.' }), memBox, peakBox),
		hasTrace && h('div', { class: 'grid2' }, card('Top operators', opsBox), card('Top GPU kernels', kernelsBox)),
		hasTrace && card('Diagnosis', diagBox),
		ranks.ranks.length && card('Ranks', ranksTable(ranks, run)),
		hasTrace && card('Trace', traceBox),
		card('Artifacts', artifactsTable(info.artifacts, run))].filter(Boolean));

	const load = async (box, f) => {
		try {
			await f();
		} catch (err) {
			box.replaceChildren(errorBox(err));
		}
	};
	let steps = [], mem = null;
	await Promise.all([
		hasTrace && load(stepsBox, async () => {
			steps = (await api(runUrl(run, '/steps', { rank }))).steps;
			if (steps.length)
				stepChart(stepsBox, steps);
			else
				stepsBox.replaceChildren(h('p', { class: 'muted', text: 'No ProfilerStep spans in this trace.' }));
			traceWindow(traceBox, run, rank, steps);
		}),
		hasMemory && load(memBox, async () => {
			mem = await api(runUrl(run, '/memory', { rank, points: Math.round(memBox.clientWidth) }));
			memBox.dataset.device = mem.device;
			memoryChart(memBox, mem, {
				onPeak: () => load(peakBox, () => showPeak(peakBox, run, rank, mem.device)),
				fetchWindow: (start_ns, end_ns, points) =>
					api(runUrl(run, '/memory', { rank, device: mem.device, points, start_ns, end_ns })),
			});
		}),
		hasTrace && load(opsBox, () => opsTable(opsBox, run, rank)),
		hasTrace && load(kernelsBox, () => kernelsTable(kernelsBox, run, rank)),
		hasTrace && load(diagBox, async () => diagnosis(diagBox, (await api(runUrl(run, '/diagnosis', { rank }))).findings)),
	]);
	headline.replaceChildren(...headlines(ranks.ranks.find((r) => r.rank === rank), steps, mem, info));
	ready(app);
}

function stat(title, value, sub) {
	return h('div', { class: 'stat' }, h('div', { class: 'stat-title', text: title }), h('div', { class: 'stat-value', text: value }),
		sub ? h('div', { class: 'stat-sub', text: sub }) : null);
}

function headlines(r, steps, mem, info) {
	const dur = steps.reduce((a, s) => a + s.dur_ns, 0);
	const busy = steps.reduce((a, s) => a + (s.gpu_utilization ?? 0) * s.dur_ns, 0);
	let dominant = null;
	if (mem?.peak)
		dominant = CATEGORIES.reduce((a, c) => (mem.peak.by_category[c] > mem.peak.by_category[a] ? c : a));
	const events = info.artifacts.reduce((a, x) => a + (x.events || 0), 0);
	return [
		r?.steps && stat('Mean step', fmtNs(r.mean_ns), `${r.steps} steps`),
		r?.steps && stat('Median step', fmtNs(r.median_ns), `min ${fmtNs(r.min_ns)} · max ${fmtNs(r.max_ns)}`),
		dur && stat('GPU utilization', fmtPct(busy / dur), 'share of step time with a kernel running'),
		stat('Peak memory', fmtBytes(mem?.peak?.bytes ?? info.run.peak_allocated_bytes),
			dominant ? `mostly ${label(dominant)} (${fmtPct(mem.peak.by_category[dominant] / mem.peak.bytes, 0)})` : null),
		stat('Events', fmtInt(events), `${info.artifacts.length} artifact${info.artifacts.length === 1 ? '' : 's'}`),
	].filter(Boolean);
}

const nameCell = (v) => h('span', { class: 'name', title: v, text: v });

function segmented(options, current, onpick) {
	return h('div', { class: 'segmented' }, options.map(([value, text]) =>
		h('button', { type: 'button', class: value === current ? 'on' : null, onclick: () => onpick(value), text })));
}

async function opsTable(box, run, rank, device = 'cpu') {
	const ans = await api(runUrl(run, '/ops', { rank, device, limit: TOP_N }));
	const total = ans.total.self_ns || 1;
	const t = table({
		sort: 'self_ns', rows: ans.ops, empty: 'No operators.',
		columns: [
			{ key: 'name', label: 'Operator', fmt: nameCell },
			{ key: 'calls', label: 'Calls', num: true, fmt: fmtInt },
			{ key: 'self_ns', label: device === 'gpu' ? 'GPU time' : 'Self', num: true, fmt: fmtNs },
			{ key: 'share', label: 'Share', num: true, value: (r) => r.self_ns / total, fmt: (v) => fmtPct(v) },
			{ key: 'total_ns', label: 'Total', num: true, fmt: fmtNs },
		],
	});
	box.replaceChildren(h('div', { class: 'toolbar' },
		segmented([['cpu', 'Host'], ['gpu', 'GPU']], device, (d) => opsTable(box, run, rank, d)),
		h('span', { class: 'muted small', text: `${fmtInt(ans.total.names)} operators, ${fmtNs(ans.total.self_ns)}` }),
		h('span', { class: 'spacer' }),
		h('a', { class: 'button small', href: runUrl(run, '/ops', { rank, device, format: 'csv' }), download: `${run}.ops.${device}.csv`, text: 'CSV' })),
	t.el);
}

async function kernelsTable(box, run, rank, kind = 'kernel') {
	const ans = await api(runUrl(run, '/kernels', { rank, kind, limit: TOP_N }));
	const total = ans.total.total_ns || 1;
	const t = table({
		sort: 'total_ns', rows: ans.kernels, empty: 'None.',
		columns: [
			{ key: 'name', label: kind === 'kernel' ? 'Kernel' : label(kind), fmt: nameCell },
			{ key: 'calls', label: 'Calls', num: true, fmt: fmtInt },
			{ key: 'total_ns', label: 'Total', num: true, fmt: fmtNs },
			{ key: 'share', label: 'Share', num: true, value: (r) => r.total_ns / total, fmt: (v) => fmtPct(v) },
			{ key: 'mean_ns', label: 'Mean', num: true, fmt: fmtNs },
			{ key: 'max_ns', label: 'Max', num: true, fmt: fmtNs },
			{ key: 'achieved_occupancy_pct', label: 'Occupancy', num: true, fmt: (v) => (v == null ? '–' : v.toFixed(1) + '%') },
		],
	});
	box.replaceChildren(h('div', { class: 'toolbar' },
		segmented([['kernel', 'Kernels'], ['memcpy', 'Memcpy'], ['memset', 'Memset']], kind, (k) => kernelsTable(box, run, rank, k)),
		h('span', { class: 'muted small', text: `${fmtInt(ans.total.calls)} calls, ${fmtNs(ans.total.total_ns)}` }),
		h('span', { class: 'spacer' }),
		h('a', { class: 'button small', href: runUrl(run, '/kernels', { rank, kind, format: 'csv' }), download: `${run}.${kind}.csv`, text: 'CSV' })),
	t.el);
}

function evidenceValue(key, v) {
	if (typeof v !== 'number')
		return JSON.stringify(v);
	if (key.endsWith('_ns'))
		return fmtNs(v);
	if (key.endsWith('_bytes'))
		return fmtBytes(v);
	if (/share|utilization|ratio|fraction/.test(key) && Math.abs(v) <= 1)
		return fmtPct(v);
	if (key.endsWith('_pct'))
		return v.toFixed(1) + '%';
	return Number.isInteger(v) ? fmtInt(v) : v.toPrecision(3);
}

function diagnosis(box, findings) {
	if (!findings.length) {
		box.replaceChildren(h('p', { class: 'good', text: 'Nothing to report: no rule fired on this rank.' }));
		return;
	}
	box.replaceChildren(...findings.map((f) => h('article', { class: 'finding ' + f.severity },
		h('div', { class: 'finding-head' }, h('span', { class: 'sev ' + f.severity, text: f.severity }), h('h3', { text: f.title })),
		h('p', { class: 'advice', text: f.advice }),
		h('dl', { class: 'evidence' }, Object.entries(f.evidence || {}).map(([k, v]) =>
			[h('dt', { text: label(k) }), h('dd', { text: evidenceValue(k, v) })])))));
}

function ranksTable(ranks, run) {
	return h('div', null,
		ranks.stragglers.length ? h('p', { class: 'warn', text: `Stragglers (mean step ${ranks.straggler_threshold_pct}% above the median rank's): ${ranks.stragglers.join(', ')}` }) : null,
		table({
			sort: 'rank', desc: false, rows: ranks.ranks,
			rowClass: (r) => (r.straggler ? 'straggler' : null),
			columns: [
				{ key: 'rank', label: 'Rank', num: true, fmt: (v) => h('a', { href: `/runs/${encodeURIComponent(run)}?rank=${v}`, text: v }) },
				{ key: 'steps', label: 'Steps', num: true, fmt: fmtInt },
				{ key: 'mean_ns', label: 'Mean step', num: true, fmt: fmtNs },
				{ key: 'median_ns', label: 'Median', num: true, fmt: fmtNs },
				{ key: 'min_ns', label: 'Min', num: true, fmt: fmtNs },
				{ key: 'max_ns', label: 'Max', num: true, fmt: fmtNs },
				{ key: 'vs_median_pct', label: 'vs median rank', num: true, fmt: fmtSignedPct },
				{ key: 'straggler', label: '', value: (r) => (r.straggler ? 1 : 0), fmt: (v) => (v ? h('span', { class: 'chip bad', text: 'straggler' }) : '') },
			],
		}).el);
}

function artifactsTable(artifacts, run) {
	return table({
		sort: 'id', desc: false, rows: artifacts,
		columns: [
			{ key: 'name', label: 'File', fmt: (v, a) => h('a', { href: runUrl(run, `/artifacts/${a.id}/raw`), download: v, text: v }) },
			{ key: 'kind', label: 'Kind', fmt: label },
			{ key: 'rank', label: 'Rank', num: true },
			{ key: 'bytes', label: 'Size', num: true, fmt: fmtBytes },
			{ key: 'events', label: 'Events', num: true, fmt: fmtInt },
			{ key: 'status', label: 'Status', fmt: (v, a) => h('span', { class: 'chip ' + (v === 'ready' ? 'ok' : 'bad'), title: a.error?.message, text: v }) },
			{ key: 'created_ns', label: 'Uploaded', num: true, fmt: fmtDate },
		],
	}).el;
}

async function showPeak(box, run, rank, device) {
	const peak = await api(runUrl(run, '/memory/peak', { rank, device }));
	box.replaceChildren(h('div', { class: 'peak-panel' },
		h('div', { class: 'toolbar' }, h('h3', { text: `Alive at the peak: ${fmtBytes(peak.bytes)} on ${device}` }), h('span', { class: 'spacer' }),
			h('button', { type: 'button', class: 'button small', onclick: () => box.replaceChildren(), text: 'Close' })),
		table({
			sort: 'bytes', rows: peak.groups,
			columns: [
				{ key: 'category', label: 'Category', fmt: (v) => h('span', { class: 'cat' }, h('i', { class: 'swatch', 'data-cat': v }), label(v)) },
				{ key: 'op', label: 'Allocated by', fmt: (v) => (v == null ? h('span', { class: 'muted', text: peak.source === 'trace' ? 'before the trace' : 'not recorded' }) : nameCell(v)) },
				{ key: 'bytes', label: 'Bytes', num: true, fmt: fmtBytes },
				{ key: 'share', label: 'Share', num: true, value: (g) => g.bytes / peak.bytes, fmt: (v) => fmtPct(v) },
				{ key: 'count', label: 'Blocks', num: true, fmt: fmtInt },
			],
		}).el));
	box.scrollIntoView({ block: 'nearest' });
}

// The trace of a window of steps: download it, or hand it to the Perfetto UI.
function traceWindow(box, run, rank, steps) {
	const opts = (sel) => [h('option', { value: '', text: 'whole trace' }), ...steps.map((s, i) => h('option', { value: i, text: '#' + s.step, selected: sel === i }))];
	const from = h('select', { 'aria-label': 'from step' }, opts(steps.length ? 0 : null));
	const to = h('select', { 'aria-label': 'to step' }, opts(steps.length ? Math.min(steps.length - 1, 1) : null));
	const link = h('a', { class: 'button', text: 'Download trace' });
	const note = h('span', { class: 'muted small' });
	// ns times above 2^53 lose their last digits in JSON.parse: widen by 1 µs so the window covers its steps
	const span = () => {
		if (from.value === '' || to.value === '')
			return {};
		const a = steps[Math.min(+from.value, +to.value)], b = steps[Math.max(+from.value, +to.value)];
		return { start_ns: BigInt(Math.floor(a.start_ns / 1000) - 1) * 1000n, end_ns: BigInt(Math.ceil((b.start_ns + b.dur_ns) / 1000) + 1) * 1000n };
	};
	const update = () => {
		const w = span();
		link.href = runUrl(run, '/trace', { rank, ...w });
		link.download = `${run}.rank${rank}.pt.trace.json`;
		note.textContent = w.start_ns ? `${fmtNs(Number(w.end_ns - w.start_ns))} of trace` : 'every event of this rank';
	};
	from.addEventListener('change', update);
	to.addEventListener('change', update);
	update();
	const perfetto = h('button', { type: 'button', class: 'button', onclick: () => openInPerfetto(() => apiBuffer(link.href), `${run} rank ${rank}`, note) }, 'Open in Perfetto');
	box.replaceChildren(h('div', { class: 'toolbar' }, 'Steps', from, 'to', to, note, h('span', { class: 'spacer' }), link, perfetto));
}
