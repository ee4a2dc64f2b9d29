/**
 * What PostgreSQL spends per webhook delivery on the delivery's own statements: today's lanes (the baseline)
 * against a sketch of a design without a row per lane, and against the record alone, the floor of any design
 * that keeps each notification's row as its record (README, Webhooks, "Where this leaves issue 4's goals"):
 *
 * - lanes (today): claim due lanes with their heads (webhook_claim_lanes, through the repository's claimLanes),
 *   then record each head delivered and give its lane back (settleLanes), a hundred lanes a statement, as a
 *   busy worker does; with one notification per resource (a claim and a release per delivery) and with ten;
 * - inbox sketch: a producer's transaction adds one narrow row per notification to an inbox keyed by the lane's
 *   partition (a hash of platform and resource); the worker that leases the partition takes a hundred a
 *   statement (delete … returning, joined to their notifications) and keeps each resource's order in memory;
 *   the record is the same update of the notification as today's, from arrays. Partition leases (a few rows
 *   renewed once a second) are not counted;
 * - read sketch: the worker finds its work with reads, a hundred pending notifications a statement after the
 *   last it read (a cursor), then the same record; what a design that leases partitions and keeps each
 *   resource's order in memory would cost PostgreSQL, but for tracking the transactions still open;
 * - the record alone: that update, on rows read beforehand.
 *
 * Only the delivery's statements are measured (CPU time of the one backend that runs them, /proc): not the
 * producer's, not autovacuum's. One process, the designs taking turns for BENCH_ROUNDS rounds (3) on fresh
 * notifications; the results are median ratios against the lanes.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/webhook-store-costs.bench.ts
 *
 * Session 19 (2026-12-01, the development VM, two runs): lanes 73–107 µs a delivery with one notification per
 * resource and 50–67 with ten; the inbox sketch 65–80 (0.72–0.89 and 1.20–1.29 of the lanes: taking an inbox row
 * costs about what the lane it replaces did); the read sketch 30–38 (0.31–0.38); the record alone 22–28
 * (0.27–0.33). So the lanes' bookkeeping, not the record, is most of PostgreSQL's share of a delivery, and a
 * design that finds its work with reads would take out about two thirds of it.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { BENCH_PLATFORM, BENCH_TRADE_PAYLOAD, median, procStatCpuMs } from './bench-support.ts';
import { claimLanes, settleLanes, type SettleItem } from '../src/domain/webhooks/webhooks.repository.ts';
import { createStore, type Db } from '../src/store/database.ts';
import { createTestDatabase } from '../test/helpers/database.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Lanes (or inbox rows) a statement takes, as a busy worker's claims and settles do. */
const BATCH = 100;
/** Statements of each kind per measurement. */
const BATCHES = 60;
const OWNER = 'bench-store-costs';
const LEASE_MS = 17_000;
/** Partitions of the sketch's inbox; all of them leased by the one worker measured. */
const PARTITIONS = 64;

/** A recorded notification: what the record of its delivery needs, and its place in commit order. */
type Recorded = { notification_id: string; state_token: string; round_attempts: number; seq: number };

/**
 * `count` pending notifications, `perLane` per resource, and what the design measured next finds them by: their
 * lanes woken as recordNotification does, rows in the sketch's inbox, or nothing (the read sketch and the record
 * alone, which also leave no lane behind for the next round's claims).
 */
async function recordNotifications(
  db: Db,
  {
    count,
    perLane,
    tag,
    then,
  }: { count: number; perLane: number; tag: string; then: 'lanes' | 'inbox' | 'nothing' },
): Promise<Recorded[]> {
  const { rows } = await sql<Recorded>`
    insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
    select gen_random_uuid(), ${BENCH_PLATFORM}, 'trade_status_changed', ${`trade:${tag}-`} || (i / ${perLane}::int),
      ${JSON.stringify(BENCH_TRADE_PAYLOAD)}::jsonb
    from generate_series(0, ${count - 1}::int) i order by i
    returning notification_id, state_token, round_attempts, seq`.execute(db);
  rows.sort((a, b) => a.seq - b.seq);
  const these = sql`webhook_notifications where seq between ${rows[0]!.seq} and ${rows.at(-1)!.seq}`;
  if (then === 'lanes') {
    await sql`select webhook_wake_lane(platform_code, resource_key)
      from (select distinct platform_code, resource_key from ${these}) lanes`.execute(db);
  } else if (then === 'inbox') {
    await sql`insert into bench_inbox (lane_partition, seq, notification_id)
      select abs(hashtext(platform_code || ' ' || resource_key)) % ${PARTITIONS}, seq, notification_id
      from ${these}`.execute(db);
  }
  return rows;
}

