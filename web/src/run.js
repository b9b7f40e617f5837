// A run's page (/runs/{run}[?rank=R]), the answer first: headline numbers, then
// the diagnosis (the three most severe findings, each linking to the card that
// shows its evidence, the rest folded), then step time by component, the whole
// run (when it has more than one profiling cycle), the memory timeline (click the
// peak for what was alive), the nvidia-smi series, the Lightning profiler's
// actions, top operators (from a trace or a key_averages table) and kernels, the
// flame graph of folded stacks, ranks, the trace window (download or open in
// Perfetto), the on-demand capture control (capture.js) and the artifacts. Each
// card shows only when the rank has what it draws. A run waiting for its first
// capture (listed by a collector's poll, no upload yet) shows the capture control
// first.
import { api, apiBuffer, apiDelete, downloadLink, errorBox, follow, runUrl } from './api.js';
import { captureCard } from './capture.js';
import { distChart, memoryChart, memorySegments, memoryState, pathChart, stepChart } from './charts.js';
import { bySeverity, evidenceLabel, evidenceValue } from './evidence.js';
import { openInPerfetto } from './perfetto.js';
import { openInViewer } from './viewer.js';
import { actionsView, canaryView, gpuView, meanUtilization, readyOf, stacksView } from './formats.js';
import { nameCell, shortName, table } from './table.js';
import { CATEGORIES, card, fmtBytes, fmtDate, fmtInt, fmtNs, fmtPct, fmtSignedPct, h, label, ready,
	segmented, setCrumbs } from './util.js';

const TOP_N = 25;
const FETCH_MAX = 2000;	// the tables show TOP_N, the rest behind "show all" and the filter
const LIVE_MS = 3000;	// how often an open page asks whether the run changed
const PENDING_MS = 1000;	// how often while what joined is being analysed
const FOLLOW_MS = 10000;	// a run that keeps growing is drawn at least this often
let liveTimer = null;

// What changes when an upload lands or goes, or when the traces that joined are analysed:
// the page is drawn again when it does.
const signature = (info) => info.artifacts.map((a) => `${a.id}:${a.status}`).join(',') +
	(info.run.analysis_pending ? ' pending' : '');

