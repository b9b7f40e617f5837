// A finding's evidence as people read it: labels with units rather than the
// API's field names ("time in tiny kernels 37.5 ms", not "tiny ns 37.5 ms"),
// and findings in order of severity.
import { fmtBytes, fmtInt, fmtNs } from './util.js';

const LABELS = {
	kernel_calls: 'kernel launches', tiny_calls: 'tiny kernel launches', tiny_ns: 'time in tiny kernels',
	tiny_pct: 'tiny kernels, share of launches', tiny_threshold_ns: 'tiny means shorter than',
	gpu_utilization_pct: 'GPU utilization', threshold_pct: 'fires above', threshold_ratio: 'fires above',
	memcpy_pct: 'copies, share of GPU busy time', memcpy_ns: 'time in copies', memcpy_calls: 'copies',
	gpu_busy_ns: 'GPU busy time', dtoh_calls: 'device-to-host copies', dtod_ns: 'device-to-device copy time',
	pageable_ns: 'pageable host copy time', pinned_ns: 'pinned host copy time',
	dataloader_ns: 'time in the data loader', dataloader_pct: 'data loader, share of step time',
	idle_pct: 'GPU idle, share of step time', host_only_ns: 'host-only time', sync_calls: 'synchronizing calls',
	sync_ns: 'time synchronizing', sync_pct: 'synchronizing, share of step time', steps: 'steps', steps_ns: 'time in steps',
	first_ns: 'first steps, mean', last_ns: 'last steps, mean', rise_pct: 'rise', peak_bytes: 'peak allocated',
	peak_pct: 'peak, share of the GPU', capacity_bytes: 'GPU memory', dominant_bytes: 'largest category at the peak',
	first_step_bytes: 'allocated after the first step', last_step_bytes: 'allocated after the last step',
	per_step_bytes: 'growth per step', ratio: 'host time ÷ GPU time', per_step: 'waits per step',
	calls_by_name: 'calls by name', dtoh_copies: 'device-to-host copies', slope_ns_per_step: 'step time drift',
	device: 'device', source: 'memory from', traces: 'traces', kernels: 'kernels',
};

export function evidenceLabel(key) {
	return LABELS[key] || key.replace(/_(ns|bytes|pct)$/, '').replace(/_/g, ' ');
}

export function evidenceValue(key, v) {
	if (typeof v === 'number') {
		if (key.endsWith('_ns_per_step'))
			return (v > 0 ? '+' : '') + fmtNs(v) + ' per step';
		if (key.endsWith('_ns'))
			return fmtNs(v);
		if (key.endsWith('_bytes'))
			return fmtBytes(v);
		if (key.endsWith('_pct'))
			return (Math.abs(v) < 10 && v % 1 ? v.toFixed(1) : Math.round(v)) + '%';
		if (key === 'ratio' || key.endsWith('_ratio'))
			return v.toFixed(1) + '×';
		return Number.isInteger(v) ? fmtInt(v) : v.toPrecision(3);
	}
	if (v && typeof v === 'object' && !Array.isArray(v))	// {"name": figure}: "name figure, ..."
		return Object.entries(v).map(([k, x]) => `${k} ${typeof x === 'number' ? fmtInt(x) : x}`).join(', ');
	if (Array.isArray(v) && v.some((x) => x && typeof x === 'object'))	// [{"name": "prep", "extra_ns": 5e4}]: "prep, extra 50.0 µs; ..."
		return v.map((o) => Object.entries(o).map(([k, x]) => (x == null ? '' : typeof x === 'number' ? `${evidenceLabel(k)} ${evidenceValue(k, x)}` : String(x)))
			.filter(Boolean).join(', ')).join('; ');
	return Array.isArray(v) ? v.join(', ') : String(v);
}

const SEVERITY = { critical: 0, error: 1, warning: 2, info: 3 };
export const bySeverity = (findings) => [...findings].sort((a, b) => (SEVERITY[a.severity] ?? 9) - (SEVERITY[b.severity] ?? 9));
