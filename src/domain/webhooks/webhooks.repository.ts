import { sql, type RawBuilder } from 'kysely';
import type { Executor } from '../../store/database.ts';
import type {
  AttemptOutcome,
  NotificationStatus,
  WebhookEndpointsTable,
} from '../../store/tables/webhooks.tables.ts';
import type { Insertable } from 'kysely';
import type { Lane } from './delivery-lane.ts';
import { countOf } from '../paging.ts';

/**
 * SQL of webhook configuration and delivery. Statements on the delivery path are single round trips (a
 * delivery is a lease claim, an attempt and a record), since the delivery rate is bounded by them; the
 * lease functions themselves are in migration 0002.
 */

// --- operator configuration -------------------------------------------------------------------------

export function findEndpoint(db: Executor, platformCode: string) {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('platform_code', '=', platformCode)
    .executeTakeFirst();
}

export interface EndpointWrite {
  url: string;
  /** undefined = keep the stored secret; null = remove it. */
  secretCiphertext: Buffer | null | undefined;
  payloadTypes: string[] | null;
  enabled: boolean;
}

/**
 * Writes the platform's endpoint, and tells the dispatchers (at commit when `db` is a transaction) to read
 * afresh the lanes they are working, so that no attempt goes out with the old URL, secret or types.
 */