// following: drawn again for live(), reading without waiting for the analysis (api.js follow);
// first: the run's and its ranks' reads when already asked for (main.js), else asked for here
export async function runPage(app, run, following = false, first = null) {
	clearTimeout(liveTimer);
	follow(following);
	setCrumbs(h('a', { href: '/', text: 'Runs' }), run);
	document.title = run + ' · Trainscope';
	let info, ranks;
	try {
		[info, ranks] = await (first || Promise.all([api(runUrl(run)), api(runUrl(run, '/ranks'))]));
	} catch (err) {
		app.replaceChildren(errorBox(err));
		return;
	}
	const params = new URLSearchParams(location.search);
	const rankList = ranks.ranks.map((r) => r.rank);
	const rank = rankList.includes(+params.get('rank')) ? +params.get('rank') : rankList[0] ?? 0;
	const hasTrace = info.artifacts.some((a) => a.kind === 'trace' && a.status === 'ready' && a.rank === rank);
	const devices = ranks.ranks.find((r) => r.rank === rank)?.memory_devices ?? [];
	const device = devices.includes(params.get('device')) ? params.get('device') : devices[0];
	const hasMemory = devices.length > 0;
	const stacks = readyOf(info, rank, 'stacks');
	const hasActions = readyOf(info, rank, 'lightning_report').length > 0;
	const hasGpu = readyOf(info, rank, 'gpu_log').length > 0;
	const hasOps = hasTrace || readyOf(info, rank, 'key_averages').length > 0;
	const hasCanary = readyOf(info, rank, 'canary_metrics').length > 0;
	/* findings come from traces and from the other profilers' files alike */
	const hasDiag = hasTrace || hasActions || hasGpu || hasCanary;

	const headline = h('div', { class: 'headline' });
	const stepsBox = h('div', { class: 'chart-box' });
	const memBox = h('div', { class: 'chart-box' });
	const peakBox = h('div', { id: 'peak-detail' });
	const segBox = h('div', { id: 'segments' });
	const opsBox = h('div');
	const gpuBox = h('div', { id: 'gpu' });
	const actionsBox = h('div', { id: 'actions' });
	const stacksBox = h('div', { id: 'stacks' });
	const canaryBox = h('div', { id: 'canary' });
	const kernelsBox = h('div');
	const diagBox = h('div');
	const traceBox = h('div');
	const wholeBox = h('div', { class: 'chart-box' });
	const cyclesBox = h('div');
	const distBox = h('div', { id: 'distributed' });
	const multi = rankList.length > 1 && info.artifacts.some((a) => a.kind === 'trace' && a.status === 'ready');

	const rankPicker = rankList.length > 1 ? h('label', { class: 'rank-pick' }, 'rank ',
		h('select', { onchange: (e) => { location.search = '?rank=' + e.target.value; } },
			rankList.map((r) => h('option', { value: r, selected: r === rank, text: r })))) : null;
	const devicePicker = devices.length > 1 ? h('label', { class: 'device-pick' }, 'device ',
		h('select', { onchange: (e) => { location.search = `?rank=${rank}&device=${e.target.value}`; } },
			devices.map((d) => h('option', { value: d, selected: d === device, text: d })))) : null;
	const meta = [info.run.project && h('span', { class: 'chip', text: info.run.project }),
		...info.run.tags.map((t) => h('span', { class: 'chip', text: t })),
		info.run.baseline && h('span', { class: 'chip base', text: 'baseline' })];

	const memCard = hasMemory && card('Memory timeline', h('div', { class: 'toolbar' }, h('p', { class: 'muted small', text: 'By category, with allocated and reserved. Drag to zoom, double-click to reset; click the peak for what was alive.' }), h('span', { class: 'spacer' }), devicePicker), memBox, peakBox);
	const segCard = hasMemory && card('Allocator segments at dump time', h('p', { class: 'muted small', text: 'What the caching allocator had reserved when the snapshot was taken: each segment, largest first, and the blocks in it. Hover a block for its size and who allocated it.' }), segBox);
	if (segCard)
		segCard.hidden = true;
	const deleteRun = h('button', { type: 'button', class: 'button small danger', text: 'Delete run',
		onclick: () => remove(deleteRun, `Delete run ${run} and its ${info.artifacts.length} artifact${info.artifacts.length === 1 ? '' : 's'}? This cannot be undone.`, runUrl(run)) });
	// the answer first: the headline numbers, the diagnosis, then the charts and tables behind it
	app.replaceChildren(...[
		h('div', { class: 'title' }, h('h1', { text: run }), ...meta, h('span', { class: 'spacer' }), rankPicker, deleteRun),
		headline,
		// listed by a collector's poll, nothing uploaded yet: the capture control first
		info.run.waiting_for_capture && named('waiting', card('Waiting for its first capture', h('p', { class: 'muted small',
			text: 'A collector started with --captures polls for this run, and nothing has been uploaded yet: ask for a capture below. Its trace lands here, and this page draws it.' }))),
		info.run.waiting_for_capture && captureCard(run),
		hasDiag && named('diagnosis', card('Diagnosis', diagBox)),
		hasTrace && named('steps', card('Step time by component', h('p', { class: 'muted small', text: 'Every instant of a step counted once, in the first of kernel, memcpy, memset, communication, runtime, dataloader, cpu that is active then; idle otherwise. GPU work counts in the step that launched it.' }), stepsBox)),
		hasTrace && named('whole-run', card('Whole run', h('p', { class: 'muted small', id: 'whole-run-note' }), wholeBox, cyclesBox)),
		named('memory', memCard),
		segCard,
		hasGpu && named('gpus', card('GPUs (nvidia-smi)', gpuBox)),
		hasActions && named('lightning', card('Lightning profiler', actionsBox)),
		hasCanary && named('canary-metrics', card('rlhf-canary metrics', canaryBox)),
		// full width each: kernel names need the room to stay told apart
		hasOps && named('operators', card('Top operators', opsBox)),
		hasTrace && named('kernels', card('Top GPU kernels', kernelsBox)),
		stacks.length && card('Stacks', stacksBox),
		ranks.ranks.length && named('ranks', card('Ranks', ranksTable(ranks, run))),
		multi && named('distributed-card', card('Distributed', h('p', { class: 'muted small', text: 'All ranks side by side. Each bar is one rank\'s step: computation alone, computation with communication under it (overlap), communication no computation hides, idle, and the rest (copies, host work). Collectives are matched across ranks by process group and sequence number (else their order); the rank that launches last makes the others wait.' }), distBox)),
		hasTrace && named('trace', card('Trace', traceBox)),
		!info.run.waiting_for_capture && captureCard(run),
		named('artifacts', card('Artifacts', artifactsTable(info.artifacts, run)))].filter(Boolean));

	// the headline from what is known already, drawn again once the cards' data is read
	const rankInfo = ranks.ranks.find((r) => r.rank === rank);
	const shown = multi ? { rank, of: rankList.length } : null;	/* the rank the headline shows, of a run of several */
	headline.replaceChildren(...headlines(rankInfo, [], null, info, null, shown));
	const load = async (box, f) => {
		try {
			await f();
		} catch (err) {
			box.replaceChildren(errorBox(err));
		}
	};
	let steps = [], mem = null, gpu = null;
	const timeline = hasTrace ? api(runUrl(run, '/timeline', { rank, points: 2000 })) : null;
	timeline?.catch(() => {});	/* answered in the cards that use it */
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
			// the segments of the rank's snapshots, also when the timeline drawn is another
			// source's (a trace's [memory] events or an export are preferred for it): asked for
			// with the timeline, drawn once it is in
			const snapshot = info.artifacts.some((a) => a.kind === 'memory_snapshot' && a.rank === rank && a.status === 'ready');
			const segments = (dev, artifact) => api(runUrl(run, '/memory/segments', { rank, device: dev, artifact }));
			const firstSegments = snapshot ? segments(device) : null;
			firstSegments?.catch(() => {});	/* answered in the segments card */
			await null;	/* the chart's width (a layout) read once the other cards' reads are asked for */
			mem = await api(runUrl(run, '/memory', { rank, device, points: Math.round(memBox.clientWidth) })).catch((err) => {
				if (err.code !== 'no_memory_data')
					throw err;
				memCard.remove();
				return null;
			});
			if (!mem)
				return;
			memBox.dataset.device = mem.device;
			let segmentsDrawn = null;
			if (mem.source === 'snapshot' || snapshot) {
				// a snapshot stored before segments were kept has none: no card then
				const names = Object.fromEntries(info.artifacts.map((a) => [a.id, a.name]));
				const draw = (artifact) => load(segBox, async () => {
					segCard.hidden = false;	/* an error shows in it */
					const seg = await ((artifact == null && mem.device === device && firstSegments) || segments(mem.device, artifact)).catch((err) => {
						if (err.code !== 'no_segments')
							throw err;
						return null;
					});
					segCard.hidden = !seg;
					if (seg)
						memorySegments(segBox, seg, { names, onPick: draw });
				});
				segmentsDrawn = draw();
			}
			if (mem.t_ns.length === 1 && mem.source === 'snapshot') {
				memoryState(memBox, mem);
				memCard.querySelector('p.muted').textContent = 'By category, inside what was reserved.';
			} else {
				memoryChart(memBox, mem, {
					onPeak: () => load(peakBox, () => showPeak(peakBox, run, rank, mem.device)),
					fetchWindow: (start_ns, end_ns, points) =>
						api(runUrl(run, '/memory', { rank, device: mem.device, points, start_ns, end_ns })),
				});
			}
			await segmentsDrawn;
		}),
		hasOps && load(opsBox, () => opsTable(opsBox, run, rank)),
		hasGpu && load(gpuBox, async () => { gpu = await gpuView(gpuBox, run, rank); }),
		hasActions && load(actionsBox, () => actionsView(actionsBox, run, rank, Object.fromEntries(info.artifacts.map((a) => [a.id, a.name])))),
		stacks.length && load(stacksBox, () => stacksView(stacksBox, run, rank, stacks)),
		hasTrace && load(kernelsBox, () => kernelsTable(kernelsBox, run, rank)),
		hasCanary && load(canaryBox, () => canaryView(canaryBox, run, rank)),
		hasDiag && load(diagBox, async () => diagnosis(diagBox, (await api(runUrl(run, '/diagnosis', { rank }))).findings)),
		hasTrace && load(wholeBox, async () => wholeRun(wholeBox, cyclesBox, await timeline)),
		multi && load(distBox, async () => distributed(distBox, run, await api(runUrl(run, '/distributed')))),
	]);
	headline.replaceChildren(...headlines(rankInfo, steps, mem, info, gpu, shown));
	linkEvidence(diagBox);
	ready(app);
	live(app, run, signature(info));
}

