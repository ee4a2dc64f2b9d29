/**
 * A sketch of the webhook delivery redesign (README, Webhooks, "Where this leaves issue 4's goals"), for
 * bench/webhooks.bench.ts: what one worker process and PostgreSQL would cost per delivery if workers leased
 * partitions of the lanes and found their work with reads instead of claiming lane rows. Measured in each round
 * beside the service's worker, it tells what the redesign would gain before it is built (session 20: 1.2–1.5 times
 * the service's deliveries a second, PostgreSQL's share down to the bare loop's; README run 19).
 *
 * What it does, on a copy of webhook_notifications (same columns and indexes, plus the two the design needs:
 * the partition of the notification's lane and the id of the transaction that recorded it):
 * - leases every partition (one worker here; a statement a second renews them);
 * - reads its partitions' undelivered notifications after a cursor, in seq order, a few hundred a statement.
 *   The cursor is the last seq read plus the transactions still open at the read (the snapshot's xip and
 *   xmax): a notification whose transaction commits after a later one's was read is found by its
 *   transaction's id, not passed over; what is found twice is known by its id and state token;
 * - keeps each resource's order in memory (a lane's notifications one at a time, in seq order) and up to
 *   SVC_WORKER_CONCURRENCY attempts under way, through the service's own sender (webhook-sender.ts), headers
 *   and signatures, and its metrics (an attempt and a delivery observed per notification);
 * - records each result as the service's settle does (the same update of the notification, state token
 *   checked, the partition's lease checked), a statement per SETTLE_GAP_MS, asynchronous commit.
 * What it leaves out, which the design would have: retries and their timers (every attempt here succeeds),
 * slow-receiver shares, platform shares, operators' changes, the LISTEN wake-ups (it polls every 5 ms when idle),
 * and handing partitions between workers.
 *
 *   node --import tsx bench/webhook-partition-sketch.ts <database url> <secret>
 *
 * Runs until its stdin ends, on the tables the bench creates (sketch_notifications, sketch_partitions).
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { webhookDeliveryHeaders } from '../src/contract/webhook-signature.ts';
import { createWebhookMetrics } from '../src/domain/webhooks/webhooks.metrics.ts';
import { createWebhookSender } from '../src/domain/webhooks/webhook-sender.ts';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Db } from '../src/store/database.ts';

const [databaseUrl, secret] = process.argv.slice(2) as [string, string];
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
/** As the service's (src/domain/webhooks/webhook-delivery.ts). */
const SETTLE_GAP_MS = 25;
const BATCH_MAX = 100;
/**
 * The reader reads ahead while fewer lanes than this many per slot are ready (counted in lanes: with ten
 * notifications per resource, 80 notifications were 8 lanes for 10 slots), and at most MAX_HELD notifications.
 */
const READY_LANES_PER_SLOT = 2;
const MAX_HELD = 5_000;
const READ_LIMIT = 500;
const LEASE_MS = 17_000;

// Kysely over a plain pool, as the service's store but without its statement deadlines: the bench pauses this
// process (SIGSTOP) while it measures the others, and a deadline timer that fires on waking would take an answer
// waiting in the socket for a lost connection.
const db: Db = new Kysely({
  dialect: new PostgresDialect({
    pool: new pg.Pool({
      connectionString: databaseUrl,
      max: 4,
      // Asynchronous commit, as the service's delivery bookkeeping.
      options: '-c synchronous_commit=off',
    }),
  }),
});
const sender = createWebhookSender({ timeoutMs: 10_000 });
const metrics = createWebhookMetrics(db);
metrics.register(new Registry());
const owner = `sketch:${process.pid}`;

interface Head {
  notification_id: string;
  seq: number;
  platform_code: string;
  resource_key: string;
  payload_type: string;
  payload: unknown;
  state_token: string;
  round_attempts: number;
  round_started_ms: number;
  url: string;
}

/** A lane in memory: one platform's notifications for one resource, oldest first. */
interface Lane {
  key: string;
  heads: Head[];
  running: boolean;
}
const lanes = new Map<string, Lane>();
/** Lanes with work and no attempt under way, in the order they became ready. */
const ready: Lane[] = [];
/** Notifications in memory, not yet attempted. */
let held = 0;
let running = 0;
/** Notifications taken, by id, with the state token they were taken with (what a second read of them skips). */
const seen = new Map<string, string>();

