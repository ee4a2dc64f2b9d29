/**
 * How three worker processes share the 64 partitions of the lanes when one of them is in trouble (migration 0034),
 * with the worker side as it runs (partition-holdings.ts, renewing every second and renewing at once on the
 * NOTIFY that partitions were given back), against a scratch database of its own. Two scenarios:
 *   - away: A and B hold every partition; W starts, renews once (short of its share), then its database goes away
 *     (each renewal fails), so the partitions given back for it are never taken by it;
 *   - slow: W is alive but each renewal of its commits 2 s after it started (a loaded database).
 * Each is run with the function of migration 0026 (before) and with the current one, in the same run, and the
 * bench prints per scenario: the partition-seconds no one held (their lanes undelivered), the partitions given
 * back and the NOTIFYs sent meanwhile (each makes every worker renew), and W's holding at the end; then each of the
 * three figures of the current function as a ratio of 0026's.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/webhook-partition-sharing.bench.ts
 *
 * BENCH_SECONDS (25) sets how long each run lasts: over the lease (17 s), so that the away worker's lease ends.
 */
import { readFileSync } from 'node:fs';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import {
  createPartitionHoldings,
  type PartitionHoldings,
} from '../src/domain/webhooks/partition-holdings.ts';
import type { Log } from '../src/lib/log.ts';
import type { Db } from '../src/store/database.ts';
import { createTestDatabase } from '../test/helpers/database.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 25);
/** As a worker with the default request timeout (10 s + 5 s + the slack). */
const LEASE_MS = 17_000;
const SLACK_MS = 2_000;
const SLOW_RENEWAL_S = 2;
const CHANNEL = 'svc_webhooks';

type Scenario = 'away' | 'slow';
interface Tally {
  givenBack: number;
  notifies: number;
  renewals: number;
}

/** The 0026 function, to run the scenarios as they were before 0034 (the scratch database is thrown away). */
function functionOf0026(): string {
  const file = readFileSync(
    new URL('../src/store/migrations/0026_webhook_lane_partitions.sql', import.meta.url),
    'utf8',
  );
  const start = file.indexOf('create function webhook_lease_partitions');
  const end = file.indexOf('$$;', file.indexOf('as $$', start)) + 3;
  return file.slice(start, end).replace('create function', 'create or replace function');
}

/**
 * A worker's connections: its renewals counted, and for W made slow (the function's transaction held open before it
 * commits) or failing (its database away) as the scenario says.
 */
function workerDb(url: string, tally: Tally, trouble: { slow: boolean; awayAfter: number }) {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
  const wrapped = new WeakSet<pg.PoolClient>();
  (pool as unknown as { connect: () => Promise<pg.PoolClient> }).connect = async () => {
    const client = await connect();
    if (wrapped.has(client)) return client;
    wrapped.add(client);
    const query = client.query.bind(client) as (text: unknown, values?: unknown) => Promise<pg.QueryResult>;
    (client as unknown as { query: typeof query }).query = async (text, values) => {
      const statement = typeof text === 'string' ? text : (text as { text: string }).text;
      if (statement.includes('pg_notify')) tally.notifies++;
      if (!statement.includes('webhook_lease_partitions')) return query(text, values);
      if (++tally.renewals > trouble.awayAfter) throw new Error('database away');
      if (!trouble.slow) return query(text, values);
      await query('begin');
      try {
        const result = await query(text, values);
        await query(`select pg_sleep(${SLOW_RENEWAL_S})`);
        await query('commit');
        return result;
      } catch (err) {
        await query('rollback');
        throw err;
      }
    };
    return client;
  };
  return { db: new Kysely({ dialect: new PostgresDialect({ pool }) }) as unknown as Db, pool };
}

function quietLog(tally: Tally): Log {
  const log = {
    info(fields: unknown, message?: string) {
      if (message?.includes('given back')) tally.givenBack += (fields as { givenBack: number }).givenBack;
    },
    warn() {},
    error() {},
    debug() {},
    trace() {},
    fatal() {},
    child: () => log,
  };
  return log as unknown as Log;
}

