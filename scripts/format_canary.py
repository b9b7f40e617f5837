#!/usr/bin/env python3
"""The format canary (docs/internals.md, "Adding a format"; issue 45).

Adds a throwaway format, toy_lines, to a copy of this tree the way the doc says
to add one, builds the server there and checks what that took:
  - of the files that were there, it edits server/pipeline/formats.c and
    server/CMakeLists.txt alone; the rest of its change is files of its own
    (its parser, its store file and header, its migration). The two lists are
    printed;
  - the copy builds (warnings are errors), and its server takes an upload of
    the format (kind toy_lines, ready, as many events as lines, its rows in
    its table), refuses a malformed one with a 400 and the parser's code,
    still takes another format as before, and deleting the run deletes the
    new format's rows: no list outside its own files had to name its table.
The tests a real format adds (its parser's suite, a sample in
test_detect_sample, an upload in the formats e2e suite) are not written here.

Nothing is kept: the copy is a temporary folder, removed at the end (--keep
leaves it). Needs the tree's web/node_modules (a build of the tree installs
it) and a C toolchain. Usage: scripts/format_canary.py [--keep]. Exits 1 and
says what failed.
"""
import argparse
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- the throwaway format: "#toy-lines v1", then lines "name=value" ----

PARSER_H = r'''/*
 * toy_lines.h: the format canary's throwaway format (scripts/format_canary.py):
 * a first line "#toy-lines v1", then lines "name=value", value a decimal
 * integer; at most TOY_MAX of them, each under 64 bytes.
 */
#ifndef TOY_LINES_H
#define TOY_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

#define TOY_MAX 64

struct toy_lines {
	char name[TOY_MAX][32];
	int64_t value[TOY_MAX];
	size_t n;
	char line[64];
	size_t len;
	int header;
};

/* TP_ERR_INVALID (invalid_toy_lines) naming what is wrong, TP_ERR_TOOBIG past TOY_MAX lines. */
int toy_lines_feed(struct toy_lines *t, const uint8_t *d, size_t len, struct tp_errbuf *err);
int toy_lines_finish(struct toy_lines *t, struct tp_errbuf *err);

#endif
'''

PARSER_C = r'''/*
 * toy_lines.c: the format canary's parser (toy_lines.h).
 */
#include <stdlib.h>
#include <string.h>

#include "ingest/toy_lines.h"

static int bad(struct tp_errbuf *err, const char *what)
{
	return tp_fail(err, TP_ERR_INVALID, "invalid_toy_lines", "toy lines: %s", what);
}

static int line(struct toy_lines *t, struct tp_errbuf *err)
{
	char *eq, *end;

	t->line[t->len] = 0;
	t->len = 0;
	if (!t->header) {
		t->header = 1;
		return strcmp(t->line, "#toy-lines v1") ? bad(err, "no #toy-lines v1 first") : TP_OK;
	}
	if (!t->line[0])
		return TP_OK;
	if (t->n == TOY_MAX)
		return tp_fail(err, TP_ERR_TOOBIG, "toy_lines_too_large", "toy lines: more than %d", TOY_MAX);
	if (!(eq = strchr(t->line, '=')) || eq == t->line || (size_t)(eq - t->line) >= sizeof(t->name[0]))
		return bad(err, "a line is not name=value");
	*eq = 0;
	t->value[t->n] = strtoll(eq + 1, &end, 10);
	if (end == eq + 1 || *end)
		return bad(err, "a value is not an integer");
	memcpy(t->name[t->n++], t->line, (size_t)(eq - t->line) + 1);
	return TP_OK;
}

int toy_lines_feed(struct toy_lines *t, const uint8_t *d, size_t len, struct tp_errbuf *err)
{
	int rc;

	for (size_t i = 0; i < len; i++) {
		if (d[i] == '\n') {
			if ((rc = line(t, err)))
				return rc;
		} else if (t->len == sizeof(t->line) - 1) {
			return bad(err, "a line of 64 bytes or more");
		} else {
			t->line[t->len++] = (char)d[i];
		}
	}
	return TP_OK;
}

int toy_lines_finish(struct toy_lines *t, struct tp_errbuf *err)
{
	return t->len || !t->header ? line(t, err) : TP_OK;
}
'''

STORE_H = r'''/*
 * fmt_toy_lines.h: the format canary's own rows (fmt_toy_lines.c), the store
 * function pipeline/formats.c's row names. Its table: toy_lines_rows.
 */
#ifndef STORE_FMT_TOY_LINES_H
#define STORE_FMT_TOY_LINES_H

#include "store/store.h"

/* toy_lines.h's struct toy_lines in f->result (store_fmt_fn). */
int store_insert_toy_lines(struct store_writer *w, int64_t artifact, const struct store_final *f,
			   struct tp_errbuf *err);

#endif
'''