export async function upsertEndpoint(db: Executor, platformCode: string, write: EndpointWrite) {
  const row = await writeEndpoint(db, platformCode, write);
  await sql`select pg_notify(${LANES_CHANNEL}, ${LANES_CHANGED_PREFIX + platformCode})`.execute(db);
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
 * Makes the lanes of the notifications `notifications` selects due now (unless a dispatcher holds them: its
 * release then sees the change) and wakes the dispatchers. Lanes in (platform, resource) order, as
 * webhook_release_lanes takes them.
 */
function wakeLanes(notifications: RawBuilder<unknown>) {
  return sql`
    insert into webhook_lanes (platform_code, resource_key, due_at)
    select lanes.platform_code, lanes.resource_key, clock_timestamp()
    from (select distinct n.platform_code, n.resource_key from ${notifications} n) lanes
    order by 1, 2
    on conflict (platform_code, resource_key) do update set due_at = least(webhook_lanes.due_at, excluded.due_at)
      where webhook_lanes.owner is null
    returning 1
  `;
}

/**
 * Puts notifications back to pending, due now, at the top of the retry schedule, and wakes their lanes, in
 * one statement. Their ids (and so `x-svc-hook-notification-id`) do not change. Returns how many.
 */
export async function redeliver(
  db: Executor,
  where: {
    platformCode: string;
    notificationId?: string;
    sinceMs?: number;
    statuses?: NotificationStatus[];
    /** Only these payload types (the platform's subscription); null = all. */
    payloadTypes: string[] | null;
  },
): Promise<number> {
  const conditions = [sql`platform_code = ${where.platformCode}`];
  if (where.notificationId) conditions.push(sql`notification_id = ${where.notificationId}::uuid`);
  if (where.sinceMs !== undefined)
    conditions.push(sql`created_at >= to_timestamp(${where.sinceMs}::double precision / 1000)`);
  if (where.statuses) conditions.push(sql`status = any(${where.statuses}::text[])`);
  if (where.payloadTypes) conditions.push(sql`payload_type = any(${where.payloadTypes}::text[])`);
  const result = await sql<{ count: number }>`
    with redelivered as (
      update webhook_notifications
      set status = 'pending', status_reason = null, round_attempts = 0, next_attempt_at = now(),
          dead_at = null, state_token = gen_random_uuid(), redelivered_at = now()
      where ${sql.join(conditions, sql` and `)}
      returning platform_code, resource_key
    ), woken as (${wakeLanes(sql`redelivered`)})
    select (select count(*) from redelivered)::int as count, (select count(*) from woken)::int as lanes,
      pg_notify(${LANES_CHANNEL}, ${LANES_CHANGED_PREFIX + where.platformCode})
  `.execute(db);
  return Number(result.rows[0]?.count ?? 0);
}

// --- delivery ----------------------------------------------------------------------------------------

/** The lane functions' name of the NOTIFY channel (migration 0008): a notification or redelivery awaits. */
export const LANES_CHANNEL = 'svc_webhooks';
/**
 * The payload of a NOTIFY on LANES_CHANNEL that says more than "new work": an operator changed one platform's
 * notifications or webhook endpoint, so that platform's lanes being worked must be read afresh (their order,
 * URL, secret, types). `changed:<platform code>`.
 */
const LANES_CHANGED_PREFIX = 'changed:';

/**
 * Tells every dispatcher there may be due work (a plain NOTIFY on LANES_CHANNEL): a stopping worker's lanes,
 * given back due at once, would otherwise wait for another worker's poll or their lease timer.
 */
export async function announceWork(db: Executor): Promise<void> {
  await sql`select pg_notify(${LANES_CHANNEL}, '')`.execute(db);
}

/** The platform whose lanes a LANES_CHANNEL payload says changed, or null (plain "new work"). */
export function changedPlatform(payload: string): string | null {
  return payload.startsWith(LANES_CHANGED_PREFIX) ? payload.slice(LANES_CHANGED_PREFIX.length) : null;
}

/** One of a lane's undelivered notifications, oldest first, with what is needed to deliver it. */
export interface LaneHead {
  notification_id: string;
  payload_type: string;
  payload: unknown;
  state_token: string;
  round_attempts: number;
  attempt_count: number;
  /** next_attempt_at had come when the lane was claimed (database clock). */
  due: boolean;
  /** ms from the claim until next_attempt_at (0 when due). */
  wait_ms: number;
  url: string | null;
  /** The endpoint's sealed secret (secret-box.ts) in base64, or null when it has none. */
  sealed_secret: string | null;
  /** Why this platform does not get it (webhook_skip_reason), or null. */
  skip_reason: string | null;
  /** Epoch ms when its current round began: its commit, or the operator's latest redelivery (migration 0012). */
  round_started_ms: number;
}

export interface ClaimedLane {
  lane: Lane;
  /** Its oldest undelivered notifications, in order; empty when the lane turned out to be empty. */
  heads: LaneHead[];
}

/**
 * Which platforms a claim takes few lanes of (their receivers are slow, webhook-dispatcher.ts): at most
 * `limit` of their due lanes, oldest first.
 */
export interface ClaimCap {
  platforms: string[];
  limit: number;
}

/**
 * Claims up to `limit` due lanes for `owner` for `leaseMs` (webhook_claim_lanes: SKIP LOCKED; an equal share
 * for each platform with due lanes, its oldest due first, and the platforms in turn, migration 0024), of
 * which at most `capped.limit` of the `capped` platforms (0022), with up to `perLane` notifications of each,
 * in one round trip.
 *
 * Only the columns a delivery uses, in the types it uses: a worker reads one of these rows per delivery, and
 * parsing the function's whole row (dates into Date objects, the secret's bytes into a Buffer) took twice the
 * CPU of these (bench/webhooks.bench.ts).
 */
export async function claimLanes(
  db: Executor,
  owner: string,
  options: { limit: number; leaseMs: number; perLane: number; capped?: ClaimCap | null },
): Promise<ClaimedLane[]> {
  const capped = options.capped ?? { platforms: [], limit: 0 };
  const { rows } = await sql<
    { platform_code: string; resource_key: string } & { [K in keyof LaneHead]: LaneHead[K] | null }
  >`select platform_code, resource_key, notification_id, payload_type, payload, state_token, round_attempts,
      attempt_count, due, wait_ms, url, encode(secret_ciphertext, 'base64') as sealed_secret, skip_reason,
      (extract(epoch from round_started_at) * 1000)::float8 as round_started_ms
    from webhook_claim_lanes(${owner}, ${options.limit}::int, ${options.leaseMs}::int, ${options.perLane}::int,
      ${capped.platforms}::text[], ${capped.limit}::int)`.execute(db);
  const lanes: ClaimedLane[] = [];
  let last: ClaimedLane | undefined;
  for (const row of rows) {
    if (!last || last.lane.platformCode !== row.platform_code || last.lane.resourceKey !== row.resource_key) {
      last = { lane: { platformCode: row.platform_code, resourceKey: row.resource_key }, heads: [] };
      lanes.push(last);
    }
    // A lane without undelivered notifications comes as one row of nulls.
    if (row.notification_id !== null) {
      last.heads.push({
        notification_id: row.notification_id,
        payload_type: row.payload_type!,
        payload: row.payload,
        state_token: row.state_token!,
        round_attempts: row.round_attempts!,
        attempt_count: row.attempt_count!,
        due: row.due!,
        wait_ms: row.wait_ms!,
        url: row.url,
        sealed_secret: row.sealed_secret,
        skip_reason: row.skip_reason,
        round_started_ms: row.round_started_ms!,
      });
    }
  }
  return lanes;
}

/**
 * ms until the next lane is due (a head's retry, or a lease's expiry), or null when there is no lane; of the
 * platforms not in `excluded` (those a claim takes none of, for now).
 */
export async function nextLaneDueInMs(db: Executor, excluded: string[] = []): Promise<number | null> {
  // Without exclusions, one descent of the due index; with them, one per platform with a lane (0024), rather
  // than passing over the excluded platforms' due lanes one by one. The `case`: greatest() ignores nulls, so
  // without it "no lane" read as "due now", and an idle dispatcher polled every few milliseconds.
  const firstDue =
    excluded.length === 0
      ? sql`select min(due_at) as due_at from webhook_lanes`
      : sql`select min(first_due_at) as due_at from webhook_lane_platforms()
          where not (platform_code = any (${excluded}::text[]))`;
  const { rows } = await sql<{ ms: number | null }>`
    select case when due_at is not null
      then greatest(0, ceil(extract(epoch from (due_at - clock_timestamp())) * 1000))::int end as ms
    from (${firstDue}) first_due`.execute(db);
  return rows[0]?.ms ?? null;
}

/** Extends each of `owner`'s leases on `lanes` to now + leaseMs; whether `owner` still holds it. */
export async function renewLeases(
  db: Executor,
  owner: string,
  lanes: Lane[],
  leaseMs: number,
): Promise<boolean[]> {
  const platforms = lanes.map((l) => l.platformCode);
  const resources = lanes.map((l) => l.resourceKey);
  const { rows } = await sql<{ idx: number; held: boolean }>`
    with input as (
      select * from unnest(${platforms}::text[], ${resources}::text[])
        with ordinality as u(platform_code, resource_key, idx)
    ), renewed as (
      update webhook_lanes l
      set due_at = clock_timestamp() + ${leaseMs}::int * interval '1 millisecond'
      from input i
      -- = any: found through the primary key whatever the planner thinks of the input's size
      where l.platform_code = any (${platforms}::text[]) and l.resource_key = any (${resources}::text[])
        and l.platform_code = i.platform_code and l.resource_key = i.resource_key and l.owner = ${owner}
      returning i.idx
    )
    select i.idx, exists (select 1 from renewed r where r.idx = i.idx) as held from input i
  `.execute(db);
  return byIndex(rows, lanes.length).map((row) => row?.held === true);
}

/** Gives back `owner`'s `lanes` (webhook_release_lanes): empty ones are deleted, the others are due with their heads. */
export async function releaseLanes(db: Executor, owner: string, lanes: Lane[]): Promise<void> {
  await sql`select webhook_release_lanes(${lanes.map((l) => l.platformCode)}::text[],
    ${lanes.map((l) => l.resourceKey)}::text[], ${owner})`.execute(db);
}

/** Orders a batch's rows back into input order (`idx` is 1-based, from `with ordinality`). */
function byIndex<T extends { idx: number | string }>(rows: T[], count: number): T[] {
  const out = new Array<T>(count);
  for (const row of rows) out[Number(row.idx) - 1] = row;
  return out;
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
  head: Pick<LaneHead, 'notification_id' | 'state_token' | 'round_started_ms'>;
  /** The state token the notification gets if the record applies (chosen by the caller, so it can go on). */
  newStateToken: string;
  record: AttemptRecord;
}

export interface SettleItem {
  lane: Lane;
  /** An attempt's result to record, if any. */
  result: AttemptResultRecord | null;
  /** Extend the lease to now + leaseMs (else it is only checked). */
  renew: boolean;
  /** Give the lane back after recording (webhook_release_lanes). */
  release: boolean;
}

export interface SettledItem {
  /** The lease is still the owner's (before the release, if any). */
  leaseHeld: boolean;
  /** The result's state change applied (false: no result, or an operator's redelivery came first). */
  applied: boolean;
}

/**
 * Records attempts' results, extends the lanes' leases and gives back the lanes marked `release`, for one
 * owner, in one round trip (webhook_settle_lanes, migrations 0008 and 0011). The attempt is recorded (on its
 * notification's row) in any case, since the request was made; the notification's state changes only if its
 * state token is still the one the attempt started from.
 */
export async function settleLanes(
  db: Executor,
  owner: string,
  leaseMs: number,
  items: SettleItem[],
): Promise<SettledItem[]> {
  const input = items.map(({ lane, result, renew, release }, i) => {
    const attempt = result?.record.attempt ?? null;
    return {
      idx: i + 1,
      platform_code: lane.platformCode,
      resource_key: lane.resourceKey,
      renew,
      release,
      ...(result && {
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
      }),
    };
  });
  const { rows } = await sql<{ idx: number; lease_held: boolean; applied: boolean | null }>`
    select * from webhook_settle_lanes(${owner}, ${leaseMs}::int, ${JSON.stringify(input)}::jsonb)
  `.execute(db);
  return byIndex(rows, items.length).map((row) => ({
    leaseHeld: row?.lease_held === true,
    applied: row?.applied === true,
  }));
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
