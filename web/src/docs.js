// The API reference (/api/docs): schemas/openapi.yaml as the server serves it
// (GET /api/v1/openapi.yaml and the schemas it refers to), drawn by Swagger UI,
// bundled: no CDN, works offline. "Try it out" sends the page's read token.
import SwaggerUIBundle from 'swagger-ui-dist/swagger-ui-es-bundle.js';
import 'swagger-ui-dist/swagger-ui.css';
import './docs.css';

const token = localStorage.getItem('trainscope.token');
window.ui = SwaggerUIBundle({
	url: '/api/v1/openapi.yaml',
	dom_id: '#docs',
	deepLinking: true,
	validatorUrl: null,	// no call to validator.swagger.io
	presets: [SwaggerUIBundle.presets.apis],
	layout: 'BaseLayout',
	requestInterceptor: (req) => {
		if (token && new URL(req.url, location.href).origin === location.origin)
			req.headers.Authorization = `Bearer ${token}`;
		return req;
	},
	onComplete: () => { document.getElementById('docs').dataset.ready = '1'; },
});
