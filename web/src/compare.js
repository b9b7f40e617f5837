// The comparison page (/compare?base=A&target=B): the answer first, then what
// explains it, then the rest. The verdict with its figure, p-value and reasons
// (GET /api/v1/compare); the step breakdown side by side, what moved most first;
// the operator and kernel deltas (the kernels first when GPU time moved most),
// each with its per-step total, counted inside the steps as the breakdown is;
// then the step charts, the two memory timelines on the same axes with the peak's
// change by category and by allocation site, and the other files' figures. Bytes in binary units throughout (the canary's MB are MiB).
import { ApiError, api, errorBox, runUrl } from './api.js';
import { memoryChart, stepChart } from './charts.js';
import { nameCell, table } from './table.js';
import { COMPONENTS, card, fmtBytes, fmtInt, fmtNs, fmtSignedPct, h, label, ready, setCrumbs } from './util.js';

const runName = (x) => (typeof x === 'string' ? x : x?.name ?? x?.run);
const reasonText = (r) => (typeof r === 'string' ? r : r.message ?? r.text ?? JSON.stringify(r));

export async function comparePage(app) {
	const params = new URLSearchParams(location.search);
	const base = params.get('base'), target = params.get('target');
	setCrumbs(h('a', { href: '/', text: 'Runs' }), 'Compare');
	if (!base || !target) {
		app.replaceChildren(errorBox(new ApiError(400, 'invalid_parameter', 'Pick two runs on the runs page: /compare?base=A&target=B')));
		return;
	}
	document.title = `${base} → ${target} · Trainscope`;
	let cmp, infos, steps;
	try {
		const q = new URLSearchParams({ base, target });
		if (params.get('rank'))
			q.set('rank', params.get('rank'));
		[cmp, infos, steps] = await Promise.all([
			api('/api/v1/compare?' + q),
			Promise.all([base, target].map((r) => api(runUrl(r)))),
			Promise.all([base, target].map((r) => api(runUrl(r, '/steps')).then((a) => a.steps))),
		]);
	} catch (err) {
		app.replaceChildren(errorBox(err));
		return;
	}
	const names = [runName(cmp.base) || base, runName(cmp.target) || target];
	// runs without trace steps but with canary metrics: the canary's step time and memory head the page
	const canaryHead = cmp.canary && cmp.step_time?.base_ns == null;
	/* runs of the other profilers' files alone: no trace cards, theirs instead */
	const reportsOnly = (cmp.canary || cmp.actions || cmp.frames) && cmp.step_time?.base_ns == null;
	const st = (canaryHead ? cmp.canary.step_time : cmp.step_time) || {};
	const peaks = canaryHead ? [cmp.canary.max_mem.base_bytes, cmp.canary.max_mem.target_bytes]
		: [cmp.memory?.base_peak_bytes, cmp.memory?.target_peak_bytes];

	// per: "step" (means per step) or "trace" (whole traces: a run without steps)
	const per = cmp.per === 'trace' ? 'trace' : 'step';
	const comparable = cmp.verdict !== 'not_comparable';
	const verdict = h('section', { class: 'verdict ' + cmp.verdict, id: 'verdict' },
		h('div', { class: 'verdict-head' },
			h('span', { class: 'verdict-word', text: comparable ? label(cmp.verdict) : 'Not comparable' }),
			h('span', { class: 'verdict-runs' }, h('a', { href: runUrl(names[0]).replace('/api/v1', ''), text: names[0] }), ' → ',
				h('a', { href: runUrl(names[1]).replace('/api/v1', ''), text: names[1] }))),
		!comparable && h('p', { class: 'verdict-why', text: 'These runs cannot be compared: no change is claimed either way.' }),
		h('div', { class: 'headline' },
			stat(canaryHead ? 'Canary step, base' : per === 'step' ? 'Mean step, base' : 'Whole trace, base', fmtNs(st.base_ns)),
			stat(canaryHead ? 'Canary step, target' : per === 'step' ? 'Mean step, target' : 'Whole trace, target', fmtNs(st.target_ns)),
			stat('Change', fmtSignedPct(st.delta_pct), st.p_value != null ? `p = ${st.p_value.toPrecision(2)}` : null),
			stat(canaryHead ? 'Max memory (canary)' : 'Peak memory', `${fmtBytes(peaks[0])} → ${fmtBytes(peaks[1])}`)),
		h('ul', { class: 'reasons' }, (cmp.reasons || []).map((r) => h('li', { text: reasonText(r) }))),
		cmp.per_note && h('p', { class: 'muted small per-note', text: `Operators and kernels: ${cmp.per_note}.` }));

	const stepBoxes = names.map(() => h('div', { class: 'chart-box' }));
	const memBoxes = names.map(() => h('div', { class: 'chart-box' }));
	// a timeline whose bytes are all "unknown" has memory too: the compare answer's peaks say which runs have one
	const cm = cmp.memory || {};
	const hasMemory = infos.map((info, i) => info.run.peak_allocated_bytes != null || cm[i ? 'target_peak_bytes' : 'base_peak_bytes'] != null);
	const devices = [cm.base_device, cm.target_device];
	const hasSteps = !(reportsOnly && !steps.flat().length);
	const breakdown = hasSteps && breakdownRows(steps);
	// the kernels lead when the component that moved most is GPU work
	const top = breakdown && [...breakdown].sort((a, b) => Math.abs(b.delta ?? 0) - Math.abs(a.delta ?? 0))[0];
	const gpuFirst = top && top.delta && ['kernel', 'memcpy', 'memset', 'communication'].includes(top.component);
	const opsCard = !(reportsOnly && !cmp.ops?.length) && card('Operators',
		totalLine(cmp, 'ops', 'Host self time', 'ops-total'), deltaTable(cmp.ops || [], 'Operator', PER_ROW(per)));
	const kernelsCard = !(reportsOnly && !cmp.kernels?.length) && card('Kernels',
		totalLine(cmp, 'kernel', 'Kernel time', 'kernel-total'), deltaTable(cmp.kernels || [], 'Kernel', PER_ROW(per)));
	app.replaceChildren(...[verdict,
		// the answer, then what explains it: the canary's figures when they decided
		canaryHead && card('rlhf-canary metrics', canaryTable(cmp.canary, names)),
		breakdown && card('Step breakdown', h('p', { class: 'muted small', text: 'Mean time per step of each component over each run\'s'
			+ ' complete steps, the largest change first.' }), breakdownTable(breakdown, names)),
		...(gpuFirst ? [kernelsCard, opsCard] : [opsCard, kernelsCard]),
		cmp.actions && card('Lightning actions', h('p', { class: 'muted small', text: 'Each run\'s newest Lightning report, action by action: the largest change of total time first.' }),
			deltaTable(cmp.actions, 'Action', ACTIONS)),
		cmp.frames && card('Stack frames', h('p', { class: 'muted small', text: 'The folded stacks of each run, frame by frame (in the files\' unit: µs for export_stacks, samples for py-spy): the largest change of total first.' }),
			deltaTable(cmp.frames, 'Frame', FRAMES)),
		// then the rest
		// (runs of the other profilers' files alone have no trace: nothing for these cards)
		hasSteps && card('Step time', h('div', { class: 'grid2' }, names.map((n, i) => h('div', null, h('h3', { text: n }),
			steps[i].length ? stepBoxes[i] : h('p', { class: 'muted', text: 'No steps.' }))))),
		hasMemory.some(Boolean) && card('Memory timelines (same axes)', h('div', { class: 'grid2' }, names.map((n, i) => h('div', null,
			h('h3', { text: n }), hasMemory[i] ? memBoxes[i] : h('p', { class: 'muted', text: 'No memory data.' })))),
		cmp.memory?.by_category && categoryDeltas(cmp.memory.by_category),
		cmp.memory?.by_site?.length && siteTable(cmp.memory.by_site)),
		cmp.distributed && card('Distributed', distTable(cmp.distributed, names)),
		cmp.canary && !canaryHead && card('rlhf-canary metrics', canaryTable(cmp.canary, names))].filter(Boolean));

	const yMax = Math.max(...steps.flat().map((s) => s.dur_ns)) * 1.05;
	steps.forEach((s, i) => s.length && stepChart(stepBoxes[i], s, { yMax }));
	const mems = await Promise.all(names.map((n, i) => hasMemory[i] &&
		api(runUrl(n, '/memory', { rank: [cmp.base_rank, cmp.target_rank][i], device: devices[i], points: Math.round(memBoxes[i].clientWidth) })).catch((err) => {
			memBoxes[i].replaceChildren(errorBox(err));
			return null;
		})));
	const drawn = mems.filter(Boolean);
	const xMax = Math.max(...drawn.map((m) => (m.t_ns[m.t_ns.length - 1] - m.t_ns[0]) / 1e9));
	const memMax = Math.max(...drawn.map((m) => Math.max(...m.allocated, ...m.reserved.filter((v) => v != null)))) * 1.08;
	mems.forEach((m, i) => m && memoryChart(memBoxes[i], m, { xMax, yMax: memMax }));
	ready(app);
}