/** Today's statements for `BATCHES` claims of up to BATCH lanes: claimed, delivered, given back. */
async function deliverThroughLanes(db: Db): Promise<number> {
  let delivered = 0;
  for (let b = 0; b < BATCHES; b++) {
    const lanes = await claimLanes(db, OWNER, { limit: BATCH, leaseMs: LEASE_MS, perLane: 20 });
    const items: SettleItem[] = [];
    for (const { lane, heads } of lanes) {
      heads.forEach((head, i) =>
        items.push({
          lane,
          renew: false,
          release: i === heads.length - 1,
          result: {
            head,
            newStateToken: randomUUID(),
            record: {
              attempt: {
                startedAt: new Date(),
                durationMs: 3,
                statusCode: 204,
                error: null,
                outcome: 'delivered',
              },
              status: 'delivered',
              statusReason: null,
              roundAttempts: head.round_attempts,
              nextAttemptInMs: null,
            },
          },
        }),
      );
    }
    // A settle takes at most BATCH results, as the worker's batcher sends them.
    for (let at = 0; at < items.length; at += BATCH) {
      await settleLanes(db, OWNER, LEASE_MS, items.slice(at, at + BATCH));
    }
    delivered += items.length;
  }
  return delivered;
}

const PARTITION_LIST = Array.from({ length: PARTITIONS }, (_, i) => i);

/** The sketch's statements for `BATCHES` takes of BATCH inbox rows: taken with their notifications, recorded. */
async function deliverThroughInbox(db: Db): Promise<number> {
  let delivered = 0;
  for (let b = 0; b < BATCHES; b++) {
    const { rows } = await sql<Recorded>`
      with taken as (
        delete from bench_inbox i where (i.lane_partition, i.seq) in (
          select lane_partition, seq from bench_inbox where lane_partition = any (${PARTITION_LIST}::smallint[])
          order by seq limit ${BATCH}::int for update skip locked)
        returning notification_id)
      select n.notification_id, n.platform_code, n.resource_key, n.seq, n.payload_type, n.payload, n.state_token,
        n.round_attempts, n.attempt_count, (extract(epoch from greatest(n.created_at, n.redelivered_at)) * 1000)::float8
          as round_started_ms
      from taken t join webhook_notifications n using (notification_id)
      where n.status in ('pending', 'retrying')`.execute(db);
    await recordDelivered(db, rows);
    delivered += rows.length;
  }
  return delivered;
}

/**
 * The read sketch: a worker's work found with reads, a hundred pending notifications a statement after the
 * last one it read (a cursor by seq over the platform's index; a real design reads its partitions' and tracks
 * the transactions still open, which this leaves out), then the same record. The cursor starts before `recorded`.
 */
async function deliverThroughReads(db: Db, recorded: Recorded[]): Promise<number> {
  let delivered = 0;
  let after = recorded[0]!.seq - 1;
  for (let b = 0; b < BATCHES; b++) {
    const { rows } = await sql<Recorded>`
      select notification_id, platform_code, resource_key, seq, payload_type, payload, state_token, round_attempts,
        attempt_count, (extract(epoch from greatest(created_at, redelivered_at)) * 1000)::float8 as round_started_ms
      from webhook_notifications
      where platform_code = ${BENCH_PLATFORM} and seq > ${after}::bigint and status in ('pending', 'retrying')
      order by seq limit ${BATCH}::int`.execute(db);
    after = rows.at(-1)?.seq ?? after;
    await recordDelivered(db, rows);
    delivered += rows.length;
  }
  return delivered;
}

