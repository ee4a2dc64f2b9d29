import { sql } from 'kysely';
import type { Executor } from '../../store/database.ts';
import type {
  AttemptOutcome,
  NotificationStatus,
  WebhookEndpointsTable,
} from '../../store/tables/webhooks.tables.ts';
import type { Insertable } from 'kysely';
import type { ReadNotification } from './lane-reads.repository.ts';
import { countOf } from '../paging.ts';

/**
 * SQL of webhook configuration and delivery. Statements on the delivery path are single round trips, since the
 * delivery rate is bounded by them: a worker's partition leases and its attempts' records (functions of migration
 * 0026) are here, its reads of the notifications in lane-reads.repository.ts.
 */

// --- operator configuration -------------------------------------------------------------------------

/** `lock`: its row locked until the transaction ends (a change made of what it holds). */
export function findEndpoint(db: Executor, platformCode: string, { lock = false } = {}) {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .$if(lock, (query) => query.forUpdate())
    .executeTakeFirst();
}

export interface EndpointWrite {
  url: string;
  /** undefined = keep the stored secret; null = remove it. */
  secretCiphertext: Buffer | null | undefined;
  payloadTypes: string[] | null;
  enabled: boolean;
}

/** The NOTIFY (at commit) that tells the dispatchers to read the platform's lanes afresh. */
function lanesChanged(platformCode: string) {
  return sql`pg_notify(${LANES_CHANNEL}, ${LANES_CHANGED_PREFIX + platformCode})`;
}

/**
 * Writes the platform's endpoint, and tells the dispatchers (at commit when `db` is a transaction) to read
 * afresh the lanes they are working, so that no attempt goes out with the old URL, secret or types.
 */
export async function upsertEndpoint(db: Executor, platformCode: string, write: EndpointWrite) {
  const row = await writeEndpoint(db, platformCode, write);
  await sql`select ${lanesChanged(platformCode)}`.execute(db);
  return row;
}

