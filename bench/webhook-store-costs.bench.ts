/**
 * What PostgreSQL spends per webhook delivery on the delivery's own statements (README, Webhooks, "Where this
 * leaves issue 4's goals"): the service's reads and records (lane-reads.repository.ts readAfter, a few hundred
 * notifications a statement after the cursor, over all 64 partitions, as one worker alone reads them; then
 * webhooks.repository.ts recordAttempts, a hundred results a statement, as the worker's batcher sends them),
 * against the record alone (the same update, of rows read beforehand), the floor of any design that keeps each
 * notification's row as its record.
 *
 * Only the delivery's statements are measured (CPU time of the one backend that runs them, /proc): not the
 * producer's, not autovacuum's, not the partitions' renewals (one small statement a second). One process, the two
 * taking turns for BENCH_ROUNDS rounds (3) on fresh notifications; the result is the median ratio.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/webhook-store-costs.bench.ts
 *
 * Before the partitions (session 19, the lanes table of migrations 0008-0025, two runs): the lanes cost 73-107 µs
 * a delivery with one notification per resource and 50-67 with ten, the record alone 22-28; a sketch that found
 * its work with reads 30-38 (0.31-0.38 of the lanes). That sketch is what the service does since 0026.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { BENCH_PLATFORM, BENCH_TRADE_PAYLOAD, median, procStatCpuMs } from './bench-support.ts';
import {
  loadPartitions,
  readAfter,
  type ReadNotification,
} from '../src/domain/webhooks/lane-reads.repository.ts';
import { leasePartitions, recordAttempts } from '../src/domain/webhooks/webhooks.repository.ts';
import { createStore, type Db } from '../src/store/database.ts';
import { createTestDatabase } from '../test/helpers/database.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Results a record statement takes, as a busy worker's batcher sends them. */
const BATCH = 100;
/** Notifications a read takes at most (the worker's READ_LIMIT, book-reads.ts). */
const READ_LIMIT = 500;
const COUNT = 6_000;
const OWNER = 'bench-store-costs';
const LEASE_MS = 17_000;
const PARTITIONS = Array.from({ length: 64 }, (_, i) => i);

/** A recorded notification: what the record of its delivery needs, and its place in commit order. */
type Recorded = { notification_id: string; state_token: string; round_attempts: number; seq: number };

/** `count` pending notifications, `perLane` per resource, in commit order. */
async function recordNotifications(db: Db, count: number, perLane: number, tag: string): Promise<Recorded[]> {
  const { rows } = await sql<Recorded>`
    insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), ${BENCH_PLATFORM}, 'trade_status_changed', ${`trade:${tag}-`} || (i / ${perLane}::int),
      ${JSON.stringify(BENCH_TRADE_PAYLOAD)}::jsonb
    from generate_series(0, ${count - 1}::int) i order by i
    returning notification_id, state_token, round_attempts, seq`.execute(db);
  return rows.sort((a, b) => a.seq - b.seq);
}

/** The service's statements: read after the cursor, READ_LIMIT at a time, and record each as delivered. */
async function deliverThroughReads(db: Db, cursor: Parameters<typeof readAfter>[2]) {
  let delivered = 0;
  for (;;) {
    const read = await readAfter(db, PARTITIONS, cursor, READ_LIMIT);
    cursor = read.cursor;
    for (let at = 0; at < read.rows.length; at += BATCH) {
      await recordAttempts(db, OWNER, read.rows.slice(at, at + BATCH).map(deliveredResult));
    }
    delivered += read.rows.length;
    if (read.rows.length < READ_LIMIT) return { delivered, cursor };
  }
}

function deliveredResult(head: ReadNotification) {
  return {
    head,
    newStateToken: randomUUID(),
    record: {
      attempt: {
        startedAt: new Date(),
        durationMs: 3,
        statusCode: 204,
        error: null,
        outcome: 'delivered' as const,
      },
      status: 'delivered' as const,
      statusReason: null,
      roundAttempts: head.round_attempts,
      nextAttemptInMs: null,
    },
  };
}

/** The floor of any design that keeps the notification's row as its record: the record alone, of `recorded`. */
async function recordAlone(db: Db, recorded: Recorded[]): Promise<number> {
  for (let at = 0; at < recorded.length; at += BATCH)
    await recordDelivered(db, recorded.slice(at, at + BATCH));
  return recorded.length;
}

