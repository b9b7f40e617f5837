#!/usr/bin/env python3
"""Write MANIFEST.tsv: per kept file of the corpus, its kind and first figures, read from the
text here with plain string handling (not with the server's parser), for tests/server/check_textfmt.c.
Run from tests/formats/corpus: python3 figures.py > MANIFEST.tsv"""
import os
import re
import sys


def screen(t):
    # one GPU per "| N/A 28C P0 77W / 700W | ..." line; power draw of the first
    rows = re.findall(r'^\|\s*\S+\s+\S+\s+\S+\s+(\S+)W\s*/\s*\S+W\s*\|', t, re.M)
    return len(rows), 'power.draw', rows[0]


def dmon(t):
    rows = [l.split() for l in t.splitlines() if l.strip() and not l.startswith('#')]
    return len(rows), 'power.draw', rows[0][1]


def query(t):
    # --query-gpu CSV with a header: rows after it; power.draw of the first ("77.71 W")
    lines = [l for l in t.splitlines() if l.strip()]
    head = [c.strip() for c in lines[0].split(',')]
    k = head.index('power.draw [W]')
    return len(lines) - 1, 'power.draw', lines[1].split(',')[k].strip().split()[0]


def stacks(t):
    lines = [l for l in t.splitlines() if l.strip()]
    return len(lines), 'weight', str(sum(int(l.rsplit(None, 1)[1]) for l in lines))


def lightning(t):
    # AdvancedProfiler: one action per "Profile stats for:", its total from "in T seconds"; the
    # largest (the first is often a hook of "0.000 seconds")
    adv = re.findall(r'function calls.* in (\S+) seconds', t)
    if adv:
        return len(re.findall(r'Profile stats for:', t)), 'max_total', max(adv, key=float)
    # SimpleProfiler: rows "name | mean | [calls |] total [| percent]", the Total row left out
    rows = []
    for l in t.splitlines():
        cells = [c.strip() for c in l.strip().strip('|').split('|')]
        if len(cells) >= 3 and cells[0] not in ('Action', 'Total') and re.fullmatch(r'[0-9.e+-]+', cells[1]):
            rows.append(cells)
    return len(rows), 'total', rows[0][3 if len(rows[0]) >= 4 and re.fullmatch(r'\d+', rows[0][2]) else 2]


def key_averages(t):
    # the rows between the second and third dash lines; the "Self CPU time total: " footer
    lines = t.splitlines()
    dash = [i for i, l in enumerate(lines) if l.strip().startswith('---')]
    return dash[2] - dash[1] - 1, 'self_cpu_total', re.search(r'Self CPU time total: (\S+)', t).group(1)


def main():
    print('# file\tkind\tcount\tfigure\tvalue  (count: GPU rows, stacks, actions or ops; written by figures.py)')
    for d, kind in (('key_averages', 'key_averages'), ('lightning', 'lightning_report'), ('nvidia_smi', 'gpu_log'), ('stacks', 'stacks')):
        for f in sorted(x for x in os.listdir(d) if not x.startswith('LICENSE')):
            t = open(os.path.join(d, f), encoding='utf-8').read()
            if kind == 'gpu_log':
                n, fig, v = query(t) if f.endswith('.csv') else dmon(t) if '_dmon' in f else screen(t)
            elif kind == 'key_averages':
                n, fig, v = key_averages(t)
            elif kind == 'stacks':
                n, fig, v = stacks(t)
            else:
                n, fig, v = lightning(t)
            print(f'{d}/{f}\t{kind}\t{n}\t{fig}\t{v}')


if __name__ == '__main__':
    sys.exit(main())