/** The read cursor: the last seq read, and the transactions open at the last read. */
let afterSeq = 0;
let openXids: string[] = [];
let snapshotXmax = '0';
let reading = false;
/** The next look while the last read found nothing (one at a time, however many reads came back empty). */
let poll: NodeJS.Timeout | null = null;

let owned: number[] = [];
async function renewPartitions(): Promise<void> {
  const { rows } = await sql<{ lane_partition: number }>`
    update sketch_partitions set owner = ${owner},
      lease_until = clock_timestamp() + ${LEASE_MS}::int * interval '1 millisecond'
    where owner = ${owner} or owner is null or lease_until < clock_timestamp()
    returning lane_partition`.execute(db);
  owned = rows.map((r) => r.lane_partition);
}

async function read(): Promise<void> {
  if (reading || held >= MAX_HELD) return;
  reading = true;
  try {
    const { rows } = await sql<Head & { snap: string }>`
      with s as materialized (select pg_current_snapshot() as snap),
      -- After the cursor, and of the transactions open at the last read: each through its own index, in seq
      -- order, so that neither scans past the first READ_LIMIT.
      found as (
        (select n.* from sketch_notifications n
          where n.seq > ${afterSeq}::bigint and n.status in ('pending', 'retrying')
            and n.lane_partition = any (${owned}::int[])
          order by n.seq limit ${READ_LIMIT}::int)
        union
        (select n.* from sketch_notifications n
          where (n.txid = any (${openXids}::xid8[]) or n.txid >= ${snapshotXmax}::xid8)
            and n.status in ('pending', 'retrying') and n.lane_partition = any (${owned}::int[])
          order by n.seq limit ${READ_LIMIT}::int)
      )
      select s.snap::text as snap, n.*
      from s left join lateral (
        select n.notification_id, n.seq::float8 as seq, n.platform_code, n.resource_key, n.payload_type,
          n.payload, n.state_token, n.round_attempts,
          (extract(epoch from coalesce(n.redelivered_at, n.created_at)) * 1000)::float8 as round_started_ms,
          e.url
        from found n
        left join webhook_endpoints e on e.platform_code = n.platform_code
        order by n.seq
        limit ${READ_LIMIT}::int
      ) n on true`.execute(db);
    const [, xmax, xip] = rows[0]!.snap.split(':') as [string, string, string];
    snapshotXmax = xmax;
    openXids = xip === '' ? [] : xip.split(',');
    const found = rows.filter((r) => r.notification_id !== null);
    if (found.length === READ_LIMIT) afterSeq = found.at(-1)!.seq;
    else if (found.length > 0) afterSeq = Math.max(afterSeq, found.at(-1)!.seq);
    for (const head of found) {
      if (seen.get(head.notification_id) === head.state_token) continue;
      seen.set(head.notification_id, head.state_token);
      const key = `${head.platform_code} ${head.resource_key}`;
      let lane = lanes.get(key);
      if (!lane) lanes.set(key, (lane = { key, heads: [], running: false }));
      lane.heads.push(head);
      held++;
      if (!lane.running && lane.heads.length === 1) ready.push(lane);
    }
    if (found.length === 0 && !poll) {
      poll = setTimeout(() => {
        poll = null;
        read().then(pump, fail);
      }, 5);
    }
  } finally {
    reading = false;
  }
}

interface Result {
  head: Head;
  newToken: string;
  startedAt: number;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  outcome: string;
}
const unsent: Result[] = [];
let settling = false;

/**
 * The service's record, for a batch of results, with the partition's lease. A copy of migration 0025's update on
 * purpose (the duplicates tool names it): that one runs inside webhook_settle_lanes, with the lanes this sketch has
 * none of, and the sketch must pay for the same record to be compared with the service.
 */