// Poll the run while the page is visible, and draw the page again, without waiting for an
// analysis, when an upload landed or went and what joined is analysed. Traces that joined
// are analysed in the background (asked for here, once per run at a time by the server) and
// polled for sooner; a run that keeps growing is drawn every FOLLOW_MS meanwhile, its
// analysis a little behind, and once more when it has caught up.
function live(app, run, sig) {
	const drawnAt = Date.now();
	const tick = async () => {
		let next = LIVE_MS;
		if (document.visibilityState === 'visible' && document.body.contains(app)) {
			try {
				const info = await api(runUrl(run));
				const now = signature(info);
				if (now !== sig && !info.run.analysis_pending)
					return runPage(app, run, true);
				if (info.run.analysis_pending) {
					await api(runUrl(run, '/ranks', { wait: 0 }));
					if (now !== sig && Date.now() - drawnAt >= FOLLOW_MS)
						return runPage(app, run, true);
					next = PENDING_MS;
				}
			} catch { /* the run went, or the server is away: the next tick tells */ }
		} else if (!document.body.contains(app)) {
			return;
		}
		liveTimer = setTimeout(tick, next);
	};
	liveTimer = setTimeout(tick, LIVE_MS);
}

// A card with an id, for the diagnosis's links to its evidence (card-ID); false stays false.
function named(id, section) {
	if (section)
		section.id = 'card-' + id;
	return section;
}

