import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listMigrations, plainStatements } from '../../src/store/migrate.ts';

/**
 * README "Migrations": old instances serve while the new version migrates, so a migration must not hold a lock
 * on a table that grows while it reads or rewrites the whole of it. Read from each file's text (not a SQL parser:
 * the forms our files use). A table the same file creates is empty, so anything goes on it.
 */
function lockingStatements(sql: string): string[] {
  const statements = plainStatements(sql).map((s) =>
    s
      .replace(/--[^\n]*/g, '')
      // What a literal or a quoted name says is no keyword (`default 'unique'`, a column "serial").
      .replace(/'(?:[^']|'')*'/g, "''")
      .replace(/"(?:[^"]|"")*"/g, '"x"')
      .replace(/\s+/g, ' ')
      .toLowerCase(),
  );
  const created = new Set(
    statements.flatMap((s) => /^create table (?:if not exists )?([\w.]+)/.exec(s)?.[1] ?? []),
  );
  const found: string[] = [];
  for (const s of statements) {
    const index =
      /^create (?:unique )?index (?!concurrently)(?:if not exists )?\S* ?on (?:only )?([\w.]+)/.exec(s);
    if (index && !created.has(index[1]!)) found.push(`index built without CONCURRENTLY: ${s}`);
    const altered = /^alter table (?:only )?(?:if exists )?([\w.]+)/.exec(s)?.[1];
    if (altered === undefined || created.has(altered)) continue;
    if (/check ?\(|references |foreign key/.test(s) && !/not valid/.test(s))
      found.push(`constraint checked under the table's lock (add it NOT VALID, then validate): ${s}`);
    if (/set not null/.test(s)) found.push(`not null checked under the table's lock: ${s}`);
    if (/alter column \S+ (?:set data )?type/.test(s))
      found.push(`column type change rewrites the table: ${s}`);
    // A table constraint or a column's (`add column x int unique`), an exclusion constraint too: each needs an
    // index of its own built CONCURRENTLY first (`using index`, which `using index tablespace` is not).
    const uniques = s.match(/\b(?:unique|primary key|exclude)\b/g)?.length ?? 0;
    const fromIndexes = s.match(/\busing index (?!tablespace\b)/g)?.length ?? 0;
    if (uniques > fromIndexes)
      found.push(`unique constraint built under the table's lock (build its index CONCURRENTLY): ${s}`);
    // A column (`column` may be left out) with a value per row, written into every row at once: a volatile default,
    // a serial, a stored generated column (`now()` and constants are kept in the catalog instead).
    const added =
      /\badd (?:column )?(?:if not exists )?(?!column\b|constraint\b|check\b|unique\b|primary\b|foreign\b|exclude\b)\S+ ([^,]*)/g;
    for (const [, definition] of s.matchAll(added))
      if (
        /\bdefault\b.*\b(?:clock_timestamp|random|gen_random_uuid|gen_random_bytes|uuid_generate_v\w+|nextval|timeofday)\b|^(?:big|small)?serial\b|\bgenerated always as \(/.test(
          definition!,
        )
      )
        found.push(`column added with a value per row rewrites the table: ${s}`);
  }
  return found;
}

/**
 * Those that shipped before this check, and stay (their checksums are kept): the early ones, from before 0020 began
 * building indexes CONCURRENTLY; 0026, run in a quiet hour; 0034, whose table has a row per webhook worker;
 * and 0037 (the README's upgrade notes name the costs of 0026 and 0037).
 */
const SHIPPED = new Set(['0002', '0006', '0010', '0011', '0013', '0015', '0026', '0034', '0037']);

test('no migration locks a growing table while it reads or rewrites it whole (README "Migrations")', async () => {
  for (const file of await listMigrations()) {
    const found = lockingStatements(file.sql);
    if (SHIPPED.has(file.version))
      assert.notDeepEqual(found, [], `${file.name} is listed as shipped with such a statement: it has none`);
    else assert.deepEqual(found, [], file.name);
  }
});

test('what the check finds, and what it lets through', () => {
  const flagged = [
    'alter table funding_sessions add column x numeric check (x >= 0);',
    'alter table t add constraint t_fk foreign key (a) references u (a);',
    'alter table t alter column a set not null;',
    'alter table t alter column a type bigint;',
    'alter table t add constraint t_a unique (a);',
    'alter table t add column x int unique;',
    'alter table t add column x int primary key;',
    'alter table t add constraint t_x exclude using gist (a with =);',
    'alter table t add column x timestamptz not null default clock_timestamp();',
    'alter table t add column x uuid default gen_random_uuid();',
    'alter table t add column x bigserial;',
    'alter table t add x bigserial;',
    'alter table t add x timestamptz not null default clock_timestamp();',
    'alter table t add column x uuid default uuid_generate_v1mc();',
    'alter table t add column x numeric generated always as (a * 2) stored;',
    'alter table t add constraint t_a unique (a) using index tablespace pg_default;',
    'alter table t add constraint t_pk primary key using index i, add constraint t_b unique (b);',
    'create index t_a on t (a);',
    'create unique index if not exists t_a on t (a);',
  ];
  for (const sql of flagged) assert.equal(lockingStatements(sql).length, 1, sql);
  const allowed = [
    'alter table t add column x numeric;',
    'alter table t add column x boolean not null default true;',
    'alter table t add column x timestamptz not null default now();',
    'alter table t drop constraint if exists t_a_unique;',
    'alter table t add column x timestamptz not null default statement_timestamp();',
    'alter table devices add column serial text;',
    "alter table t add column origin text not null default 'generated';",
    "alter table t add column mode text not null default 'unique';",
    "alter table t add constraint t_k check (kind in ('unique', 'shared')) not valid;",
    'alter table t add column unique_x int;',
    'alter table t add column x int generated always as identity;',
    'alter table t add constraint t_x check (x >= 0) not valid;\nalter table t validate constraint t_x;',
    'create index concurrently t_a on t (a);',
    'alter table t add constraint t_a unique using index t_a;',
    'create table n (a int);\ncreate index n_a on n (a);\nalter table n add check (a > 0);',
    '-- create index t_a on t (a);\nselect 1;',
  ];
  for (const sql of allowed) assert.deepEqual(lockingStatements(sql), [], sql);
});
