// The runs page (/): every run, filtered by project and text, sorted by any
// column; tick two to compare them. Refreshed every few seconds while visible.
import { api, errorBox } from './api.js';
import { table } from './table.js';
import { card, fmtBytes, fmtDate, fmtInt, fmtNs, h, ready, setCrumbs } from './util.js';

const REFRESH_MS = 5000;

export async function runsPage(app) {
	setCrumbs('Runs');
	const selected = new Set();
	let runs = [];
	const project = h('select', { 'aria-label': 'project' });
	const text = h('input', { type: 'search', placeholder: 'Filter by name, project or tag', 'aria-label': 'filter' });
	const compare = h('a', { class: 'button disabled', id: 'compare', text: 'Compare selected' });
	const hint = h('span', { class: 'muted' });
	const updated = h('span', { class: 'muted small' });
	const status = h('div');

	const t = table({
		sort: 'created_ns',
		empty: 'No runs yet. Upload a trace: curl --data-binary @trace.json.gz "http://HOST/api/v1/runs/NAME/artifacts?rank=0&name=trace.json.gz"',
		rowClass: (r) => (selected.has(r.name) ? 'selected' : null),
		columns: [
			{ key: 'pick', label: '', sortable: false, value: () => null,
				fmt: (v, r) => h('input', { type: 'checkbox', 'aria-label': 'select ' + r.name, checked: selected.has(r.name),
					onchange: (e) => { e.target.checked ? selected.add(r.name) : selected.delete(r.name); render(); } }) },
			{ key: 'name', label: 'Run', fmt: (v, r) => h('span', null, h('a', { href: '/runs/' + encodeURIComponent(v), text: v }),
				r.baseline ? h('span', { class: 'chip base', text: 'baseline' }) : null,
				// listed by a collector's poll (--captures), nothing uploaded yet
				r.waiting_for_capture ? h('span', { class: 'chip pending', text: 'waiting for first capture',
					title: 'a collector started with --captures polls for this run: open it to ask for a capture' }) : null) },
			{ key: 'project', label: 'Project' },
			{ key: 'tags', label: 'Tags', value: (r) => r.tags.join(' ') || null,
				fmt: (v, r) => r.tags.map((tag) => h('span', { class: 'chip', text: tag })) },
			{ key: 'created_ns', label: 'Created', num: true, fmt: fmtDate },
			{ key: 'ranks', label: 'Ranks', num: true, fmt: fmtInt },
			// traces joined since the run's analysis: its figures are the analysis as it stands (the
			// list derives nothing; opening the run does)
			{ key: 'steps', label: 'Steps', num: true, fmt: (v, r) => (r.analysis_pending
				? h('span', null, fmtInt(v), h('span', { class: 'chip pending', text: 'pending',
					title: 'traces joined since this run was analysed: open it to analyse them' }))
				: fmtInt(v)) },
			{ key: 'step', label: 'Mean step', num: true, value: (r) => r.step_time_ns.mean, fmt: fmtNs },
			{ key: 'peak_allocated_bytes', label: 'Peak memory', num: true, fmt: fmtBytes },
		],
		rows: [],
	});

	function visible() {
		const p = project.value, q = text.value.trim().toLowerCase();
		return runs.filter((r) => (!p || r.project === p) &&
			(!q || [r.name, r.project || '', ...r.tags].some((s) => s.toLowerCase().includes(q))));
	}

	function render() {
		const projects = [...new Set(runs.map((r) => r.project).filter(Boolean))].sort();
		const keep = project.value;
		project.replaceChildren(h('option', { value: '', text: 'All projects' }),
			...projects.map((p) => h('option', { value: p, text: p })));
		project.value = projects.includes(keep) ? keep : '';
		for (const name of selected)
			if (!runs.some((r) => r.name === name))
				selected.delete(name);
		t.setRows(visible());
		const pick = runs.filter((r) => selected.has(r.name));
		if (pick.length === 2) {
			// the baseline (else the older run) is the base
			pick.sort((a, b) => (b.baseline - a.baseline) || (a.created_ns - b.created_ns));
			compare.href = `/compare?base=${encodeURIComponent(pick[0].name)}&target=${encodeURIComponent(pick[1].name)}`;
			compare.className = 'button';
			hint.textContent = `${pick[0].name} → ${pick[1].name}`;
		} else {
			compare.removeAttribute('href');
			compare.className = 'button disabled';
			hint.textContent = 'Tick two runs to compare them.';
		}
	}

	async function refresh() {
		try {
			runs = (await api('/api/v1/runs')).runs;
			status.replaceChildren();
			t.el.hidden = false;
			updated.textContent = 'updated ' + new Date().toLocaleTimeString();
			render();
		} catch (err) {
			status.replaceChildren(errorBox(err));
			// a list that could not be read is not an empty one: no "No runs yet" under the error
			t.el.hidden = !runs.length;
		}
	}

	// poll only while the page is visible; catch up at once when it shows again
	let timer = null;
	const schedule = () => {
		clearTimeout(timer);
		if (document.visibilityState === 'visible')
			timer = setTimeout(() => refresh().then(schedule), REFRESH_MS);
	};
	document.addEventListener('visibilitychange', () => {
		if (document.visibilityState === 'visible')
			refresh().then(schedule);
		else
			clearTimeout(timer);
	});

	project.addEventListener('change', render);
	text.addEventListener('input', render);
	app.replaceChildren(card('Runs',
		h('div', { class: 'toolbar' }, project, text, h('span', { class: 'spacer' }), hint, compare),
		status, t.el, h('p', { class: 'foot' }, updated)));
	await refresh();
	ready(app);
	schedule();
}