// The rank's whole training: every step across its cycles and chunks, and the cycles. A
// rank of one profiling cycle has the card hidden: the step chart above shows the same steps.
function wholeRun(box, cyclesBox, t) {
	const note = document.getElementById('whole-run-note');
	box.closest('section').hidden = t.cycles.length <= 1;
	if (note)
		note.textContent = `${fmtInt(t.steps_total)} steps in ${t.cycles.length} profiling cycle${t.cycles.length === 1 ? '' : 's'}` +
			(t.points < t.steps_total ? `; ${fmtInt(t.points)} shown, the slowest of each stretch` : '') + '.';
	if (!t.steps.length) {
		box.replaceChildren(h('p', { class: 'muted', text: 'No ProfilerStep spans in this rank.' }));
		return;
	}
	box.dataset.steps = t.steps_total;
	box.dataset.cycles = t.cycles.length;
	stepChart(box, t.steps);
	const endAlloc = (c) => t.steps.filter((s) => s.cycle === c.cycle && s.allocated_bytes != null).at(-1)?.allocated_bytes;
	cyclesBox.replaceChildren(table({
		sort: 'cycle', desc: false, rows: t.cycles.map((c) => ({ ...c, alloc: endAlloc(c) })),
		columns: [
			{ key: 'cycle', label: 'Cycle', num: true },
			{ key: 'first_step', label: 'Steps', num: true, fmt: (v, c) => `#${c.first_step}–#${c.last_step}` },
			{ key: 'steps', label: 'Count', num: true, fmt: fmtInt },
			{ key: 'start_ns', label: 'Starts', num: true, fmt: (v) => '+' + fmtNs(v - t.cycles[0].start_ns) },
			{ key: 'mean_step_ns', label: 'Mean step', num: true, fmt: fmtNs },
			{ key: 'alloc', label: 'Allocated at end', num: true, fmt: (v) => (v == null ? '–' : fmtBytes(v)) },
		],
	}).el);
}

function stat(title, value, sub) {
	return h('div', { class: 'stat' }, h('div', { class: 'stat-title', text: title }), h('div', { class: 'stat-value', text: value }),
		sub ? h('div', { class: 'stat-sub', text: sub }) : null);
}

// shown: {rank, of} on a run of several ranks, whose cards show one rank's figures (but Events')
function headlines(r, all, mem, info, gpu, shown) {
	const steps = all.filter((s) => !s.incomplete);	/* as the API's means */
	const dur = steps.reduce((a, s) => a + s.dur_ns, 0);
	const busy = steps.reduce((a, s) => a + (s.gpu_utilization_pct ?? 0) / 100 * s.dur_ns, 0);
	let dominant = null;
	if (mem?.peak)
		dominant = CATEGORIES.reduce((a, c) => (mem.peak.by_category[c] > mem.peak.by_category[a] ? c : a));
	const events = info.artifacts.reduce((a, x) => a + (x.events || 0), 0);
	const smi = meanUtilization(gpu);
	return [
		shown && stat('Rank', String(shown.rank), `of ${shown.of}: the cards show this rank's figures`),
		r?.steps && stat('Mean step', fmtNs(r.mean_ns), `${r.steps} steps`),
		r?.steps && stat('Median step', fmtNs(r.median_ns), `min ${fmtNs(r.min_ns)} · max ${fmtNs(r.max_ns)}`),
		dur && stat('GPU utilization', fmtPct(busy / dur), 'share of step time with a kernel running'),
		smi && stat('nvidia-smi utilization', fmtPct(smi.pct / 100), `mean over ${smi.gpus === 1 ? 'the log' : smi.gpus + ' GPUs'}`),
		stat('Peak memory', fmtBytes(mem?.peak?.bytes ?? info.run.peak_allocated_bytes),
			dominant ? `mostly ${label(dominant)} (${fmtPct(mem.peak.by_category[dominant] / mem.peak.bytes, 0)})` : null),
		stat('Events', fmtInt(events), `${info.artifacts.length} artifact${info.artifacts.length === 1 ? '' : 's'}`),
	].filter(Boolean);
}

