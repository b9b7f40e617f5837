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


def stacks(t):
    lines = [l for l in t.splitlines() if l.strip()]
    return len(lines), 'weight', str(sum(int(l.rsplit(None, 1)[1]) for l in lines))


def main():
    print('# file\tkind\tcount\tfigure\tvalue  (count: GPU rows, stacks, actions or ops; written by figures.py)')
    for d, kind in (('nvidia_smi', 'gpu_log'), ('stacks', 'stacks')):
        for f in sorted(x for x in os.listdir(d) if not x.startswith('LICENSE')):
            t = open(os.path.join(d, f), encoding='utf-8').read()
            if kind == 'gpu_log':
                n, fig, v = dmon(t) if '_dmon' in f else screen(t)
            else:
                n, fig, v = stacks(t)
            print(f'{d}/{f}\t{kind}\t{n}\t{fig}\t{v}')


if __name__ == '__main__':
    sys.exit(main())