function stat(title, value, sub) {
	return h('div', { class: 'stat' }, h('div', { class: 'stat-title', text: title }), h('div', { class: 'stat-value', text: value }),
		sub ? h('div', { class: 'stat-sub', text: sub }) : null);
}

// Mean time per step of each component, base against target, the largest change first:
// from /steps over the complete steps, the steps the compare answer's per-step figures count.
function breakdownRows(steps) {
	const mean = (all, c) => {
		const s = all.filter((x) => !x.incomplete);
		return s.length ? s.reduce((a, x) => a + x.breakdown_ns[c], 0) / s.length : null;
	};
	return COMPONENTS.map((c) => {
		const b = mean(steps[0], c), t = mean(steps[1], c);
		return { component: c, base: b, target: t, delta: b != null && t != null ? t - b : null };
	}).sort((a, b) => Math.abs(b.delta ?? 0) - Math.abs(a.delta ?? 0));
}

function breakdownTable(rows, names) {
	return table({
		rows, rowClass: (r) => 'comp-' + r.component, columns: [
			{ key: 'component', label: 'Component', fmt: (v) => h('span', { class: 'cat' }, h('i', { class: 'swatch', 'data-comp': v }), v) },
			{ key: 'base', label: names[0], num: true, fmt: fmtNs },
			{ key: 'target', label: names[1], num: true, fmt: fmtNs },
			{ key: 'delta', label: 'Change per step', num: true, fmt: signedNs },
		],
	}).el;
}