function settle(): void {
  if (settling || unsent.length === 0) return;
  settling = true;
  const batch = unsent.splice(0, BATCH_MAX);
  const items = batch.map((r, i) => ({
    idx: i + 1,
    id: r.head.notification_id,
    token: r.head.state_token,
    new_token: r.newToken,
    attempted: true,
    started_at_ms: r.startedAt,
    duration_ms: r.durationMs,
    status_code: r.statusCode,
    error: r.error,
    outcome: r.outcome,
    status: 'delivered',
    reason: null,
    round_attempts: r.head.round_attempts,
    delay_ms: null,
  }));
  sql<{ idx: number; applied: boolean }>`
    with i as (
      select * from jsonb_to_recordset(${JSON.stringify(items)}::jsonb) as x(idx int, id uuid, token uuid,
        new_token uuid, attempted boolean, started_at_ms float8, duration_ms int, status_code int, error text,
        outcome text, status text, reason text, round_attempts int, delay_ms int)
    )
    update sketch_notifications n set
      attempt_count = n.attempt_count + case when i.attempted then 1 else 0 end,
      earlier_attempts = case when i.attempted and n.last_attempt_outcome is not null
        then coalesce(n.earlier_attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
          'attempt_number', n.attempt_count, 'started_at', n.last_attempt_at,
          'duration_ms', n.last_attempt_duration_ms, 'status_code', n.last_attempt_status_code,
          'error', n.last_attempt_error, 'outcome', n.last_attempt_outcome, 'worker', n.last_attempt_worker))
        else n.earlier_attempts end,
      last_attempt_at = case when i.attempted then to_timestamp(i.started_at_ms / 1000.0) else n.last_attempt_at end,
      last_attempt_duration_ms = case when i.attempted then i.duration_ms else n.last_attempt_duration_ms end,
      last_attempt_status_code = case when i.attempted then i.status_code else n.last_attempt_status_code end,
      last_attempt_error = case when i.attempted then i.error else n.last_attempt_error end,
      last_attempt_outcome = case when i.attempted then i.outcome else n.last_attempt_outcome end,
      last_attempt_worker = case when i.attempted then ${owner} else n.last_attempt_worker end,
      status = case when n.state_token = i.token then i.status else n.status end,
      status_reason = case when n.state_token = i.token then i.reason else n.status_reason end,
      round_attempts = case when n.state_token = i.token then i.round_attempts else n.round_attempts end,
      next_attempt_at = case when n.state_token = i.token and i.delay_ms is not null
        then clock_timestamp() + i.delay_ms * interval '1 millisecond' else n.next_attempt_at end,
      delivered_at = case when n.state_token = i.token and i.status = 'delivered'
        then clock_timestamp() else n.delivered_at end,
      state_token = case when n.state_token = i.token then i.new_token else n.state_token end
    from i
    where n.notification_id = any (${batch.map((r) => r.head.notification_id)}::uuid[])
      and n.notification_id = i.id and n.state_token <> i.new_token
      and exists (select 1 from sketch_partitions p
        where p.lane_partition = n.lane_partition and p.owner = ${owner})
    returning i.idx, n.state_token = i.new_token as applied`
    .execute(db)
    .then(() => {
      for (const r of batch) {
        metrics.observeDelivered((r.startedAt + r.durationMs - r.head.round_started_ms) / 1000);
        seen.delete(r.head.notification_id);
      }
      setTimeout(() => {
        settling = false;
        settle();
      }, SETTLE_GAP_MS);
    }, fail);
}

async function attempt(head: Head): Promise<void> {
  const rawBody = JSON.stringify(head.payload);
  const headers = webhookDeliveryHeaders({
    payloadType: head.payload_type as 'trade_status_changed',
    notificationId: head.notification_id,
    timestampMs: Date.now(),
    rawBody,
    secret,
  });
  const result = await sender.send({ url: head.url, rawBody, headers });
  metrics.observeAttempt(result.outcome, result.durationMs / 1000);
  unsent.push({ head, newToken: randomUUID(), ...result });
  settle();
}

/** Works a lane's heads one at a time, in order, then frees its slot. */
async function work(lane: Lane): Promise<void> {
  lane.running = true;
  while (lane.heads.length > 0) {
    const head = lane.heads[0]!;
    held--;
    await attempt(head);
    lane.heads.shift();
  }
  // In the same turn as the loop's last check: a read cannot add a head in between.
  lane.running = false;
  lanes.delete(lane.key);
}

function pump(): void {
  while (running < CONCURRENCY && ready.length > 0) {
    const lane = ready.shift()!;
    running++;
    work(lane)
      .catch(fail)
      .finally(() => {
        running--;
        pump();
      });
  }
  // Not while a read is under way: its end pumps.
  if (ready.length < READY_LANES_PER_SLOT * CONCURRENCY && !reading) void read().then(pump, fail);
}

function fail(error: unknown): never {
  console.error(error);
  process.exit(1);
}

await renewPartitions();
setInterval(() => void renewPartitions().catch(fail), 1_000).unref();
// Ends normally when the bench closes its stdin, so that --cpu-prof (BENCH_WORKER_NODE_ARGS) writes its profile.
process.stdin.on('end', () => process.exit(0)).resume();
pump();