// /ops's source, where the answer says it (a key_averages table when no trace covers the run)
const OPS_SOURCES = { trace: 'from the trace', key_averages: 'from a key_averages() table' };

async function opsTable(box, run, rank, device = 'cpu') {
	const ans = await api(runUrl(run, '/ops', { rank, device, limit: FETCH_MAX }));
	const total = ans.total.self_ns || 1;
	const t = table({
		sort: 'self_ns', rows: ans.ops, empty: 'No operators.', top: TOP_N, filter: ans.ops.length > TOP_N,
		columns: [
			{ key: 'name', label: 'Operator', name: true },
			{ key: 'calls', label: 'Calls', num: true, fmt: fmtInt },
			{ key: 'self_ns', label: device === 'gpu' ? 'GPU time' : 'Self', num: true, fmt: fmtNs },
			{ key: 'share', label: 'Share', num: true, value: (r) => r.self_ns / total, fmt: (v) => fmtPct(v) },
			{ key: 'total_ns', label: 'Total', num: true, fmt: fmtNs },
		],
	});
	box.replaceChildren(h('div', { class: 'toolbar' },
		segmented([['cpu', 'Host'], ['gpu', 'GPU']], device, (d) => opsTable(box, run, rank, d)),
		h('span', { class: 'muted small', text: `${fmtInt(ans.total.names)} operators, ${fmtNs(ans.total.self_ns)}` }),
		ans.source && h('span', { class: 'chip', id: 'ops-source', title: 'what these figures come from', text: OPS_SOURCES[ans.source] || label(ans.source) }),
		h('span', { class: 'spacer' }),
		downloadLink({ class: 'button small', href: runUrl(run, '/ops', { rank, device, format: 'csv' }), download: `${run}.ops.${device}.csv` }, 'CSV')),
	t.el);
}