/** The columns a record writes for a first attempt that succeeded (webhook_record_attempts), from arrays. */
async function recordDelivered(db: Db, rows: Recorded[]): Promise<void> {
  const ids = rows.map((r) => r.notification_id);
  const each = <T>(value: T) => ids.map(() => value);
  await sql`
    update webhook_notifications n set
      attempt_count = n.attempt_count + 1,
      earlier_attempts = case when n.last_attempt_outcome is not null
        then coalesce(n.earlier_attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
          'attempt_number', n.attempt_count, 'started_at', n.last_attempt_at,
          'duration_ms', n.last_attempt_duration_ms, 'status_code', n.last_attempt_status_code,
          'error', n.last_attempt_error, 'outcome', n.last_attempt_outcome, 'worker', n.last_attempt_worker))
        else n.earlier_attempts end,
      last_attempt_at = to_timestamp(r.started_ms / 1000.0), last_attempt_duration_ms = r.duration_ms,
      last_attempt_status_code = r.status_code, last_attempt_error = r.error, last_attempt_outcome = r.outcome,
      last_attempt_worker = ${OWNER}, status = r.status, round_attempts = r.round_attempts,
      delivered_at = clock_timestamp(), state_token = r.new_token
    from unnest(${ids}::uuid[], ${rows.map((r) => r.state_token)}::uuid[], ${ids.map(() => randomUUID())}::uuid[],
        ${each(Date.now())}::float8[], ${each(3)}::int[], ${each(204)}::int[], ${each(null)}::text[],
        ${each('delivered')}::text[], ${each('delivered')}::text[], ${rows.map((r) => r.round_attempts)}::int[])
      r(id, token, new_token, started_ms, duration_ms, status_code, error, outcome, status, round_attempts)
    where n.notification_id = r.id and n.state_token = r.token`.execute(db);
}

async function main(): Promise<void> {
  const database = await createTestDatabase();
  // One connection, so that one backend runs every statement measured.
  const store = createStore(database.url, { max: 1, sessionSettings: { synchronous_commit: 'off' } });
  const db = store.db;
  try {
    await sql`insert into platforms (platform_code, name) values (${BENCH_PLATFORM}, 'Bench platform')`.execute(
      db,
    );
    await sql`insert into webhook_endpoints (platform_code, url) values (${BENCH_PLATFORM}, 'http://127.0.0.1:9/hooks')`.execute(
      db,
    );
    await leasePartitions(db, OWNER, { leaseMs: LEASE_MS, giveBack: [], wants: true });
    let { cursor } = await loadPartitions(db, PARTITIONS, 1);
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
    const backendCpuMs = () => procStatCpuMs(`/proc/${rows[0]!.pid}/stat`);
    /** PostgreSQL CPU µs per delivery of `deliver`'s statements, on notifications recorded just before. */
    const measure = async (
      perLane: number,
      tag: string,
      deliver: (recorded: Recorded[]) => Promise<number>,
    ) => {
      const recorded = await recordNotifications(db, COUNT, perLane, tag);
      await sql`analyze webhook_notifications`.execute(db);
      const before = backendCpuMs();
      const delivered = await deliver(recorded);
      if (delivered !== COUNT) throw new Error(`delivered ${delivered} of ${COUNT}`);
      return ((backendCpuMs() - before) * 1000) / delivered;
    };
    const throughReads = async () => {
      const done = await deliverThroughReads(db, cursor);
      cursor = done.cursor;
      return done.delivered;
    };
    console.log(
      `webhook store costs: PostgreSQL CPU per delivery of the delivery's statements, ${COUNT} deliveries a measurement, ${ROUNDS} rounds`,
    );
    /** Each comparison's ratio per round, by its label (in the order printed). */
    const ratios = new Map<string, number[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      const one = await measure(1, `r${round}-one`, throughReads);
      const ten = await measure(10, `r${round}-ten`, throughReads);
      // The record alone takes the rows the reads would find: the cursor goes past them.
      const record = await measure(1, `r${round}-record`, (recorded) => recordAlone(db, recorded));
      cursor = (await loadPartitions(db, PARTITIONS, 1)).cursor;
      for (const [label, ratio] of [
        ['reads and records, 1 per resource, against the record alone', one / record],
        ['reads and records, 10 per resource, against the record alone', ten / record],
      ] as const) {
        ratios.set(label, [...(ratios.get(label) ?? []), ratio]);
      }
      console.log(
        `  round ${round}: reads and records, 1 per resource ${one.toFixed(0)} µs; 10 per resource ${ten.toFixed(0)} µs; the record alone ${record.toFixed(0)} µs`,
      );
    }
    console.log(`median of ${ROUNDS} rounds:`);
    for (const [label, values] of ratios) {
      console.log(
        `  ${label.padEnd(62)}${median(values).toFixed(2)}   (rounds: ${values.map((r) => r.toFixed(2)).join(', ')})`,
      );
    }
  } finally {
    await store.close();
    await database.drop();
  }
}

await main();