STORE_C = r'''/*
 * fmt_toy_lines.c: the format canary's own rows, one per line (toy_lines_rows).
 */
#include "ingest/toy_lines.h"
#include "store/fmt_toy_lines.h"
#include "store/store_int.h"

int store_insert_toy_lines(struct store_writer *w, int64_t artifact, const struct store_final *f, struct tp_errbuf *err)
{
	const struct toy_lines *t = f->result;
	struct db_stmt *st;
	int rc = TP_OK;

	if (db_prepare(w->db, "INSERT INTO toy_lines_rows(artifact_id, n, name, value) VALUES(?1, ?2, ?3, ?4)", 0,
		       &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	for (size_t i = 0; i < t->n && !rc; i++) {
		db_bind_int64(st, 1, artifact);
		db_bind_int64(st, 2, (int64_t)i);
		store_bind_text(st, 3, t->name[i]);
		db_bind_int64(st, 4, t->value[i]);
		rc = store_step_reset(w->db, st, err);
	}
	db_finalize(st);
	return rc;
}
'''

MIGRATION = '''-- {num}: the format canary's rows (scripts/format_canary.py; never committed).
CREATE TABLE toy_lines_rows (
	artifact_id INTEGER NOT NULL,
	n INTEGER NOT NULL,
	name TEXT NOT NULL,
	value INTEGER NOT NULL,
	PRIMARY KEY (artifact_id, n)
);
INSERT INTO format_tables(name) VALUES ('toy_lines_rows');
'''

# formats.c: the functions that fit the parser to the row, and the row
ADAPTERS = r'''/* ---- toy_lines: the format canary's (scripts/format_canary.py) ---- */

static int toy_detect(struct fmt_sniff *s, int arg)
{
	static const char magic[] = "#toy-lines v1\n";
	size_t k = s->n < sizeof(magic) - 1 ? s->n : sizeof(magic) - 1;

	(void)arg;
	if (memcmp(s->p, magic, k))
		return 0;
	return k == sizeof(magic) - 1 ? 1 : s->full ? 0 : -1;
}

static void *toy_open(const struct fmt_open *o)
{
	(void)o;
	return tp_calloc(1, sizeof(struct toy_lines));
}

static int toy_feed(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	return toy_lines_feed(ps, data, len, err);
}

static int toy_finish(void *ps, struct tp_errbuf *err)
{
	return toy_lines_finish(ps, err);
}

static void toy_result(void *ps, struct store_final *f)
{
	f->events = ((struct toy_lines *)ps)->n;
	f->result = ps;
}

static void toy_free(void *ps)
{
	tp_free(ps);
}

'''
ROW = ('	{ .name = "toy_lines", .expected = "a toy lines file", .detect = toy_detect, .open = toy_open,\n'
       '	  .feed = toy_feed, .finish = toy_finish, .result = toy_result, .free = toy_free,\n'
       '	  .store = store_insert_toy_lines },\n')


def fail(msg):
    sys.exit(f"format_canary: {msg}")


def edit(path, old, new):
    """Replace old (once, exactly) by new in path, or fail: the doc's step no longer fits the tree."""
    with open(path) as f:
        s = f.read()
    if s.count(old) != 1:
        fail(f"{os.path.relpath(path)}: cannot find where to add ({old.strip()[:60]!r})")
    with open(path, "w") as f:
        f.write(s.replace(old, new))


def digest(tree):
    out = {}
    for d, dirs, files in os.walk(tree):
        dirs[:] = [x for x in dirs if x not in ("node_modules", "build")]
        for n in files:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, tree)] = hashlib.sha256(f.read()).hexdigest()
    return out


def copy_tree(dst):
    names = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for n in filter(None, names):
        src = os.path.join(ROOT, n)
        if os.path.isfile(src) and not os.path.islink(src):
            os.makedirs(os.path.dirname(os.path.join(dst, n)), exist_ok=True)
            shutil.copy2(src, os.path.join(dst, n))
    mods = os.path.join(ROOT, "web", "node_modules")
    if not os.path.isdir(mods):
        fail("no web/node_modules: build the tree first (cmake --build build)")
    os.symlink(mods, os.path.join(dst, "web", "node_modules"))


