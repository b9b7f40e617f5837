#!/usr/bin/python3
"""Our figures beside torch-tb-profiler's and HTA's, per fixture, as a markdown table.

Not part of CI: the peers are set up by hand (../shared/reference/peers/README.md) and their
dumps written with tb_dump.py TRACE OUT/NAME.tb.json and hta_dump.py DIR OUT/NAME.hta.json.

usage: side_by_side.py SERVER_URL FIXTURES_DIR DUMPS_DIR
Uploads each fixture to SERVER_URL as run NAME (a fresh server is best) and prints the table.
"""
import json
import os
import sys
import urllib.request


def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, data=body, method=method)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def us(ns):
    return '–' if ns is None else f'{ns / 1000:,.0f}'


def main():
    base, fixtures, dumps = sys.argv[1].rstrip('/'), sys.argv[2], sys.argv[3]
    rows = []
    for f in sorted(os.listdir(fixtures)):
        if not f.endswith('.json.gz'):
            continue
        name = f[:-8]
        with open(os.path.join(fixtures, f), 'rb') as fh:
            call(base, 'POST', f'/api/v1/runs/{name}/artifacts?rank=0&name={f}', fh.read())
        steps = call(base, 'GET', f'/api/v1/runs/{name}/steps')['steps']
        kernels = call(base, 'GET', f'/api/v1/runs/{name}/kernels?limit=100000')
        cls = {}
        for k in kernels['kernels']:
            cls[k['class']] = cls.get(k['class'], 0) + k['total_ns']
        tb = hta = None
        try:
            tb = json.load(open(os.path.join(dumps, name + '.tb.json')))
        except OSError:
            pass
        try:
            hta = json.load(open(os.path.join(dumps, name + '.hta.json')))
        except OSError:
            pass
        tb_rows = {r[0]: r for r in (tb or {}).get('steps_rows', [])}
        tb_cols = (tb or {}).get('steps_cols', [])
        tb_bounds = dict(zip((tb or {}).get('steps_names', []), (tb or {}).get('steps_bounds') or []))
        for s in steps:
            key = '0' if s['whole_trace'] else str(s['step'])
            r = tb_rows.get(key)
            b = tb_bounds.get(key)
            get = (lambda c: r[tb_cols.index(c)] if r and c in tb_cols else None)
            gpu = s['gpu_utilization'] * s['dur_ns']  # time any kernel it launched runs
            tb_gpu = None if r is None else get('Kernel')  # all kernels, communication ones included
            rows.append((name, key + (' (whole)' if s['whole_trace'] else '') + (' (incomplete)' if s['incomplete'] else ''),
                         us(s['cpu_dur_ns']), us(s['dur_ns']), '–' if not b else f'{b[1] - b[0]:,.0f}',
                         us(gpu), '–' if tb_gpu is None else f'{tb_gpu:,.0f}'))
        hta_types = {}
        if hta:
            for rk in hta.get('ranks', {}).values():
                for t in rk.get('gpu_types', []):
                    hta_types[t['kernel_type']] = hta_types.get(t['kernel_type'], 0) + t['sum']
        rows.append((name, 'kernels by class', 'computation ' + us(cls.get('computation', 0)),
                     'communication ' + us(cls.get('communication', 0)), '', 'HTA ' +
                     ', '.join(f'{k.lower()} {v:,.0f}' for k, v in sorted(hta_types.items())), ''))
    print('| trace | step | CPU span (us) | our step (us) | tb step (us) | our kernels running (us) |'
          ' tb Kernel (us) |')
    print('|---|---|---|---|---|---|---|')
    for r in rows:
        print('| ' + ' | '.join(r) + ' |')


if __name__ == '__main__':
    main()
