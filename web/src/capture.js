// The run page's on-demand capture card (issue 52, docs/api.md "Captures"):
// "Capture next N steps" of the ranks asked for, with the activities ticked,
// and the run's captures with their states, read again every 2 s while any is
// pending or running (every 10 s otherwise, while a collector polls for the
// run), with when a collector last polled ("collector seen N s ago"). The
// collectors that run with --captures take them (docs/collector.md). The POST carries the token this browser keeps (api.js);
// a server that refuses it (401, or 403 for a read token) gets a write token
// field here, kept like the read token once it is used.
import { ApiError, api, apiPost, keepToken, runUrl } from './api.js';
import { card, fmtDate, h } from './util.js';

const REFRESH_MS = 2000;
const SEEN_MS = 10000;	// how often "collector seen N s ago" is read again (the server stamps every 10 s)
const ACTIVITIES = ['cpu', 'cuda', 'memory', 'stacks'];
const LIVE_STATES = new Set(['pending', 'running']);

// one card per run, kept across the page's redraws (an upload redraws it): what is typed stays
let kept = null;

export function captureCard(run) {
	if (kept?.run === run) {
		kept.refresh();	/* a redraw: an upload may have been a capture's */
		return kept.el;
	}
	clearTimeout(kept?.timer);
	const list = h('div', { id: 'capture-list' });
	const status = h('p', { class: 'small', id: 'capture-status', role: 'status' });
	const seen = h('p', { class: 'muted small', id: 'capture-seen' });
	const steps = h('input', { type: 'number', min: 1, max: 10000, value: 10, required: true, id: 'capture-steps',
		'aria-label': 'steps to capture', class: 'num-input' });
	const ranks = h('input', { type: 'text', value: 'all', id: 'capture-ranks', size: 10, 'aria-label': 'ranks',
		title: 'all, or rank numbers separated by commas' });
	const boxes = ACTIVITIES.map((a) => h('input', { type: 'checkbox', value: a, checked: a === 'cpu' || a === 'cuda',
		'aria-label': a }));
	const button = h('button', { type: 'submit', class: 'button small', id: 'capture-go', text: 'Capture' });
	const tokenRow = h('span', { class: 'token', hidden: true });
	const form = h('form', { id: 'capture-form', onsubmit: (e) => { e.preventDefault(); submit(); } },
		'Capture next ', steps, ' steps of ranks ', ranks, ' ',
		boxes.map((b) => h('label', { class: 'small' }, b, ' ', b.value)), ' ', button, ' ', tokenRow);
	const el = card('On-demand capture',
		h('p', { class: 'muted small', text: 'Profile the next steps of this run while it trains: the collectors started with --captures take the request, and the trace lands here as one more profiling cycle of each rank.' }),
		seen, form, status, list);
	el.id = 'card-capture';
	kept = { run, el, timer: null, refresh: () => refresh() };

	async function submit() {
		const body = { steps: +steps.value, activities: boxes.filter((b) => b.checked).map((b) => b.value),
			requested_by: 'run page' };
		const r = ranks.value.trim();
		if (r && r !== 'all')
			body.ranks = r.split(/[\s,]+/).filter(Boolean).map(Number);
		button.disabled = true;
		try {
			const ans = await apiPost(runUrl(run, '/captures'), body);
			status.className = 'small';
			status.textContent = `Capture ${ans.capture.id} asked for: pending until a collector takes it.`;
			tokenRow.hidden = true;
			refresh();
		} catch (err) {
			status.className = 'bad small';
			status.textContent = err instanceof ApiError && (err.status === 401 || err.status === 403)
				? `A write token is needed (${err.message}).` : err.message;
			if (err instanceof ApiError && (err.status === 401 || err.status === 403))
				askToken();
		} finally {
			button.disabled = false;
		}
	}

	function askToken() {
		const input = h('input', { type: 'password', placeholder: 'write token', autocomplete: 'off', 'aria-label': 'write token', id: 'capture-token' });
		const use = h('button', { type: 'button', class: 'button small', text: 'Use token and capture',
			onclick: () => { keepToken(input.value.trim()); submit(); } });
		tokenRow.replaceChildren(input, use);
		tokenRow.hidden = false;
	}

	async function refresh() {
		clearTimeout(kept?.timer);
		let caps = [], polled = null;
		try {
			({ captures: caps, polled } = await api(runUrl(run, '/captures')));
		} catch (err) {
			list.replaceChildren(h('p', { class: 'bad small', text: err.message }));
			return;
		}
		seen.textContent = polled ? `Collector seen ${fmtAgo(polled.ago_s)} ago.`
			: 'No collector has polled for this run: start one with trainscope-collect run --captures (or watch --captures).';
		seen.className = polled && polled.ago_s > 120 ? 'bad small' : 'muted small';
		list.replaceChildren(caps.length ? captureTable(caps) : h('p', { class: 'muted small', text: 'No captures asked for yet.' }));
		if (document.body.contains(el) && (caps.some((c) => LIVE_STATES.has(c.state)) || polled))
			kept.timer = setTimeout(refresh, caps.some((c) => LIVE_STATES.has(c.state)) ? REFRESH_MS : SEEN_MS);
	}
	refresh();
	return el;
}

// 42 s, 3 min, 2 h
const fmtAgo = (s) => (s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`);

const chipClass = (state) => (state === 'done' ? 'chip ok' : state === 'failed' || state === 'expired' ? 'chip bad' : 'chip');

function captureTable(caps) {
	return h('div', { class: 'table-wrap' }, h('table', { class: 'data', id: 'captures' },
		h('thead', null, h('tr', null, ['Capture', 'Asked', 'What', 'Ranks', 'State', 'By rank'].map((t) => h('th', { text: t })))),
		h('tbody', null, caps.map((c) => h('tr', { 'data-id': c.id, 'data-state': c.state },
			h('td', { class: 'num', text: c.id }),
			h('td', { text: fmtDate(c.created_at * 1e9), title: c.requested_by ?? '' }),
			h('td', { text: (c.steps ? `${c.steps} steps` : `${c.seconds} s`) + ' · ' + c.activities.join(', ') }),
			h('td', { text: c.ranks === 'all' ? 'all' : c.ranks.join(', ') }),
			h('td', null, h('span', { class: chipClass(c.state), text: c.state })),
			h('td', null, c.by_rank.length ? c.by_rank.map((p) => h('span', { class: chipClass(p.state), title: p.reason ?? '',
				text: `${p.rank}: ${p.state}${p.artifacts.length ? ` (${p.artifacts.length} file${p.artifacts.length === 1 ? '' : 's'})` : ''}` }))
				: h('span', { class: 'muted small', text: '—' })))))));
}
