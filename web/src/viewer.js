// Opens the offline trace viewer (speedscope, bundled and served by this
// server at /viewer/) on a trace window. The tab is opened inside the click, so
// that popup blockers let it through; the trace is fetched with the page's
// token meanwhile and handed over as a blob: URL (#profileURL=), so the viewer
// needs neither the network nor the token. prepare(bytes): what the viewer gets (folded
// stacks give their text as it is; speedscope tells the formats apart by content). A
// trace opens on its busiest thread (busiestFirst below).
export function openInViewer(fetchTrace, title, note, prepare = forSpeedscope) {
	const win = window.open('', '_blank');
	if (!win) {
		note.textContent = 'The browser blocked the new tab: allow pop-ups for this page.';
		return;
	}
	win.document.title = 'Loading…';
	note.textContent = 'fetching…';
	fetchTrace().then((b) => {
		const url = URL.createObjectURL(new Blob([prepare(b)]));
		// the viewer reads it at once; the blob lives as long as this page, or ten minutes
		setTimeout(() => URL.revokeObjectURL(url), 600000);
		win.location.href = `/viewer/index.html#profileURL=${encodeURIComponent(url)}&title=${encodeURIComponent(title)}`;
		note.textContent = `${((b.byteLength ?? b.length) / 1048576).toFixed(1)} MiB opened in the viewer`;
	}, (err) => {
		win.close();
		note.textContent = 'could not fetch it: ' + err.message;
	});
}

// speedscope groups events by Number(pid), Number(tid) in one place and by the
// raw values in another, so the string ids PyTorch writes ("Spans", "stream 7")
// lose their events ("Could not find events for key"): give each string id a
// number, and its string as the process or thread name when it has none.
export function forSpeedscope(buffer) {
	const trace = JSON.parse(new TextDecoder().decode(buffer));
	const events = Array.isArray(trace) ? trace : trace.traceEvents || [];
	const ids = new Map(), named = new Set(), meta = [];
	const num = (v) => {
		if (typeof v === 'number' || v == null)
			return v;
		if (!ids.has(v))
			ids.set(v, /^-?\d+$/.test(v) ? +v : 1e9 + ids.size);
		return ids.get(v);
	};
	for (const e of events) {
		const pid = e.pid, tid = e.tid;
		e.pid = num(pid);
		e.tid = num(tid);
		if (e.ph === 'M' && (e.name === 'process_name' || e.name === 'thread_name'))
			named.add(`${e.name}:${e.pid}:${e.name === 'thread_name' ? e.tid : ''}`);
		if (typeof pid === 'string' && !/^-?\d+$/.test(pid))
			meta.push({ ph: 'M', name: 'process_name', pid: e.pid, tid: 0, args: { name: pid } });
		if (typeof tid === 'string' && !/^-?\d+$/.test(tid))
			meta.push({ ph: 'M', name: 'thread_name', pid: e.pid, tid: e.tid, args: { name: tid } });
	}
	const seen = new Set();
	for (const m of meta) {
		const key = `${m.name}:${m.pid}:${m.name === 'thread_name' ? m.tid : ''}`;
		if (!named.has(key) && !seen.has(key)) {
			seen.add(key);
			events.push(m);
		}
	}
	busiestFirst(events);
	return JSON.stringify(Array.isArray(trace) ? events : { ...trace, traceEvents: events });
}

// speedscope opens on the first of its profiles (one per pid and tid) in the order of
// its key, "pid:tid" with each number zero-padded to 10 characters; a GPU trace's first
// is often pid -1's "Command Buffer Full" markers. So the thread with the most work (the
// longest busy time, its complete events' union; a thread of one event, the profiler's
// whole-trace span, does not count) trades its pid with the pid that sorts first, and its
// tid with its process's first tid. The names go with their ids (metadata events trade too).
function busiestFirst(events) {
	const key = (v) => String(v).padStart(10, '0');
	const spans = new Map();
	for (const e of events)
		if (e.ph === 'X' && e.dur > 0 && typeof e.pid === 'number' && typeof e.tid === 'number') {
			const k = e.pid + ':' + e.tid;
			(spans.get(k) || spans.set(k, []).get(k)).push([+e.ts, +e.ts + +e.dur]);
		}
	let best = null, bestBusy = 0;
	for (const [k, list] of spans) {
		if (list.length < 2)
			continue;
		list.sort((a, b) => a[0] - b[0]);
		let busy = 0, end = -Infinity;
		for (const [s, e] of list) {
			busy += Math.max(0, e - Math.max(s, end));
			end = Math.max(end, e);
		}
		if (busy > bestBusy)
			[best, bestBusy] = [k, busy];
	}
	if (!best)
		return;
	const [pid, tid] = best.split(':').map(Number);
	const first = (list) => list.reduce((a, b) => (key(b) < key(a) ? b : a));
	const swap = (field, a, b, only) => {
		if (a !== b)
			for (const e of events)
				if (!only || only(e))
					e[field] = e[field] === a ? b : e[field] === b ? a : e[field];
	};
	const withTimes = events.filter((e) => e.ph === 'X' || e.ph === 'B' || e.ph === 'E');
	swap('pid', pid, first(withTimes.map((e) => e.pid)));
	const firstPid = first(withTimes.map((e) => e.pid));
	swap('tid', tid, first(withTimes.filter((e) => e.pid === firstPid).map((e) => e.tid)), (e) => e.pid === firstPid);
}
