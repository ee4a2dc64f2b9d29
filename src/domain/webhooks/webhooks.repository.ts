import { sql, type RawBuilder } from 'kysely';
import { newUuid } from '../../lib/ids.ts';
import type { Executor } from '../../store/database.ts';
import type {
  AttemptOutcome,
  NotificationStatus,
  WebhookEndpointsTable,
} from '../../store/tables/webhooks.tables.ts';
import type { Insertable } from 'kysely';
import { DELIVER_LANE_TASK, LANE_JOB_KEY_PREFIX, laneJobKey, type Lane } from './delivery-lane.ts';

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

export function upsertEndpoint(db: Executor, platformCode: string, write: EndpointWrite) {
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

export async function countNotifications(db: Executor, filter: NotificationFilter): Promise<number> {
  const row = await filtered(db, filter)
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
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
    .orderBy('attempt_id')
    .execute();
}

export type AttemptRow = Awaited<ReturnType<typeof listAttempts>>[number];

/** `laneJobKey` in SQL, for the lane in the `platform_code` and `resource_key` columns of `alias`. */
function laneJobKeySql(alias: string) {
  return sql`${LANE_JOB_KEY_PREFIX}::text || ${sql.ref(`${alias}.platform_code`)} || ':' || ${sql.ref(`${alias}.resource_key`)}`;
}

/** Wakes the lanes of the notifications that `where` selects, now (redelivery). */
function wakeLanes(notifications: RawBuilder<unknown>) {
  return sql`
    select graphile_worker.add_job(
      ${DELIVER_LANE_TASK}::text,
      json_build_object('platform_code', lanes.platform_code, 'resource_key', lanes.resource_key),
      job_key => ${laneJobKeySql('lanes')},
      job_key_mode => 'replace'
    )
    from (select distinct platform_code, resource_key from ${notifications} n) lanes
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
          dead_at = null, state_token = gen_random_uuid()
      where ${sql.join(conditions, sql` and `)}
      returning platform_code, resource_key
    ), woken as (${wakeLanes(sql`redelivered`)})
    select (select count(*) from redelivered)::int as count, (select count(*) from woken)::int as lanes
  `.execute(db);
  return Number(result.rows[0]?.count ?? 0);
}

// --- delivery ----------------------------------------------------------------------------------------

/** The oldest undelivered notification of a lane, with what is needed to deliver it. */
export interface LaneHead {
  notification_id: string;
  seq: number;
  payload_type: string;
  payload: unknown;
  created_at: Date;
  state_token: string;
  round_attempts: number;
  attempt_count: number;
  /** next_attempt_at has come (database clock). */
  due: boolean;
  /** ms until next_attempt_at (0 when due). */
  wait_ms: number;
  url: string | null;
  secret_ciphertext: Buffer | null;
  /** Why this platform does not get it (webhook_skip_reason), or null. */
  skip_reason: string | null;
}

/**
 * The head query of one lane, given as SQL expressions (parameters, or columns of a batch's input rows);
 * `exclude` leaves out the notification whose result is recorded in the same statement.
 */
function headOf(
  platform: RawBuilder<unknown>,
  resource: RawBuilder<unknown>,
  exclude: RawBuilder<unknown> | null,
) {
  return sql`
    select n.notification_id, n.seq, n.payload_type, n.payload, n.created_at, n.state_token,
      n.round_attempts, n.attempt_count,
      n.next_attempt_at <= clock_timestamp() as due,
      greatest(0, ceil(extract(epoch from (n.next_attempt_at - clock_timestamp())) * 1000))::int as wait_ms,
      e.url, e.secret_ciphertext,
      webhook_skip_reason(e.enabled, e.payload_types, n.payload_type) as skip_reason
    from webhook_notifications n
    left join webhook_endpoints e on e.platform_code = n.platform_code
    where n.platform_code = ${platform} and n.resource_key = ${resource}
      and n.status in ('pending', 'retrying')
      ${exclude ? sql`and n.notification_id <> ${exclude}` : sql``}
    order by n.seq
    limit 1
  `;
}

/**
 * The heads of lanes, read in a statement of their own: after a claim, so that they are seen as they are
 * now, not as they were when the claiming statement began (another worker may have worked and released a
 * lane in between, and its old head must not be attempted again).
 */
async function headsOf(db: Executor, lanes: Lane[]): Promise<Array<LaneHead | null>> {
  if (lanes.length === 0) return [];
  const { rows } = await sql<HeadColumns & { idx: number }>`
    select u.idx, h.*
    from unnest(${lanes.map((l) => l.platformCode)}::text[], ${lanes.map((l) => l.resourceKey)}::text[])
      with ordinality as u(platform_code, resource_key, idx)
    left join lateral (${headOf(sql`u.platform_code`, sql`u.resource_key`, null)}) h on true
  `.execute(db);
  return byIndex(rows, lanes.length).map((row) => toHead(row));
}

type HeadColumns = { [K in keyof LaneHead]: LaneHead[K] | null };

function toHead(row: HeadColumns): LaneHead | null {
  if (row.notification_id === null) return null;
  return row as LaneHead;
}

/** Orders a batch's rows back into input order (`idx` is 1-based, from `with ordinality`). */
function byIndex<T extends { idx: number | string }>(rows: T[], count: number): T[] {
  const out = new Array<T>(count);
  for (const row of rows) out[Number(row.idx) - 1] = row;
  return out;
}

export interface LaneClaim {
  lane: Lane;
  owner: string;
}

/**
 * Claims each lane for its owner for `leaseMs` and returns its head (webhook_claim_lease, in lane order so
 * that two processes' batches lock lease rows in the same order). `claimed: false` means a live lease holds
 * it (the database function then scheduled that lane's job for when the lease expires).
 */
export async function claimLanes(
  db: Executor,
  claims: LaneClaim[],
  leaseMs: number,
): Promise<Array<{ claimed: boolean; head: LaneHead | null }>> {
  const result = await sql<{ idx: number; claimed: boolean }>`
    with input as (
      select * from unnest(
        ${claims.map((c) => c.lane.platformCode)}::text[], ${claims.map((c) => c.lane.resourceKey)}::text[],
        ${claims.map((c) => c.owner)}::text[], ${claims.map((c) => laneJobKey(c.lane))}::text[]
      ) with ordinality as u(platform_code, resource_key, owner, job_key, idx)
    )
    select i.idx, c.claimed
    from (select * from input order by platform_code, resource_key) i
    cross join lateral webhook_claim_lease(i.platform_code, i.resource_key, i.owner, ${leaseMs}::int,
      ${DELIVER_LANE_TASK}, i.job_key) c
  `.execute(db);
  const claimed = byIndex(result.rows, claims.length).map((row) => row?.claimed === true);
  // The heads are read after the claims commit, not in the claiming statement: that statement may have
  // waited on another lane's lock while a worker worked and released one of these lanes, and its snapshot
  // would then show a notification that is already delivered.
  const owned = claims.flatMap((_claim, i) => (claimed[i] ? [i] : []));
  const heads = await headsOf(
    db,
    owned.map((i) => claims[i]!.lane),
  );
  const results = claims.map(() => ({ claimed: false, head: null as LaneHead | null }));
  owned.forEach((i, k) => {
    results[i] = { claimed: true, head: heads[k] ?? null };
  });
  return results;
}

export async function claimLane(db: Executor, lane: Lane, owner: string, leaseMs: number) {
  return (await claimLanes(db, [{ lane, owner }], leaseMs))[0]!;
}

/**
 * Adopts up to `limit` lanes whose head is due and that nobody works: no lease row and no job of theirs
 * being started. Claims them for `owner` and removes their waiting jobs (the adopter delivers them, and its
 * release queues them again if work remains), in one statement. Used by a lane job that found the queue
 * behind, so that one job, rather than one job per lane, works a backlog.
 */
export async function adoptLanes(
  db: Executor,
  owner: string,
  leaseMs: number,
  limit: number,
): Promise<Array<{ lane: Lane; head: LaneHead | null }>> {
  const { rows } = await sql<{ platform_code: string; resource_key: string }>`
    with candidates as (
      select n.platform_code, n.resource_key
      from webhook_notifications n
      where n.status in ('pending', 'retrying') and n.next_attempt_at <= clock_timestamp()
        and not exists (
          select 1 from webhook_notifications e
          where e.platform_code = n.platform_code and e.resource_key = n.resource_key
            and e.status in ('pending', 'retrying') and e.seq < n.seq
        )
        and not exists (
          select 1 from webhook_delivery_leases l
          where l.platform_code = n.platform_code and l.resource_key = n.resource_key
        )
        and not exists (
          select 1 from graphile_worker.jobs j where j.key = ${laneJobKeySql('n')} and j.locked_at is not null
        )
      order by n.next_attempt_at
      limit ${limit}::int
    ), claims as (
      select c.platform_code, c.resource_key, x.claimed
      from (select * from candidates order by platform_code, resource_key) c
      cross join lateral webhook_claim_lease(c.platform_code, c.resource_key, ${owner}, ${leaseMs}::int,
        ${DELIVER_LANE_TASK}, ${laneJobKeySql('c')}) x
    ), removed as (
      select graphile_worker.remove_job(${laneJobKeySql('claims')}) from claims where claims.claimed
    )
    select claims.platform_code, claims.resource_key
    from claims
    where claims.claimed and (select count(*) from removed) >= 0
  `.execute(db);
  // The candidates were chosen from the statement's snapshot: read the heads again, as they are now.
  const lanes = rows.map((row) => ({ platformCode: row.platform_code, resourceKey: row.resource_key }));
  const heads = await headsOf(db, lanes);
  return lanes.map((lane, i) => ({ lane, head: heads[i] ?? null }));
}

/** Extends the lease to now + leaseMs (only while `owner` still holds it) and returns the lane's head. */
export async function renewLane(
  db: Executor,
  lane: Lane,
  owner: string,
  leaseMs: number,
): Promise<{ held: boolean; head: LaneHead | null }> {
  const result = await sql<HeadColumns & { held: number }>`
    with lease as (
      update webhook_delivery_leases
      set expires_at = clock_timestamp() + ${leaseMs}::int * interval '1 millisecond'
      where platform_code = ${lane.platformCode} and resource_key = ${lane.resourceKey} and owner = ${owner}
      returning 1
    )
    select (select count(*) from lease)::int as held, h.*
    from (select 1) one
    left join lateral (${headOf(sql`${lane.platformCode}`, sql`${lane.resourceKey}`, null)}) h on true
  `.execute(db);
  const row = result.rows[0]!;
  return { held: row.held > 0, head: row.held > 0 ? toHead(row) : null };
}

/**
 * Gives lanes back (webhook_release_lease, one call per lane in lane order). Each call looks up the lane
 * with a fresh snapshot after deleting the lease and wakes the lane's job for whatever is still undelivered.
 */
export async function releaseLanes(db: Executor, releases: LaneClaim[]): Promise<void> {
  await sql`
    select webhook_release_lease(u.platform_code, u.resource_key, u.owner, ${DELIVER_LANE_TASK}, u.job_key)
    from (
      select * from unnest(
        ${releases.map((r) => r.lane.platformCode)}::text[], ${releases.map((r) => r.lane.resourceKey)}::text[],
        ${releases.map((r) => r.owner)}::text[], ${releases.map((r) => laneJobKey(r.lane))}::text[]
      ) as u(platform_code, resource_key, owner, job_key)
      order by platform_code, resource_key
    ) u
  `.execute(db);
}

export function releaseLane(db: Executor, lane: Lane, owner: string): Promise<void> {
  return releaseLanes(db, [{ lane, owner }]);
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

export interface ResultRecord {
  lane: Lane;
  owner: string;
  head: Pick<LaneHead, 'notification_id' | 'state_token'>;
  record: AttemptRecord;
}

export interface RecordedResult {
  leaseHeld: boolean;
  applied: boolean;
  stateToken: string;
  next: LaneHead | null;
}

/**
 * Records attempts' results, extends their leases and returns each lane's next head, in one statement.
 * A state change applies only if the notification's state token is still the one its attempt started from
 * (an operator's redelivery during the attempt wins); the attempt row is written in any case, since the
 * request was made.
 */
export async function recordResults(
  db: Executor,
  items: ResultRecord[],
  leaseMs: number,
): Promise<RecordedResult[]> {
  const newTokens = items.map(() => newUuid());
  const col = <T>(pick: (item: ResultRecord) => T) => items.map(pick);
  const result = await sql<HeadColumns & { idx: number; lease_held: boolean; applied: boolean | null }>`
    with input as (
      select * from unnest(
        ${col((i) => i.head.notification_id)}::uuid[],
        ${col((i) => i.head.state_token)}::uuid[],
        ${newTokens}::uuid[],
        ${col((i) => i.lane.platformCode)}::text[],
        ${col((i) => i.lane.resourceKey)}::text[],
        ${col((i) => i.owner)}::text[],
        ${col((i) => (i.record.attempt ? 1 : 0))}::int[],
        ${col((i) => i.record.attempt?.startedAt ?? null)}::timestamptz[],
        ${col((i) => i.record.attempt?.durationMs ?? 0)}::int[],
        ${col((i) => i.record.attempt?.statusCode ?? null)}::int[],
        ${col((i) => i.record.attempt?.error ?? null)}::text[],
        ${col((i) => i.record.attempt?.outcome ?? 'failed')}::text[],
        ${col((i) => i.record.status)}::text[],
        ${col((i) => i.record.statusReason)}::text[],
        ${col((i) => i.record.roundAttempts)}::int[],
        ${col((i) => i.record.nextAttemptInMs)}::int[]
      ) with ordinality as u(id, token, new_token, platform_code, resource_key, owner, attempted, started_at,
        duration_ms, status_code, error, outcome, status, reason, round_attempts, delay_ms, idx)
    ), lease as (
      update webhook_delivery_leases l
      set expires_at = clock_timestamp() + ${leaseMs}::int * interval '1 millisecond'
      from input i
      where l.platform_code = i.platform_code and l.resource_key = i.resource_key and l.owner = i.owner
      returning i.idx
    ), updated as (
      update webhook_notifications n set
        attempt_count = n.attempt_count + i.attempted,
        last_attempt_at = coalesce(i.started_at, n.last_attempt_at),
        status = case when n.state_token = i.token then i.status else n.status end,
        status_reason = case when n.state_token = i.token then i.reason else n.status_reason end,
        round_attempts = case when n.state_token = i.token then i.round_attempts else n.round_attempts end,
        next_attempt_at = case when n.state_token = i.token and i.delay_ms is not null
          then clock_timestamp() + i.delay_ms * interval '1 millisecond' else n.next_attempt_at end,
        delivered_at = case when n.state_token = i.token and i.status = 'delivered'
          then clock_timestamp() else n.delivered_at end,
        dead_at = case when n.state_token = i.token and i.status = 'dead' then clock_timestamp() else n.dead_at end,
        state_token = case when n.state_token = i.token then i.new_token else n.state_token end
      from input i
      where n.notification_id = i.id
      returning i.idx, n.attempt_count, n.state_token = i.new_token as applied
    ), attempt as (
      insert into webhook_attempts
        (notification_id, attempt_number, started_at, duration_ms, status_code, error, outcome, worker)
      select i.id, u.attempt_count, i.started_at, i.duration_ms, i.status_code, i.error, i.outcome, i.owner
      from updated u join input i on i.idx = u.idx
      where i.attempted = 1
    )
    select i.idx, exists (select 1 from lease where lease.idx = i.idx) as lease_held, u.applied, h.*
    from input i
    left join updated u on u.idx = i.idx
    left join lateral (${headOf(sql`i.platform_code`, sql`i.resource_key`, sql`i.id`)}) h on true
  `.execute(db);
  return byIndex(result.rows, items.length).map((row, k) => ({
    leaseHeld: row.lease_held === true,
    applied: row.applied === true,
    stateToken: newTokens[k]!,
    next: toHead(row),
  }));
}

export async function recordResult(
  db: Executor,
  lane: Lane,
  owner: string,
  leaseMs: number,
  head: Pick<LaneHead, 'notification_id' | 'state_token'>,
  record: AttemptRecord,
): Promise<RecordedResult> {
  return (await recordResults(db, [{ lane, owner, head, record }], leaseMs))[0]!;
}

/**
 * Wakes lanes whose work is due but that nobody is working or about to work: no live lease and no runnable
 * job (none at all, or only one locked by a worker that died: graphile-worker would keep that one locked
 * for 4 hours). Adding the lane's job in `replace` mode clears the dead job's key and queues a fresh one.
 * `graceMs` keeps it off lanes whose job was just taken and whose lease is a moment away.
 */
export async function reviveStalledLanes(db: Executor, graceMs: number, limit: number): Promise<number> {
  const result = await sql<{ lanes: number }>`
    with stalled as (
      select distinct n.platform_code, n.resource_key
      from webhook_notifications n
      where n.status in ('pending', 'retrying')
        and n.next_attempt_at <= now() - ${graceMs}::int * interval '1 millisecond'
        and not exists (
          select 1 from webhook_delivery_leases l
          where l.platform_code = n.platform_code and l.resource_key = n.resource_key and l.expires_at > now()
        )
        and not exists (
          select 1 from graphile_worker.jobs j
          where j.key = ${laneJobKeySql('n')}
            and j.locked_at is null and j.attempts < j.max_attempts
        )
      limit ${limit}::int
    ), woken as (${wakeLanes(sql`stalled`)})
    select (select count(*) from woken)::int as lanes
  `.execute(db);
  return Number(result.rows[0]?.lanes ?? 0);
}

// --- metrics ------------------------------------------------------------------------------------------

export interface QueueStats {
  pending: number;
  retrying: number;
  dead: number;
  /** Seconds since the oldest undelivered (pending or retrying) notification was recorded; 0 when none. */
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
      (select extract(epoch from (now() - created_at))::float8
         from webhook_notifications where status in ('pending', 'retrying') order by seq limit 1) as oldest_age
  `.execute(db);
  const row = result.rows[0]!;
  return {
    pending: Number(row.pending),
    retrying: Number(row.retrying),
    dead: Number(row.dead),
    oldestPendingAgeSeconds: Math.max(0, Number(row.oldest_age ?? 0)),
  };
}