function writeEndpoint(db: Executor, platformCode: string, write: EndpointWrite) {
  const values: Insertable<WebhookEndpointsTable> = {
    platform_code: platformCode,
    url: write.url,
    secret_ciphertext: write.secretCiphertext ?? null,
    payload_types: write.payloadTypes,
    enabled: write.enabled,
  };
  return db
    .insertInto('webhook_endpoints')
    .values(values)
    .onConflict((oc) =>
      oc.column('platform_code').doUpdateSet({
        url: write.url,
        payload_types: write.payloadTypes,
        enabled: write.enabled,
        updated_at: sql<Date>`now()`,
        ...(write.secretCiphertext === undefined ? {} : { secret_ciphertext: write.secretCiphertext }),
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

// --- operator listing and redelivery ------------------------------------------------------------------

export interface NotificationFilter {
  platformCode: string;
  status?: NotificationStatus;
  payloadType?: string;
  resourceKey?: string;
}

function filtered(db: Executor, filter: NotificationFilter) {
  let query = db.selectFrom('webhook_notifications').where('platform_code', '=', filter.platformCode);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.payloadType) query = query.where('payload_type', '=', filter.payloadType);
  if (filter.resourceKey) query = query.where('resource_key', '=', filter.resourceKey);
  return query;
}

export function countNotifications(db: Executor, filter: NotificationFilter): Promise<number> {
  return countOf(filtered(db, filter));
}

const NOTIFICATION_COLUMNS = [
  'notification_id',
  'seq',
  'platform_code',
  'payload_type',
  'resource_key',
  'payload',
  'created_at',
  'status',
  'status_reason',
  'next_attempt_at',
  'attempt_count',
  'last_attempt_at',
  'delivered_at',
  'dead_at',
] as const;

/** Newest first. */
export function listNotifications(
  db: Executor,
  filter: NotificationFilter,
  page: { limit: number; offset: number },
) {
  return filtered(db, filter)
    .select(NOTIFICATION_COLUMNS)
    .orderBy('seq', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
}

export type NotificationRow = Awaited<ReturnType<typeof listNotifications>>[number];

export function findNotification(db: Executor, notificationId: string) {
  return db
    .selectFrom('webhook_notifications')
    .select(NOTIFICATION_COLUMNS)
    .where('notification_id', '=', notificationId)
    .executeTakeFirst();
}

export function listAttempts(db: Executor, notificationIds: string[]) {
  if (notificationIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('notification_id', 'in', notificationIds)
    .orderBy('notification_id')
    .orderBy('attempt_number')
    .execute();
}

export type AttemptRow = Awaited<ReturnType<typeof listAttempts>>[number];

/**
 * What a redelivery sets: back to pending, due now, at the top of the retry schedule, and new to the reads after a
 * cursor (migration 0026: the reads find them by their new txid, as a notification recorded now). Their ids (and so
 * `x-svc-hook-notification-id`) do not change.
 */
const REDELIVERED = sql`status = 'pending', status_reason = null, round_attempts = 0, next_attempt_at = now(),
  dead_at = null, state_token = gen_random_uuid(), redelivered_at = now(), txid = pg_current_xact_id()`;

/** Redelivers one notification of the platform and wakes the workers, in one statement. Returns how many (0 or 1). */
export async function redeliverOne(
  db: Executor,
  platformCode: string,
  notificationId: string,
): Promise<number> {
  const result = await sql<{ count: number }>`
    with redelivered as (
      update webhook_notifications set ${REDELIVERED}
      where platform_code = ${platformCode} and notification_id = ${notificationId}::uuid
      returning 1
    )
    select (select count(*) from redelivered)::int as count, ${lanesChanged(platformCode)}
  `.execute(db);
  return Number(result.rows[0]?.count ?? 0);
}

/** The highest seq of the platform's notifications ('0' when it has none): where a redelivery since a time ends. */
export async function lastSeqOf(db: Executor, platformCode: string): Promise<string> {
  const result = await sql<{ seq: string }>`
    select coalesce(max(seq), 0)::text as seq from webhook_notifications where platform_code = ${platformCode}
  `.execute(db);
  return result.rows[0]?.seq ?? '0';
}

export interface RedeliverRange {
  platformCode: string;
  /** Recorded at or after (epoch ms). */
  sinceMs: number;
  /** Recorded before (epoch ms); none: no end. */
  untilMs?: number;
  statuses?: NotificationStatus[];
  /** Only these payload types (the platform's subscription); null = all. */
  payloadTypes: string[] | null;
  /** Seqs after this one… */
  afterSeq: string;
  /** …up to this one (inclusive): the platform's last when the redelivery began. */
  lastSeq: string;
}

/**
 * One batch of a redelivery since a time: up to `batch` of the notifications in the range, in seq order (so a
 * resource's earlier notification is redelivered no later than its later ones), in one statement that also wakes
 * the workers. Returns how many it redelivered and, when more of the range may follow, the seq it reached (the
 * next batch's `afterSeq`); null when the range is done. A batch of a few thousand rows takes a fraction of a
 * second: a redelivery of a million notifications in one statement ran past the statement bound (30 s), answered
 * 502 and committed anyway, holding every row's lock meanwhile (probe).
 */
export async function redeliverBatch(
  db: Executor,
  range: RedeliverRange,
  batch: number,
): Promise<{ redelivered: number; reachedSeq: string | null }> {
  const conditions = [
    sql`platform_code = ${range.platformCode}`,
    sql`seq > ${range.afterSeq}::bigint and seq <= ${range.lastSeq}::bigint`,
    sql`created_at >= to_timestamp(${range.sinceMs}::double precision / 1000)`,
  ];
  if (range.untilMs !== undefined)
    conditions.push(sql`created_at < to_timestamp(${range.untilMs}::double precision / 1000)`);
  if (range.statuses) conditions.push(sql`status = any(${range.statuses}::text[])`);
  if (range.payloadTypes) conditions.push(sql`payload_type = any(${range.payloadTypes}::text[])`);
  const where = sql.join(conditions, sql` and `);
  // The batch's last seq first, then the update up to it, which checks each row again as it locks it (a worker
  // may have moved it on meanwhile), as the one statement did.
  const result = await sql<{ count: number; reached: string | null }>`
    with boundary as (
      select seq from webhook_notifications where ${where} order by seq offset ${batch - 1} limit 1
    ), redelivered as (
      update webhook_notifications set ${REDELIVERED}
      where ${where} and seq <= coalesce((select seq from boundary), ${range.lastSeq}::bigint)
      returning 1
    )
    select (select count(*) from redelivered)::int as count, (select seq from boundary)::text as reached,
      ${lanesChanged(range.platformCode)}
  `.execute(db);
  const row = result.rows[0];
  return { redelivered: Number(row?.count ?? 0), reachedSeq: row?.reached ?? null };
}

// --- delivery ----------------------------------------------------------------------------------------

/** The NOTIFY channel of webhook delivery (migration 0008): a notification or redelivery awaits, or the like. */
export const LANES_CHANNEL = 'svc_webhooks';
/**
 * The payload of a NOTIFY on LANES_CHANNEL that says more than "new work": an operator changed one platform's
 * notifications or webhook endpoint, so that platform's lanes being worked must be read afresh (their order,
 * URL, secret, types). `changed:<platform code>`.
 */
const LANES_CHANGED_PREFIX = 'changed:';

/** The payload of a NOTIFY on LANES_CHANNEL that says partitions were given back: a worker with room takes them. */
export const PARTITIONS_FREED = 'partitions';

/**
 * Tells every worker that partitions were given back (a stopping worker's, or a full one's), so that one with room
 * takes them now rather than at its next renewal.
 */
export async function announcePartitionsFreed(db: Executor): Promise<void> {
  await sql`select pg_notify(${LANES_CHANNEL}, ${PARTITIONS_FREED})`.execute(db);
}

/** The platform whose lanes a LANES_CHANNEL payload says changed, or null (plain "new work"). */
export function changedPlatform(payload: string): string | null {
  return payload.startsWith(LANES_CHANGED_PREFIX) ? payload.slice(LANES_CHANGED_PREFIX.length) : null;
}

/** A worker's partitions after its renewal (webhook_lease_partitions, migration 0026). */
export interface PartitionLeases {
  /** The partitions it holds, each for leaseMs from the renewal. */
  partitions: number[];
  /** The partitions over the workers that want some, rounded down. */
  fairShare: number;
  /** Another worker holds fewer than fairShare: one over it gives back what it can. */
  othersShort: boolean;
}

/**
 * Renews `owner`'s partition leases to now + leaseMs, after giving back `giveBack`, and, when it `wants` more, takes
 * free ones up to a fair share (every free one while no other worker is short of its share); one round trip.
 */
export async function leasePartitions(
  db: Executor,
  owner: string,
  options: { leaseMs: number; giveBack: readonly number[]; wants: boolean },
): Promise<PartitionLeases> {
  const { rows } = await sql<{ partitions: number[]; fair_share: number; others_short: boolean }>`
    select partitions, fair_share, others_short
    from webhook_lease_partitions(${owner}, ${options.leaseMs}::int, ${options.giveBack}::smallint[],
      ${options.wants})`.execute(db);
  const { partitions, fair_share, others_short } = rows[0]!;
  return { partitions, fairShare: fair_share, othersShort: others_short };
}

/** What a platform's webhook endpoint says of its deliveries, as a worker keeps it. */
export interface EndpointView {
  url: string;
  /** The sealed secret (secret-box.ts) in base64, or null when it has none. */
  sealedSecret: string | null;
  payloadTypes: string[] | null;
  enabled: boolean;
}

/** The endpoints of `platforms` (null: every platform's); a platform without one is absent. */
export async function readEndpoints(
  db: Executor,
  platforms: readonly string[] | null,
): Promise<Map<string, EndpointView>> {
  const { rows } = await sql<{
    platform_code: string;
    url: string;
    sealed_secret: string | null;
    payload_types: string[] | null;
    enabled: boolean;
  }>`select platform_code, url, encode(secret_ciphertext, 'base64') as sealed_secret, payload_types, enabled
    from webhook_endpoints
    ${platforms === null ? sql`` : sql`where platform_code = any (${platforms}::text[])`}`.execute(db);
  return new Map(
    rows.map((r) => [
      r.platform_code,
      { url: r.url, sealedSecret: r.sealed_secret, payloadTypes: r.payload_types, enabled: r.enabled },
    ]),
  );
}

/**
 * Why a platform does not get a notification of `payloadType` (no endpoint, disabled, not subscribed), or null:
 * migration 0002's webhook_skip_reason, which the outbox applies as it records, applied by a worker at its turn.
 */
export function skipReason(endpoint: EndpointView | undefined, payloadType: string): string | null {
  if (!endpoint) return 'no webhook configured';
  if (!endpoint.enabled) return 'webhook disabled';
  if (endpoint.payloadTypes !== null && !endpoint.payloadTypes.includes(payloadType))
    return 'payload type not subscribed';
  return null;
}

export interface AttemptRecord {
  /** What was attempted; null when nothing was sent (the notification is skipped). */
  attempt: {
    startedAt: Date;
    durationMs: number;
    statusCode: number | null;
    error: string | null;
    outcome: AttemptOutcome;
  } | null;
  /** The state the notification moves to. */
  status: NotificationStatus;
  statusReason: string | null;
  roundAttempts: number;
  /** For `retrying` (and `pending` after an aborted attempt): when the next attempt may start. */
  nextAttemptInMs: number | null;
}

/** The result of one attempt (or skip) of a lane's notification, to be recorded. */
export interface AttemptResultRecord {
  head: Pick<
    ReadNotification,
    | 'notification_id'
    | 'state_token'
    | 'round_started_ms'
    | 'lane_partition'
    | 'attempt_count'
    | 'payload_type'
  >;
  /** The state token the notification gets if the record applies (chosen by the caller, so it can go on). */
  newStateToken: string;
  record: AttemptRecord;
}

export interface RecordedAttempt {
  /** The owner still holds the notification's partition. */
  leaseHeld: boolean;
  /** The result's state change applied (false: an operator's redelivery came first). */
  applied: boolean;
}

/**
 * Records attempts' results for one owner in one round trip (webhook_record_attempts, migration 0026). The attempt
 * is recorded (on its notification's row) in any case, since the request was made; the notification's state
 * changes only if its state token is still the one the attempt started from.
 */
export async function recordAttempts(
  db: Executor,
  owner: string,
  results: readonly AttemptResultRecord[],
): Promise<RecordedAttempt[]> {
  const input = results.map((result, i) => {
    const attempt = result.record.attempt;
    return {
      idx: i + 1,
      lane_partition: result.head.lane_partition,
      id: result.head.notification_id,
      token: result.head.state_token,
      new_token: result.newStateToken,
      attempted: attempt !== null,
      started_at_ms: attempt?.startedAt.getTime() ?? null,
      duration_ms: attempt?.durationMs ?? 0,
      status_code: attempt?.statusCode ?? null,
      error: attempt?.error ?? null,
      outcome: attempt?.outcome ?? null,
      status: result.record.status,
      reason: result.record.statusReason,
      round_attempts: result.record.roundAttempts,
      delay_ms: result.record.nextAttemptInMs,
    };
  });
  const { rows } = await sql<{ idx: number; lease_held: boolean; applied: boolean | null }>`
    select * from webhook_record_attempts(${owner}, ${JSON.stringify(input)}::jsonb)
  `.execute(db);
  const answers = new Array<RecordedAttempt>(results.length);
  for (const row of rows) answers[row.idx - 1] = { leaseHeld: row.lease_held, applied: row.applied === true };
  return Array.from(answers, (answer) => answer ?? { leaseHeld: false, applied: false });
}

// --- metrics ------------------------------------------------------------------------------------------

export interface QueueStats {
  pending: number;
  retrying: number;
  dead: number;
  /**
   * Seconds since the oldest undelivered (pending or retrying) notification was recorded, or redelivered by
   * an operator if it was since (migration 0015); 0 when none.
   */
  oldestPendingAgeSeconds: number;
}

export async function queueStats(db: Executor): Promise<QueueStats> {
  const result = await sql<{
    pending: number;
    retrying: number;
    dead: number;
    oldest_age: number | null;
  }>`
    select
      (select count(*) from webhook_notifications where status = 'pending')::int as pending,
      (select count(*) from webhook_notifications where status = 'retrying')::int as retrying,
      (select count(*) from webhook_notifications where status = 'dead')::int as dead,
      (select extract(epoch from (now() - greatest(created_at, redelivered_at)))::float8
         from webhook_notifications where status in ('pending', 'retrying')
         order by greatest(created_at, redelivered_at) limit 1)
        as oldest_age
  `.execute(db);
  const row = result.rows[0]!;
  return {
    pending: Number(row.pending),
    retrying: Number(row.retrying),
    dead: Number(row.dead),
    oldestPendingAgeSeconds: Math.max(0, Number(row.oldest_age ?? 0)),
  };
}

// --- retention ------------------------------------------------------------------------------------------

export interface PurgeBatch {
  purged: number;
  /** The last seq looked at (where the next batch starts); `afterSeq` when there was nothing after it. */
  lastSeq: number;
  /** How many notifications the batch looked at (fewer than asked: the end of the table). */
  scanned: number;
  /** The batch reached notifications recorded at or after `before`: the purge is done. */
  reachedNewer: boolean;
}

/**
 * One batch of the retention purge: the `batch` oldest notifications after `afterSeq` in commit order (seq's
 * unique index, which follows created_at but for transactions that ran long), of which those recorded, and
 * delivered or skipped, before `before` (and not redelivered since) are deleted, with their attempts kept
 * from before 0011. Dead and undelivered ones stay. A notification being changed (an operator's redelivery)
 * is skipped, not waited for: the next run takes it if it still qualifies.
 */
export async function purgeFinishedNotifications(
  db: Executor,
  before: Date,
  afterSeq: number,
  batch: number,
): Promise<PurgeBatch> {
  const { rows } = await sql<{
    purged: number;
    last_seq: number | null;
    scanned: number;
    newer: boolean | null;
  }>`
    with scanned as (
      select notification_id, seq, created_at < ${before} as old
      from webhook_notifications
      where seq > ${afterSeq}::bigint
      order by seq
      limit ${batch}
    ), purgeable as (
      select n.notification_id
      from webhook_notifications n
      join scanned s using (notification_id)
      -- One redelivered since is kept for the retention after its latest redelivery, delivery or skip
      -- (migration 0016: one skipped at its turn after weeks pending stays redeliverable for the retention).
      where s.old and n.status in ('delivered', 'skipped')
        and greatest(n.created_at, n.delivered_at, n.redelivered_at, n.skipped_at) < ${before}
      for update of n skip locked
    ), attempts as (
      delete from webhook_attempts_before_0011 a using purgeable p where a.notification_id = p.notification_id
    ), purged as (
      delete from webhook_notifications n using purgeable p
      where n.notification_id = p.notification_id
      returning 1
    )
    select (select count(*) from purged) as purged, (select max(seq) from scanned) as last_seq,
      (select count(*) from scanned) as scanned, (select bool_or(not old) from scanned) as newer`.execute(db);
  const row = rows[0]!;
  return {
    purged: row.purged,
    lastSeq: row.last_seq ?? afterSeq,
    scanned: row.scanned,
    reachedNewer: row.newer === true,
  };
}
