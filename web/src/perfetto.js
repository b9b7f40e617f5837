// Opens the Perfetto UI in a new tab and hands it a trace, as Perfetto
// documents (docs/visualization/deep-linking-to-perfetto-ui.md): open
// ui.perfetto.dev, post 'PING' until it answers 'PONG', then post
// {perfetto: {buffer, title}}. The tab is opened first, inside the click,
// so that popup blockers let it through; the trace is fetched meanwhile.
// Perfetto silent for TIMEOUT_MS: a message that points to the offline viewer.
const ORIGIN = 'https://ui.perfetto.dev';
const TIMEOUT_MS = 15000;

export function openInPerfetto(fetchTrace, title, note) {
	const win = window.open(ORIGIN);
	if (!win) {
		note.textContent = 'The browser blocked the new tab: allow pop-ups for this page.';
		return;
	}
	note.textContent = 'fetching the trace…';
	let ready = false, buffer = null, timer = null;
	const send = () => {
		if (ready && buffer) {
			win.postMessage({ perfetto: { buffer, title, url: location.href } }, ORIGIN);
			note.textContent = 'sent to Perfetto';
		}
	};
	const onMessage = (e) => {
		if (e.origin !== ORIGIN || e.data !== 'PONG')
			return;
		ready = true;
		clearInterval(timer);
		window.removeEventListener('message', onMessage);
		send();
	};
	window.addEventListener('message', onMessage);
	timer = setInterval(() => win.postMessage('PING', ORIGIN), 50);
	// offline or blocked, Perfetto never answers: say so rather than wait forever
	setTimeout(() => {
		if (ready)
			return;
		clearInterval(timer);
		window.removeEventListener('message', onMessage);
		note.textContent = `Perfetto did not answer in ${TIMEOUT_MS / 1000} s (no internet here?): use "Open in viewer", which works offline, or download the trace.`;
	}, TIMEOUT_MS);
	fetchTrace().then((b) => {
		buffer = b;
		note.textContent = `${(b.byteLength / 1048576).toFixed(1)} MiB fetched, waiting for Perfetto…`;
		send();
	}, (err) => {
		clearInterval(timer);
		note.textContent = 'could not fetch the trace: ' + err.message;
	});
}