def add_format(tree):
    """The format, as docs/internals.md's "Adding a format" says, less its tests."""
    def write(rel, text):
        with open(os.path.join(tree, rel), "w") as f:
            f.write(text)
    write("server/ingest/toy_lines.h", PARSER_H)
    write("server/ingest/toy_lines.c", PARSER_C)
    write("server/store/fmt_toy_lines.h", STORE_H)
    write("server/store/fmt_toy_lines.c", STORE_C)
    mig = sorted(os.listdir(os.path.join(tree, "schemas", "migrations")))
    num = int(mig[-1][:3]) + 1
    write(f"schemas/migrations/{num:03d}_toy_lines.sql", MIGRATION.format(num=f"{num:03d}"))
    formats = os.path.join(tree, "server", "pipeline", "formats.c")
    edit(formats, '#include "pipeline/formats.h"\n',
         '#include "ingest/toy_lines.h"\n#include "pipeline/formats.h"\n#include "store/fmt_toy_lines.h"\n')
    edit(formats, "/* ---- the table ---- */\n", ADAPTERS + "/* ---- the table ---- */\n")
    edit(formats, "};\nconst size_t nformats", ROW + "};\nconst size_t nformats")
    edit(os.path.join(tree, "server", "CMakeLists.txt"), "  pipeline/ingest.c ",
         "  ingest/toy_lines.c store/fmt_toy_lines.c\n  pipeline/ingest.c ")


def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def check_server(tree, work):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = os.path.join(work, "canary.db")
    base = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([os.path.join(tree, "build", "trainscope-server"), "--listen", f"127.0.0.1:{port}",
                            "--db", db, "--log-level", "warn"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                call(base, "GET", "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        def rows(sql):
            c = sqlite3.connect(db)
            try:
                return c.execute(sql).fetchone()[0]
            finally:
                c.close()
        st, j = call(base, "POST", "/api/v1/runs/toy/artifacts?name=x.bin", b"#toy-lines v1\nalpha=3\nbeta=-4\ngamma=10\n")
        a = (j or {}).get("artifact", {})
        if st != 201 or a.get("kind") != "toy_lines" or a.get("status") != "ready" or a.get("events") != 3:
            fail(f"the upload: {st} {j}")
        if (rows("SELECT COUNT(*) FROM toy_lines_rows"), rows("SELECT SUM(value) FROM toy_lines_rows")) != (3, 9):
            fail("its rows are not 3 summing to 9")
        st, j = call(base, "POST", "/api/v1/runs/toy/artifacts?name=y.bin", b"#toy-lines v1\nalpha\n")
        if st != 400 or j["error"]["code"] != "invalid_toy_lines":
            fail(f"a malformed one: {st} {j}")
        with open(os.path.join(ROOT, "tests", "formats", "lightning_simple_docs_profiler_basic.txt"), "rb") as f:
            st, j = call(base, "POST", "/api/v1/runs/toy/artifacts?name=z.bin", f.read())
        if st != 201 or j["artifact"]["kind"] != "lightning_report":
            fail(f"another format: {st} {j}")
        st, j = call(base, "DELETE", "/api/v1/runs/toy")
        if st != 200:
            fail(f"the run's delete: {st} {j}")
        left = rows("SELECT COUNT(*) FROM toy_lines_rows") + rows("SELECT COUNT(*) FROM lightning_actions")
        if left:
            fail(f"{left} rows left after the run's delete")
    finally:
        srv.terminate()
        srv.wait()
    print("server: toy_lines taken (3 events, 3 rows), a malformed one 400 invalid_toy_lines, "
          "a Lightning report as before; the run's delete left no row")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="leave the copy (its path is printed)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="format-canary-")
    tree = os.path.join(work, "tree")
    try:
        copy_tree(tree)
        before = digest(tree)
        add_format(tree)
        after = digest(tree)
        edited = sorted(p for p in before if after.get(p) != before[p])
        new = sorted(p for p in after if p not in before)
        print(f"files there before that it edits ({len(edited)}): {' '.join(edited)}")
        print(f"files of its own ({len(new)}): {' '.join(new)}")
        if edited != ["server/CMakeLists.txt", "server/pipeline/formats.c"]:
            fail("it edits other shared files")
        t0 = time.time()
        for cmd in (["cmake", "-S", tree, "-B", os.path.join(tree, "build")],
                    ["cmake", "--build", os.path.join(tree, "build"), "-j2", "--target", "trainscope-server"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                fail(f"{' '.join(cmd[:2])} failed:\n{r.stdout[-4000:]}{r.stderr[-4000:]}")
        print(f"build: the server with toy_lines in {time.time() - t0:.0f} s")
        check_server(tree, work)
        print("format_canary: ok")
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