async function kernelsTable(box, run, rank, kind = 'kernel') {
	const ans = await api(runUrl(run, '/kernels', { rank, kind, limit: FETCH_MAX }));
	const total = ans.total.total_ns || 1;
	const t = table({
		sort: 'total_ns', rows: ans.kernels, empty: 'None.', top: TOP_N, filter: ans.kernels.length > TOP_N,
		columns: [
			{ key: 'name', label: kind === 'kernel' ? 'Kernel' : label(kind), name: true },
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
		downloadLink({ class: 'button small', href: runUrl(run, '/kernels', { rank, kind, format: 'csv' }), download: `${run}.${kind}.csv` }, 'CSV')),
	t.el);
}

// Where on the page a finding's evidence is drawn, by its id (the cards of named()): the
// first of the list that the page has.
const EVIDENCE_CARDS = {
	low_gpu_utilization: ['steps'], cpu_bound: ['steps'], dataloader: ['steps'], step_drift: ['whole-run', 'steps'],
	exposed_communication: ['steps'], no_steps: ['trace'], no_gpu_activity: ['kernels'], no_trace: ['artifacts'],
	tiny_kernels: ['kernels'], memcpy_share: ['kernels'], gpu_sync: ['operators'],
	memory_growth: ['memory', 'whole-run'], memory_near_capacity: ['memory'],
	gpu_log_low_utilization: ['gpus'], gpu_log_memory_full: ['gpus'],
	collective_bandwidth_low: ['distributed-card', 'ranks'], compute_imbalance: ['distributed-card', 'ranks'],
	exposed_communication_ranks: ['distributed-card', 'ranks'], persistent_straggler: ['distributed-card', 'ranks'],
};
const evidenceCards = (id) => EVIDENCE_CARDS[id] || (id.startsWith('lightning_') ? ['lightning'] : id.startsWith('canary_') ? ['canary-metrics'] : []);

// Point the findings' links at the first of their cards that shows (cards hide as their data
// comes: the whole run of one cycle, a memory card with no data); a link with none is hidden.
function linkEvidence(box) {
	for (const a of box.querySelectorAll('a.evidence-link')) {
		const where = a.dataset.cards.split(' ').map((c) => document.getElementById('card-' + c)).find((el) => el && !el.hidden);
		a.hidden = !where;
		if (where) {
			a.href = '#' + where.id;
			a.textContent = 'Evidence: ' + where.querySelector('h2').textContent + ' ↓';
		}
	}
}
const TOP_FINDINGS = 3;

// The findings, most severe first: the first TOP_FINDINGS open, the rest folded under "N more".
function diagnosis(box, findings) {
	if (!findings.length) {
		box.replaceChildren(h('p', { class: 'good', text: 'Nothing to report: no rule fired on this rank.' }));
		return;
	}
	const article = (f) => h('article', { class: 'finding ' + f.severity, 'data-id': f.id },
		h('div', { class: 'finding-head' }, h('span', { class: 'sev ' + f.severity, text: f.severity }), h('h3', { text: f.title }),
			h('span', { class: 'spacer' }),
			evidenceCards(f.id).length > 0 && h('a', { class: 'evidence-link small', 'data-cards': evidenceCards(f.id).join(' ') })),
		h('p', { class: 'advice', text: f.advice }),
		h('dl', { class: 'evidence' }, Object.entries(f.evidence || {}).map(([k, v]) =>
			[h('dt', { text: evidenceLabel(k) }), h('dd', { text: evidenceValue(k, v) })])));
	const sorted = bySeverity(findings);
	const rest = sorted.slice(TOP_FINDINGS);
	box.replaceChildren(...sorted.slice(0, TOP_FINDINGS).map(article),
		...(rest.length ? [h('details', { class: 'more-findings' }, h('summary', { text: `${rest.length} more` }), rest.map(article))] : []));
	linkEvidence(box);
}

// The Distributed card: bars per rank and step, the collectives, who arrived last, lateness by rank and step.
function distributed(box, run, d) {
	const chart = h('div', { class: 'chart-box' });
	const st = d.stragglers;
	// the API's GB/s (bytes per ns) in the page's binary units: GiB/s, MiB/s
	const gbps = (v) => (v == null ? '' : fmtBytes(v * 1e9) + '/s');
	const colls = table({
		sort: 'time_ns', rows: d.collectives, empty: 'No collectives in these traces.',
		columns: [
			{ key: 'rank', label: 'Rank', num: true },
			{ key: 'kind', label: 'Collective' },
			{ key: 'pg', label: 'Group', fmt: (v, r) => (v || '–') + (r.group_size ? ` (${r.group_size})` : '') },
			{ key: 'calls', label: 'Calls', num: true, fmt: fmtInt },
			{ key: 'bytes', label: 'Bytes', num: true, fmt: (v) => (v == null ? '' : fmtBytes(v)) },
			{ key: 'time_ns', label: 'Time', num: true, fmt: fmtNs },
			{ key: 'algbw_gbps', label: 'Alg bw', num: true, fmt: gbps },
			{ key: 'busbw_gbps', label: 'Bus bw', num: true, fmt: gbps },
		],
	});
	const byRank = table({
		sort: 'last_arrival_pct', rows: st.by_rank, empty: 'No collective was seen on two ranks.',
		columns: [
			{ key: 'rank', label: 'Rank', num: true, fmt: (v) => h('a', { href: `/runs/${encodeURIComponent(run)}?rank=${v}`, text: v }) },
			{ key: 'matched', label: 'Matched', num: true, fmt: fmtInt },
			{ key: 'last_arrivals', label: 'Last', num: true, fmt: fmtInt },
			{ key: 'last_arrival_pct', label: 'Last %', num: true, fmt: (v) => (v == null ? '' : fmtPct(v / 100)) },
			{ key: 'wait_caused_ns', label: 'Wait caused', num: true, fmt: fmtNs },
			{ key: 'wait_ns', label: 'Waited', num: true, fmt: fmtNs },
		],
	});
	const slow = table({
		sort: 'step', desc: false, rows: st.steps, empty: 'No steps.',
		columns: [
			{ key: 'step', label: 'Step', num: true },
			{ key: 'slowest_rank', label: 'Slowest rank', num: true },
			{ key: 'dur_ns', label: 'Its step', num: true, fmt: fmtNs },
			{ key: 'fastest_rank', label: 'Fastest rank', num: true },
			{ key: 'fastest_dur_ns', label: 'Its step', num: true, fmt: fmtNs },
		],
	});
	box.replaceChildren(chart, h('h3', { text: 'Collectives' }), colls.el,
		h('h3', { text: 'Who arrives last' }), byRank.el, clocks(d), lateness(d),
		h('h3', { text: 'Slowest rank per step' }), slow.el, criticalPath(run, st.steps));
	if (d.ranks.some((r) => r.steps.length))
		distChart(chart, d);
	else
		chart.replaceChildren(h('p', { class: 'muted', text: 'No steps.' }));
}

// Each rank's clock offset from the reference rank's, as /distributed estimated and applied it.
function clocks(d) {
	const ref = d.clock?.reference_rank;
	const est = d.ranks.filter((r) => r.rank !== ref && r.clock_collectives > 0);
	const sign = (ns) => (ns < 0 ? '−' : '+') + fmtNs(Math.abs(ns));
	const text = est.length ? `Clocks aligned on rank ${ref}'s from the collectives' ends: ` +
		est.map((r) => `rank ${r.rank} ${sign(r.clock_offset_ns)} (${fmtInt(r.clock_collectives)} collectives)`).join(', ') + '.' : '';
	return text || d.clock?.note ? h('p', { class: 'muted small', id: 'clock-offsets', text: [text, d.clock?.note ? d.clock.note + '.' : ''].filter(Boolean).join(' ') }) : null;
}

// the kinds of the critical path in words
const KIND_WORDS = { cpu_op: 'host operators', runtime: 'runtime calls', sync: 'synchronizations', kernel: 'kernels',
	memcpy: 'copies', memset: 'memsets', collective: 'collectives', idle: 'idle time', host_gap: 'host gap (no operator running)' };

// The largest contributor to the path by rank and kind (idle last), its largest category's name
// (none for gaps), and the next one: {rank, kind, ns, name, next}.
function pathTop(cp) {
	const by = new Map();
	for (const s of cp.segments) {
		const k = `${s.rank}:${s.kind}`;
		const e = by.get(k) || { rank: s.rank, kind: s.kind, ns: 0 };
		e.ns += s.dur_ns;
		by.set(k, e);
	}
	const order = [...by.values()].sort((a, b) => ((a.kind === 'idle') - (b.kind === 'idle')) || b.ns - a.ns || a.rank - b.rank);
	if (!order.length)
		return null;
	const top = order[0];
	const cat = cp.by_category.find((c) => c.rank === top.rank && c.kind === top.kind && c.name);
	return { ...top, name: cat?.name ?? '', next: order[1] && order[1].kind !== 'idle' ? order[1] : null };
}

// The critical path of a chosen step (the slowest first) over the ranks' timelines, with what
// took its time: GET /critical_path?step=N.
function criticalPath(run, steps) {
	const numbered = steps.filter((s) => s.step != null);
	if (!numbered.length)
		return null;
	const slowest = numbered.reduce((a, b) => (b.dur_ns > a.dur_ns ? b : a));
	const pick = h('select', { id: 'critical-step', 'aria-label': 'step' }, numbered.map((s) =>
		h('option', { value: s.step, text: '#' + s.step, selected: s === slowest })));
	const head = h('p', { class: 'path-head' });
	const chart = h('div', { id: 'critical-path', class: 'path-box' });
	const cats = h('div');
	const show = async () => {
		const step = pick.value;
		delete chart.dataset.step;
		try {
			const cp = await api(runUrl(run, '/critical_path', { step }));
			const top = pathTop(cp);
			head.title = top?.name ?? '';
			head.textContent = top ? `${fmtPct(top.ns / cp.dur_ns)} of step ${cp.step}'s critical path (${fmtNs(cp.dur_ns)}) was rank ${top.rank}'s ${KIND_WORDS[top.kind] || top.kind}` +
				(top.name ? `, most of it ${shortName(top.name)}` : '') +
				(top.next ? `; then rank ${top.next.rank}'s ${KIND_WORDS[top.next.kind] || top.next.kind}, ${fmtPct(top.next.ns / cp.dur_ns)}` : '') +
				(cp.segments.some((x) => x.kind === 'collective' && x.rank !== top.rank) && top.kind !== 'collective' ? ', waited on by the others in their collectives.' : '.') : '';
			pathChart(chart, cp);
			cats.replaceChildren(table({
				sort: 'ns', rows: cp.by_category, empty: 'Nothing on the path.',
				columns: [
					{ key: 'rank', label: 'Rank', num: true },
					{ key: 'kind', label: 'Kind' },
					{ key: 'name', label: 'Name', fmt: (v) => nameCell(v) },
					{ key: 'ns', label: 'Time', num: true, fmt: fmtNs },
					{ key: 'pct', label: 'Of the path', num: true, fmt: (v) => fmtPct(v / 100) },
				],
			}).el);
			chart.dataset.step = cp.step;
		} catch (err) {
			chart.replaceChildren(errorBox(err));
			chart.dataset.step = step;
		}
	};
	pick.addEventListener('change', show);
	show();
	return h('div', null, h('h3', { text: 'Critical path' }),
		h('p', { class: 'muted small', text: 'The chain of host operators, launches, kernels, copies, synchronizations and collectives that bounds the step across all ranks, walked back from the last event to end: a collective waits for its last rank\'s arrival, a kernel for its launch and its stream, a synchronization for the GPU work before it, a thread idle before an event for the thread that handed it the work. A host gap is time the rank ran no operator at all (a sleep, data loading outside the profiler). Each rank\'s times are on the lowest rank\'s clock (the offset estimated from the collectives).' }),
		h('label', { class: 'small' }, 'Step ', pick), head, chart, cats);
}

// Rank by step: how late each rank launched its collectives (after the first rank), summed.
function lateness(d) {
	const late = new Map(), steps = new Set();
	for (const inst of d.stragglers.instances) {
		if (inst.step == null)
			continue;
		steps.add(inst.step);
		const first = Math.min(...inst.ranks.map((r) => r.launch_ns));
		for (const r of inst.ranks) {
			const k = `${r.rank}:${inst.step}`;
			late.set(k, (late.get(k) || 0) + r.launch_ns - first);
		}
	}
	if (!steps.size)
		return null;
	const cols = [...steps].sort((a, b) => a - b);
	const max = Math.max(1, ...late.values());
	return h('div', { class: 'table-wrap' }, h('table', { class: 'data heat', id: 'lateness' },
		h('caption', { class: 'muted small', text: 'Arrival lateness: per rank and step, how much later than the first rank it launched its matched collectives (summed).' }),
		h('thead', null, h('tr', null, h('th', { text: 'rank \\ step' }), cols.map((s) => h('th', { class: 'num', text: '#' + s })))),
		h('tbody', null, d.ranks.map((r) => h('tr', null, h('th', { text: r.rank }), cols.map((s) => {
			const v = late.get(`${r.rank}:${s}`);
			const td = h('td', { class: 'num', text: v == null ? '' : fmtNs(v), 'data-ns': v ?? '' });
			if (v)	/* through the CSSOM: the page's CSP refuses style attributes */
				td.style.background = `rgba(220, 38, 38, ${(0.1 + 0.6 * v / max).toFixed(2)})`;
			return td;
		}))))));
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
		sort: 'created_ns', desc: false, rows: artifacts,
		columns: [
			{ key: 'name', label: 'File', fmt: (v, a) => downloadLink({ href: runUrl(run, `/artifacts/${a.id}/raw`), download: v }, v) },
			{ key: 'kind', label: 'Kind', fmt: label },
			{ key: 'rank', label: 'Rank', num: true },
			{ key: 'bytes', label: 'Size', num: true, fmt: fmtBytes },
			{ key: 'events', label: 'Events', num: true, fmt: fmtInt },
			{ key: 'status', label: 'Status', fmt: (v, a) => h('span', { class: 'chip ' + (v === 'ready' ? 'ok' : 'bad'), title: a.error?.message, text: v }) },
			{ key: 'created_ns', label: 'Uploaded', num: true, sortBy: (a) => a.id, fmt: fmtDate },
			{ key: 'delete', label: '', sortable: false, fmt: (v, a) => {
				const b = h('button', { type: 'button', class: 'button small danger', 'aria-label': `delete ${a.name}`, text: 'Delete',
					onclick: () => remove(b, `Delete ${a.name} (${a.kind}, rank ${a.rank}) from run ${run}? Its answers go with it.`,
						runUrl(run, `/artifacts/${a.id}`)) });
				return b;
			} },
		],
	}).el;
}

