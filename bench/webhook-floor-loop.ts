/**
 * The floor of a database-backed webhook delivery, for bench/webhooks.bench.ts: what a worker process costs
 * when it does nothing but what every outbox must do per notification: claim it (one statement per batch,
 * leasing rows of a narrow queue table), sign it (the same three signatures), POST it (the same undici
 * dispatch as src/domain/webhooks/webhook-sender.ts) and record the result (one statement per batch, a HOT
 * update of the notification and a delete of its queue row). It keeps no per-resource order, makes no retries,
 * renews no lease and records no failures, so it is not a design, only the bound a design cannot beat here:
 * the bench prints its ratio beside the service's.
 *
 *   node --import tsx bench/webhook-floor-loop.ts <database url> <receiver url> <secret>
 *
 * Runs until its stdin ends, on the tables the bench creates (floor_notifications, floor_queue).
 */
import pg from 'pg';
import { Agent } from 'undici';
import { webhookDeliveryHeaders } from '../src/contract/webhook-signature.ts';
import { bareDispatch } from './bench-support.ts';

const [databaseUrl, receiverUrl, secret] = process.argv.slice(2) as [string, string, string];
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
/** Rows held per slot (claimed or being delivered), as the service's dispatcher keeps. */
const PREFETCH = 8;
/** As the service's (src/domain/webhooks/webhook-delivery.ts). */
const SETTLE_GAP_MS = 25;

// Asynchronous commit, as the service's delivery bookkeeping.
const pool = new pg.Pool({
  connectionString: databaseUrl,
  max: 4,
  onConnect: (client) => client.query('set synchronous_commit = off'),
});
const agent = new Agent({ headersTimeout: 10_000, bodyTimeout: 10_000, keepAliveTimeout: 4_000 });
const { origin, pathname: path } = new URL(receiverUrl);

const CLAIM = `
  with claimed as (
    update floor_queue q set owner = $1, due_at = clock_timestamp() + interval '17 seconds'
    where q.ctid = any (array(
      select ctid from floor_queue where due_at <= clock_timestamp()
      order by due_at limit $2 for no key update skip locked))
    returning q.notification_id)
  select n.notification_id::text, n.payload_type, n.payload::text
  from claimed c join floor_notifications n using (notification_id)`;
const SETTLE = `
  with done as (delete from floor_queue q where q.notification_id = any ($1::uuid[]))
  update floor_notifications n set status = 'delivered', delivered_at = clock_timestamp(),
    attempt_count = n.attempt_count + 1, last_attempt_at = to_timestamp(r.started_ms / 1000.0),
    last_attempt_duration_ms = r.duration_ms, last_attempt_status_code = r.status_code
  from unnest($1::uuid[], $2::float8[], $3::int[], $4::int[]) r(id, started_ms, duration_ms, status_code)
  where n.notification_id = r.id`;

type Claimed = [id: string, payloadType: string, body: string];
const ready: Claimed[] = [];
let running = 0;
let claiming = false;
let settling = false;
let results = {
  ids: [] as string[],
  started: [] as number[],
  durations: [] as number[],
  codes: [] as number[],
};
const owner = `floor:${process.pid}`;

async function deliver([id, payloadType, body]: Claimed): Promise<void> {
  const startedAt = Date.now();
  const started = performance.now();
  const headers = webhookDeliveryHeaders({
    payloadType: payloadType as 'trade_status_changed',
    notificationId: id,
    timestampMs: startedAt,
    rawBody: body,
    secret,
  });
  const status = await bareDispatch(agent, { origin, path, body, headers });
  results.ids.push(id);
  results.started.push(startedAt);
  results.durations.push(Math.round(performance.now() - started));
  results.codes.push(status);
  settle();
}

function settle(): void {
  if (settling || results.ids.length === 0) return;
  settling = true;
  const batch = results;
  results = { ids: [], started: [], durations: [], codes: [] };
  pool.query(SETTLE, [batch.ids, batch.started, batch.durations, batch.codes]).then(
    () =>
      setTimeout(() => {
        settling = false;
        settle();
      }, SETTLE_GAP_MS),
    fail,
  );
}

function pump(): void {
  while (running < CONCURRENCY && ready.length > 0) {
    running++;
    deliver(ready.shift()!)
      .catch(fail)
      .finally(() => {
        running--;
        pump();
      });
  }
  if (claiming || ready.length >= 2 * CONCURRENCY) return;
  claiming = true;
  const limit = PREFETCH * CONCURRENCY - running - ready.length;
  pool.query<Claimed>({ text: CLAIM, values: [owner, limit], rowMode: 'array' }).then((claimed) => {
    ready.push(...claimed.rows);
    claiming = false;
    if (claimed.rows.length === 0) setTimeout(pump, 5);
    else pump();
  }, fail);
}

function fail(error: unknown): never {
  console.error(error);
  process.exit(1);
}

// Ends normally when the bench closes its stdin, so that --cpu-prof (BENCH_WORKER_NODE_ARGS) writes its
// profile.
process.stdin.on('end', () => process.exit(0)).resume();
pump();