/** The floor of any design that keeps the notification's row as its record: the record alone, of `recorded`. */
async function recordAlone(db: Db, recorded: Recorded[]): Promise<number> {
  for (let at = 0; at < recorded.length; at += BATCH)
    await recordDelivered(db, recorded.slice(at, at + BATCH));
  return recorded.length;
}

/** The columns today's settle writes for a first attempt that succeeded (migration 0025), from arrays. */
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
    await sql`create table bench_inbox (lane_partition smallint not null, seq bigint not null,
      notification_id uuid not null, primary key (lane_partition, seq))`.execute(db);
    // Taken in commit order across the partitions a worker holds, without reading the rest of the inbox.
    await sql`create index on bench_inbox (seq)`.execute(db);
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
    const backendCpuMs = () => procStatCpuMs(`/proc/${rows[0]!.pid}/stat`);
    const count = BATCH * BATCHES;
    /** PostgreSQL CPU µs per delivery of one design's statements, on notifications recorded just before. */
    const measure = async (
      recording: { perLane: number; tag: string; then: 'lanes' | 'inbox' | 'nothing' },
      deliver: (recorded: Recorded[]) => Promise<number>,
    ) => {
      const recorded = await recordNotifications(db, { count, ...recording });
      await sql`analyze webhook_notifications`.execute(db);
      const before = backendCpuMs();
      const delivered = await deliver(recorded);
      if (delivered !== count) throw new Error(`delivered ${delivered} of ${count}`);
      return ((backendCpuMs() - before) * 1000) / delivered;
    };
    console.log(
      `webhook store costs: PostgreSQL CPU per delivery of the delivery's statements, ${count} deliveries a measurement, ${ROUNDS} rounds`,
    );
    /** Each comparison's ratio per round, by its label (in the order printed). */
    const ratios = new Map<string, number[]>();
    const lanes = () => deliverThroughLanes(db);
    for (let round = 1; round <= ROUNDS; round++) {
      const lanesOne = await measure({ perLane: 1, tag: `r${round}-one`, then: 'lanes' }, lanes);
      const lanesTen = await measure({ perLane: 10, tag: `r${round}-ten`, then: 'lanes' }, lanes);
      const inbox = await measure({ perLane: 1, tag: `r${round}-inbox`, then: 'inbox' }, () =>
        deliverThroughInbox(db),
      );
      const reads = await measure({ perLane: 1, tag: `r${round}-reads`, then: 'nothing' }, (recorded) =>
        deliverThroughReads(db, recorded),
      );
      const record = await measure({ perLane: 1, tag: `r${round}-record`, then: 'nothing' }, (recorded) =>
        recordAlone(db, recorded),
      );
      for (const [label, ratio] of [
        ['inbox sketch against lanes, 1 per resource', inbox / lanesOne],
        ['inbox sketch against lanes, 10 per resource', inbox / lanesTen],
        ['read sketch against lanes, 1 per resource', reads / lanesOne],
        ['the record alone against lanes, 1 per resource', record / lanesOne],
      ] as const) {
        ratios.set(label, [...(ratios.get(label) ?? []), ratio]);
      }
      console.log(
        `  round ${round}: lanes, 1 per resource ${lanesOne.toFixed(0)} µs; lanes, 10 per resource ${lanesTen.toFixed(0)} µs; inbox sketch ${inbox.toFixed(0)} µs; read sketch ${reads.toFixed(0)} µs; the record alone ${record.toFixed(0)} µs`,
      );
    }
    console.log(`median of ${ROUNDS} rounds:`);
    for (const [label, values] of ratios) {
      console.log(
        `  ${label.padEnd(48)}${median(values).toFixed(2)}   (rounds: ${values.map((r) => r.toFixed(2)).join(', ')})`,
      );
    }
  } finally {
    await store.close();
    await database.drop();
  }
}

await main();