// DELETE url once confirmed; then the page again (the runs list when the run went).
async function remove(button, question, url) {
	if (!confirm(question))
		return;
	button.disabled = true;
	try {
		const ans = await apiDelete(url);
		if (ans.run_deleted)
			location.href = '/';
		else
			location.reload();
	} catch (err) {
		button.disabled = false;
		button.replaceWith(button, h('span', { class: 'bad small', role: 'alert', text: err.status === 401 ? 'a write token is needed' : err.message }));
	}
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
				{ key: 'op', label: 'Allocated by', name: true, fmt: (v) => (v == null ? h('span', { class: 'muted', text: peak.source === 'trace' ? 'before the trace' : 'not recorded' }) : nameCell(v)) },
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
	const link = downloadLink({ class: 'button' }, 'Download trace');
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
	const title = () => `${run} rank ${rank}${from.value === '' ? '' : ` steps ${from.selectedOptions[0].text}-${to.selectedOptions[0].text}`}`;
	const viewer = h('button', { type: 'button', class: 'button', id: 'open-viewer', title: 'speedscope, served by this server: works offline',
		onclick: () => openInViewer(() => apiBuffer(link.href), title(), note) }, 'Open in viewer');
	const perfetto = h('button', { type: 'button', class: 'button ghost', title: 'ui.perfetto.dev: needs the internet',
		onclick: () => openInPerfetto(() => apiBuffer(link.href), title(), note) }, 'Open in Perfetto');
	box.replaceChildren(h('div', { class: 'toolbar' }, 'Steps', from, 'to', to, note, h('span', { class: 'spacer' }), link, viewer, perfetto));
}
