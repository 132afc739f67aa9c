-- pgbench script of BenchmarkCommitShape's transaction, statement for
-- statement: lock the sequence, read the tenant's cluster and run, write
-- the cluster one version up, append one 256-byte event, update the run
-- and the sequence, notify, commit. 16 tenants t0..t15, run "r" each.
-- Prepare the schema by opening a store on it, then:
--   psql ... -c "INSERT INTO bench.runs (tenant, id) SELECT convert_to('t'||i,'UTF8'), 'r'::bytea FROM generate_series(0,15) i"
--   PGOPTIONS=-csearch_path=bench pgbench -n -M prepared -c 16 -j 2 -T 20 -f commit-shape.sql test
\set t random(0, 15)
BEGIN;
SELECT last FROM sequence WHERE id = 1 FOR UPDATE;
SELECT version, data FROM clusters WHERE tenant = convert_to('t' || :t, 'UTF8');
SELECT seed, first_seq, last_seq, count, tombstoned FROM runs WHERE tenant = convert_to('t' || :t, 'UTF8') AND id = 'r'::bytea;
INSERT INTO clusters (tenant, version, data) VALUES (convert_to('t' || :t, 'UTF8'), 1, convert_to(repeat('x', 256), 'UTF8'))
	ON CONFLICT (tenant) DO UPDATE SET version = clusters.version + 1, data = excluded.data;
INSERT INTO events (seq, tenant, run_id, idx, body)
	SELECT last + 1, convert_to('t' || :t, 'UTF8'), 'r'::bytea, 1, convert_to(repeat('x', 256), 'UTF8') FROM sequence WHERE id = 1;
UPDATE runs SET last_seq = (SELECT last + 1 FROM sequence WHERE id = 1), count = count + 1 WHERE tenant = convert_to('t' || :t, 'UTF8') AND id = 'r'::bytea;
UPDATE sequence SET last = last + 1 WHERE id = 1;
SELECT pg_notify('oecp.bench', 'x');
COMMIT;