async function run(url: string, scenario: Scenario) {
  const admin = new pg.Client(url);
  await admin.connect();
  await admin.query('update webhook_partitions set owner = null, lease_until = null');
  await admin.query('delete from webhook_partition_owners');
  const tallies: Record<string, Tally> = {};
  const workers: Array<{ holdings: PartitionHoldings; db: Db; listener: pg.Client }> = [];
  for (const name of ['A', 'B', 'W']) {
    // W comes once A and B have shared every partition out.
    await new Promise((r) => setTimeout(r, name === 'W' ? 3_000 : 200));
    const tally = (tallies[name] = { givenBack: 0, notifies: 0, renewals: 0 });
    const troubled = name === 'W';
    const { db } = workerDb(url, tally, {
      slow: troubled && scenario === 'slow',
      awayAfter: troubled && scenario === 'away' ? 1 : Infinity,
    });
    const holdings = createPartitionHoldings({
      db,
      owner: `bench:${name}`,
      leaseMs: LEASE_MS,
      slackMs: SLACK_MS,
      logger: quietLog(tally),
      drop: () => true,
      onLost: () => 0,
      onTaken() {},
    });
    const listener = new pg.Client(url);
    await listener.connect();
    await listener.query(`listen ${CHANNEL}`);
    listener.on('notification', (n) => {
      if (n.payload === 'partitions') void holdings.renew();
    });
    holdings.start();
    workers.push({ holdings, db, listener });
  }
  let unheldSeconds = 0;
  let holding = '';
  const ticks = SECONDS * 10;
  for (let i = 0; i < ticks; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const { rows } = await admin.query<{ owner: string; n: number }>(
      `select coalesce(split_part(owner, ':', 2), 'none') as owner, count(*)::int as n from webhook_partitions
       where owner is null or lease_until > clock_timestamp() group by 1 order by 1`,
    );
    unheldSeconds += (rows.find((r) => r.owner === 'none')?.n ?? 0) / 10;
    holding = rows.map((r) => `${r.owner} ${r.n}`).join(', ');
  }
  for (const { holdings, db, listener } of workers) {
    await holdings.giveBackAll().catch(() => {});
    await listener.end();
    await db.destroy();
  }
  await admin.end();
  const sum = (pick: (t: Tally) => number) => Object.values(tallies).reduce((n, t) => n + pick(t), 0);
  return {
    unheldSeconds,
    givenBack: sum((t) => t.givenBack),
    notifies: sum((t) => t.notifies),
    holding,
  };
}

async function main(): Promise<void> {
  const database = await createTestDatabase();
  const admin = new pg.Client(database.url);
  await admin.connect();
  const current = (
    await admin.query<{ def: string }>(
      `select pg_get_functiondef('webhook_lease_partitions(text,integer,smallint[],boolean)'::regprocedure) as def`,
    )
  ).rows[0]!.def;
  console.log(
    `webhook partition sharing: three workers, W in trouble, ${SECONDS} s a run (lease ${LEASE_MS / 1000} s)`,
  );
  try {
    for (const scenario of ['away', 'slow'] as const) {
      const results: Array<Awaited<ReturnType<typeof run>>> = [];
      for (const [label, definition] of [
        ['0026 (before)', functionOf0026()],
        ['current', current],
      ] as const) {
        await admin.query(definition);
        const r = await run(database.url, scenario);
        results.push(r);
        console.log(
          `  ${scenario.padEnd(5)} ${label.padEnd(14)} unheld ${r.unheldSeconds.toFixed(0).padStart(4)} partition-s, ` +
            `given back ${String(r.givenBack).padStart(5)}, NOTIFYs ${String(r.notifies).padStart(5)}; at the end: ${r.holding}`,
        );
      }
      // The ratios against the baseline of the same run (README: every bench prints them).
      const [before, now] = results as [(typeof results)[0], (typeof results)[0]];
      const ratio = (pick: (r: typeof now) => number) =>
        pick(before) === 0 ? 'n/a (none before)' : (pick(now) / pick(before)).toFixed(2);
      console.log(
        `  ${scenario.padEnd(5)} current/0026   unheld ${ratio((r) => r.unheldSeconds)}, given back ` +
          `${ratio((r) => r.givenBack)}, NOTIFYs ${ratio((r) => r.notifies)}`,
      );
    }
  } finally {
    await admin.end();
    await database.drop();
  }
}

await main();