function signedNs(v) {
	return h('span', { class: v > 0 ? 'worse' : v < 0 ? 'better' : null, text: v == null ? '–' : (v > 0 ? '+' : '') + fmtNs(v) });
}

// The answer's total of every row (not only those listed) of ops or of kernel, per step as the
// rows are: inside the steps, the kernels' is the breakdown's kernel time.
function totalLine(cmp, key, what, id) {
	const t = cmp.totals?.[key];
	if (!t)
		return null;
	const inSteps = cmp.in_steps ? (key === 'ops' ? ' inside the steps' : ' inside the steps, as the step breakdown counts it') : '';
	return h('p', { class: 'small total-line', id }, `${what} per ${cmp.per === 'trace' ? 'trace' : 'step'}${inSteps}, every row: `,
		h('b', { class: 'total-base', text: fmtNs(t.base_ns_per_step) }), ' → ', h('b', { class: 'total-target', text: fmtNs(t.target_ns_per_step) }),
		' (', signedNs(t.delta_ns_per_step), ')');
}

function categoryDeltas(byCat) {
	return h('p', { class: 'small' }, 'Peak change by category: ',
		Object.entries(byCat).filter(([, v]) => v).map(([k, v]) =>
			h('span', { class: 'chip ' + (v > 0 ? 'bad' : 'ok'), text: `${label(k)} ${v > 0 ? '+' : ''}${fmtBytes(v)}` })));
}

