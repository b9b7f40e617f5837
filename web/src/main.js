// The dashboards' first script: loads the page the path names (a module of its own each, so a
// page compiles only the code it draws with). The styles are all here, in the one stylesheet
// index.html links.
import './style.css';
import 'uplot/dist/uPlot.min.css';
import '../node_modules/d3-flame-graph/dist/d3-flamegraph.css';
import { api, errorBox, runUrl } from './api.js';

const app = document.getElementById('app');
const path = location.pathname;
const m = path.match(/^\/runs\/([^/]+)$/);
const page = (load, draw) => load.then(draw, (err) => app.replaceChildren(errorBox(err)));
if (m) {
	const run = decodeURIComponent(m[1]);
	// the run and its ranks asked for while the page's module loads
	const first = Promise.all([api(runUrl(run)), api(runUrl(run, '/ranks'))]);
	first.catch(() => {});	/* answered by runPage */
	page(import('./run.js'), ({ runPage }) => runPage(app, run, false, first));
} else if (path === '/compare') {
	page(import('./compare.js'), ({ comparePage }) => comparePage(app));
} else {
	page(import('./runs.js'), ({ runsPage }) => runsPage(app));
}
