// Unit tests of web/src/table.js's shortName() on the kernel and operator names of the
// H200 recordings (tests/fixtures/gpu/*/*.key_averages.json); no browser:
//   node --test tests/browser/names.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { shortName } from '../../web/src/table.js';
import { repoRoot } from './harness.mjs';

const gpu = path.join(repoRoot, 'tests/fixtures/gpu');
const names = new Set();
for (const dir of fs.readdirSync(gpu).filter((d) => fs.statSync(path.join(gpu, d)).isDirectory()))
	for (const f of fs.readdirSync(path.join(gpu, dir)).filter((x) => x.endsWith('.key_averages.json')))
		for (const row of JSON.parse(fs.readFileSync(path.join(gpu, dir, f))).rows)
			names.add(row.name);
const all = [...names];
// the one fixture name that starts with prefix (and holds part, when given)
const named = (prefix, part = '') => {
	const found = all.filter((n) => n.startsWith(prefix) && n.includes(part));
	assert.ok(found.length, `no fixture name starts with ${prefix}`);
	return found.sort((a, b) => a.length - b.length)[0];
};
// the function: what is outside every bracket, less "void " and "(anonymous namespace)::"
const functionOf = (n) => {
	let s = n.replace(/^void /, '').replace(/\(anonymous namespace\)::/g, ''), out = '', depth = 0;
	for (const c of s) {
		depth += c === '<' || c === '(' ? 1 : 0;
		if (!depth)
			out += c;
		depth -= c === '>' || c === ')' ? 1 : 0;
	}
	return out.trim();
};

test('a short name stays as it is', () => {
	for (const n of ['aten::mm', 'cudaLaunchKernel', 'triton_poi_fused_add_0', 'ProfilerStep*', 'Optimizer.step#AdamW.step'])
		assert.equal(shortName(n), n);
	assert.equal(shortName(null), '');
});

test('vectorized_elementwise_kernel keeps its function and its first template argument', () => {
	const n = named('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >');
	assert.ok(n.length > 80);
	const s = shortName(n);
	assert.ok(s.startsWith('at::native::vectorized_elementwise_kernel<4, '), s);
	assert.ok(s.length <= 80, s);
	assert.ok(s.endsWith('(…)'), s);
	// narrower: the arguments give way, the function does not
	assert.equal(shortName(n, 50), 'at::native::vectorized_elementwise_kernel<4, …>(…)');
});

test('the function name is never cut, on every long name of the recordings', () => {
	const long = all.filter((n) => n.length > 80);
	assert.ok(long.length >= 50, `${long.length} long names`);
	for (const n of long) {
		const s = shortName(n);
		const fn = functionOf(n);
		assert.ok(s.startsWith(fn), `${s} lost ${fn}`);
		// a name with brackets fits; an identifier alone (cuBLAS, Triton) is left whole
		if (/[<(]/.test(n) && fn.length < 60)
			assert.ok(s.length <= 80, `${s.length}: ${s}`);
		if (!/[<(]/.test(n))
			assert.equal(s, n);
	}
});

test('CUTLASS, cuBLAS and Triton names', () => {
	const cutlass = named('void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>');
	assert.equal(shortName(cutlass), 'cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(Params)');
	const xmma = named('sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8');
	assert.equal(shortName(xmma), xmma);
	const triton = named('triton_per_fused_add_addmm_clone_native_layer_norm');
	assert.equal(shortName(triton), triton);
	const fmha = named('fmha_cutlassF_f32_aligned_64x64_rf_sm80(');
	assert.ok(fmha.includes('AttentionKernel<'));
	assert.equal(shortName(fmha), 'fmha_cutlassF_f32_aligned_64x64_rf_sm80(…)');
});

test('lambdas, (anonymous namespace) and template arguments in the middle', () => {
	const copy = named('void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda');
	assert.ok(copy.length > 400 && copy.includes('{lambda()#3}'));
	const s = shortName(copy);
	assert.ok(s.startsWith('at::native::elementwise_kernel<128, 2, gpu_kernel_impl_nocast<'), s);
	assert.ok(s.includes('λ') && !s.includes('lambda') && !s.includes('operator()'), s);
	const multi = named('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<', 'divides<float>');
	const m = shortName(multi);
	assert.ok(m.startsWith('at::native::multi_tensor_apply_kernel<'), m);
	assert.ok(!m.includes('anonymous'), m);
	assert.ok(m.includes('divides<float>'), `the last template argument kept: ${m}`);
	const softmax = named('void (anonymous namespace)::softmax_warp_forward<');
	assert.equal(shortName(softmax), 'softmax_warp_forward<float, float, float, 8, true, false>(…)');
	// namespaces inside the brackets go, the function's own stay
	const reduce = named('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>');
	assert.match(shortName(reduce), /^at::native::reduce_kernel<512, 1, ReduceOp<float, /);
	assert.match(shortName(reduce, 120), /^at::native::reduce_kernel<512, 1, ReduceOp<float, ArgMaxOps<float>, /);
});

test('the kernels of the recordings are still told apart', () => {
	const vec = all.filter((n) => n.startsWith('void at::native::vectorized_elementwise_kernel<'));
	assert.ok(vec.length >= 6, `${vec.length} vectorized_elementwise_kernel names`);
	const shown = new Set(vec.map((n) => shortName(n)));
	assert.ok(shown.size >= vec.length - 2, `${shown.size} different of ${vec.length}: ${[...shown].join(' | ')}`);
});

test('non-type template arguments and odd brackets', () => {
	const n = 'void foo<(bool)1, (bool)0>(int, float, at::native::SomeVeryLongTypeName<float, float, float>, long long)';
	const s = shortName(n, 40);
	assert.ok(s.startsWith('foo<'), s);
	assert.ok(s.endsWith('>(…)'), s);
	// brackets that do not pair up (an operator<): the name as it is, less its return type
	const odd = 'void at::native::compare_kernel<operator<, float>(int, at::native::SomeVeryLongTypeName<float, float>)';
	assert.ok(shortName(odd, 40).startsWith('at::native::compare_kernel<'));
	// a frame that is all brackets keeps what is inside the outer ones
	const frame = '<built-in method run_backward of torch._C._EngineBase object at 0x7f3a2c1b5e40 with a long tail (x)>';
	assert.ok(shortName(frame, 40).startsWith('<built-in method run_backward'), shortName(frame, 40));
});