// What was alive at each run's peak by allocation site (a trace's operator, a snapshot's user
// frame), the sites that changed, largest change first (GET /compare's memory.by_site).
function siteTable(rows) {
	return h('div', { id: 'memory-sites' }, h('h3', { text: 'Peak change by allocation site' }), table({
		rows, sort: 'delta_bytes', empty: 'No differences.',
		columns: [
			{ key: 'site', label: 'Allocated by', name: true, fmt: (v) => (v == null ? '(not named)' : nameCell(v)) },
			{ key: 'category', label: 'Category', fmt: label },
			{ key: 'base_bytes', label: 'Base', num: true, fmt: fmtBytes },
			{ key: 'target_bytes', label: 'Target', num: true, fmt: fmtBytes },
			{ key: 'delta_bytes', label: 'Change', num: true, fmt: signed(fmtBytes), sortBy: (r) => Math.abs(r.delta_bytes) },
		],
	}).el);
}

const fmtNum = (v) => (typeof v === 'number' ? (Number.isInteger(v) ? fmtInt(v) : v.toPrecision(3)) : v ?? '–');
const signed = (fmt) => (v) => (v == null ? '–' : (v > 0 ? '+' : '') + fmt(v));

const TOP_N = 25;
// The figures of each list in the compare answer: base, target, their change and its %, and
// calls (or self, for stack frames) base -> target.
const PER_ROW = (per) => ({ base: 'base_ns_per_step', target: 'target_ns_per_step', delta: 'delta_ns_per_step',
	cb: 'base_calls_per_step', ct: 'target_calls_per_step', cd: 'delta_calls_per_step', unit: ` per ${per}`, fmt: fmtNs, calls: 'Calls' });
const ACTIONS = { base: 'base_total_ns', target: 'target_total_ns', delta: 'delta_total_ns', cb: 'base_calls', ct: 'target_calls',
	cd: 'delta_calls', unit: '', fmt: fmtNs, calls: 'Calls' };
const FRAMES = { base: 'base_total', target: 'target_total', delta: 'delta_total', cb: 'base_self', ct: 'target_self', cd: 'delta_self',
	unit: '', fmt: fmtNum, calls: 'Self' };

// Entries of the compare answer's ops, kernels, actions or frames: name, status, base and
// target, the change and its %, and calls base -> target in one column, so that the name keeps
// the width. What changed most leads (by the size of the change); the unchanged rows are folded away.
function deltaTable(rows, what, f) {
	const arrow = (r) => (r[f.cb] == null && r[f.ct] == null ? null : `${fmtNum(r[f.cb])} → ${fmtNum(r[f.ct])}`);
	return table({
		rows, sort: f.delta, empty: 'No differences.', top: TOP_N, filter: rows.length > TOP_N,
		fold: (r) => r.status === 'unchanged',
		rowClass: (r) => r.status,
		columns: [
			{ key: 'name', label: what, name: true },
			{ key: 'status', label: 'Status', fmt: (v) => h('span', { class: 'chip ' + v, text: v }) },
			{ key: f.base, label: 'Base' + f.unit, num: true, fmt: f.fmt },
			{ key: f.target, label: 'Target' + f.unit, num: true, fmt: f.fmt },
			{ key: f.delta, label: 'Change' + f.unit, num: true, fmt: signed(f.fmt),
				sortBy: (r) => (r[f.delta] == null ? null : Math.abs(r[f.delta])) },
			{ key: 'delta_pct', label: 'Change %', num: true, fmt: fmtSignedPct },
			{ key: 'calls', label: f.calls + f.unit, num: true, value: arrow, sortBy: (r) => (r[f.cd] == null ? null : Math.abs(r[f.cd])) },
		],
	}).el;
}

