// The dashboards' one script: draws the page the path names.
import './style.css';
import { comparePage } from './compare.js';
import { runPage } from './run.js';
import { runsPage } from './runs.js';

const app = document.getElementById('app');
const path = location.pathname;
const m = path.match(/^\/runs\/([^/]+)$/);
if (m)
	runPage(app, decodeURIComponent(m[1]));
else if (path === '/compare')
	comparePage(app);
else
	runsPage(app);
