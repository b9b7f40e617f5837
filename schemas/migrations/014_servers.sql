-- 014: servers sharing one database (PostgreSQL; issue 19).
--
-- Each server that opens the store registers here and beats every few
-- seconds (alive_ns, its clock). An upload still 'ingesting' is owned by the
-- server taking it (artifacts.owner); when that server stops beating (a
-- crash, kill -9, a lost host) the others drop the upload whole, as a
-- restart drops an embedded server's. SQLite has one server: the table
-- stays empty and owner 0.
CREATE TABLE servers (
	id INTEGER PRIMARY KEY,
	alive_ns INTEGER NOT NULL
);
ALTER TABLE artifacts ADD COLUMN owner INTEGER NOT NULL DEFAULT 0;