// Both runs' figures over all their ranks (GET /compare's "distributed"): means per rank and step,
// with their change, then the collectives matched across ranks and who arrived last.
function distTable(d, names) {
	const mean = (r, key) => (r.rank_steps ? r[key] / r.rank_steps : null);
	const rows = [['Step', 'dur_ns'], ['Computation', 'compute_ns'], ['Exposed communication', 'communication_ns'],
		['Overlapped communication', 'overlap_ns'], ['Idle', 'idle_ns']];
	const last = (r) => (r.last_rank == null ? '–' : `rank ${r.last_rank} (${r.last_arrival_pct.toFixed(1)} %)`);
	return h('div', { class: 'table-wrap' }, h('table', { class: 'data', id: 'dist-compare' },
		h('caption', { class: 'muted small', text: 'All ranks of each run: means per rank and step (complete steps).' }),
		h('thead', null, h('tr', null, h('th', { text: '' }), h('th', { class: 'num', text: names[0] }),
			h('th', { class: 'num', text: names[1] }), h('th', { class: 'num', text: 'Change' }))),
		h('tbody', null,
			h('tr', null, h('th', { text: 'Ranks' }), h('td', { class: 'num', text: fmtInt(d.base.ranks) }),
				h('td', { class: 'num', text: fmtInt(d.target.ranks) }), h('td')),
			rows.map(([text, key]) => h('tr', { 'data-key': key }, h('th', { text }),
				h('td', { class: 'num', text: fmtNs(mean(d.base, key)) }), h('td', { class: 'num', text: fmtNs(mean(d.target, key)) }),
				h('td', { class: 'num', text: d.delta_pct[key] == null ? '–' : fmtSignedPct(d.delta_pct[key]) }))),
			h('tr', null, h('th', { text: 'Matched collectives' }), h('td', { class: 'num', text: fmtInt(d.base.matched) }),
				h('td', { class: 'num', text: fmtInt(d.target.matched) }), h('td')),
			h('tr', null, h('th', { text: 'Last to arrive most often' }), h('td', { class: 'num', text: last(d.base) }),
				h('td', { class: 'num', text: last(d.target) }), h('td')))));
}

// Two runs' rlhf-canary metrics.json as its profiler notebook compares them: step time (with
// our Welch test from the canary's count, mean and std), tokens/s, max memory (its MB are MiB:
// in binary units, as the rest of the page), profiler totals.
function canaryTable(c, names) {
	const row = (text, key, base, target, change) => h('tr', { 'data-key': key }, h('th', { text }),
		h('td', { class: 'num', text: base }), h('td', { class: 'num', text: target }), h('td', { class: 'num', text: change }));
	const st = c.step_time, tok = c.tokens_per_s, mem = c.max_mem;
	return h('div', { class: 'table-wrap' }, h('table', { class: 'data', id: 'canary-compare' },
		h('caption', { class: 'muted small', text: 'The newest metrics.json of each run, as the canary notebook compares them (its MB are MiB).' }),
		h('thead', null, h('tr', null, h('th', { text: '' }), h('th', { class: 'num', text: names[0] }),
			h('th', { class: 'num', text: names[1] }), h('th', { class: 'num', text: 'Change' }))),
		h('tbody', null,
			row('Step time', 'step_time', fmtNs(st.base_ns), fmtNs(st.target_ns),
				`${fmtSignedPct(st.delta_pct)}${st.p_value != null ? ` (p = ${st.p_value.toPrecision(2)})` : ''}`),
			row('Tokens/s', 'tokens_per_s', tok.base == null ? '–' : fmtInt(Math.round(tok.base)),
				tok.target == null ? '–' : fmtInt(Math.round(tok.target)), fmtSignedPct(tok.delta_pct)),
			row('Max memory', 'max_mem', fmtBytes(mem.base_bytes), fmtBytes(mem.target_bytes), signed(fmtBytes)(mem.delta_bytes)),
			Object.entries(c.profiler || {}).map(([k, v]) => row(k.replace(/_/g, ' '), k, fmtNs(v.base_ns), fmtNs(v.target_ns),
				fmtSignedPct(v.delta_pct))))));
}
