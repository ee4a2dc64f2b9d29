import type { Registry } from 'prom-client';
import { WEBHOOK_PAYLOAD_TYPES, isWebhookPayloadType } from '../../contract/webhook-headers.ts';
import { MAX_WEBHOOK_URL_LENGTH, type RedeliverSinceResult } from '../../contract/webhooks.schemas.ts';
import { encryptSecret } from '../../lib/secret-box.ts';
import { NOTIFICATION_STATUSES, type NotificationStatus } from '../../store/tables/webhooks.tables.ts';
import type { DomainDeps } from '../deps.ts';
import { invalid, notFound, OutcomeUnknownError, PG_DEADLOCK, pgErrorCode } from '../errors.ts';
import { findPlatform } from '../platforms/platforms.repository.ts';
import { createWebhookDelivery } from './webhook-delivery.ts';
import { createWebhookMetrics } from './webhooks.metrics.ts';
import * as repo from './webhooks.repository.ts';
import { pageFields, pageOf, rowsAndCount } from '../paging.ts';
import { inOneSnapshot } from '../../store/database.ts';

/**
 * Operator control of webhooks (DESIGN §3, issue 4 point 2): per platform one URL, an optional secret
 * (encrypted at rest with the server key, never shown again), the payload types wanted (default all) and
 * an enabled flag; the notifications with every attempt; redelivery of one, or of all since a time.
 *
 * Decisions (also in the README):
 * - A notification for a platform with no webhook, a disabled one, or one not subscribed to its type is
 *   recorded as `skipped` with the reason, never sent, listed, and redeliverable once the webhook wants it.
 * - PUT replaces the configuration, except the secret: omitted keeps the stored one (it cannot be read back
 *   to be sent again), `null` removes it, a string replaces it.
 * - A redelivery puts the notification back to pending at the top of the retry schedule with the same id;
 *   it is delivered in its lane's order (after older undelivered ones of the same resource).
 */
export interface EndpointInput {
  url: string;
  secret?: string | null;
  payload_types?: string[] | null;
  enabled?: boolean;
}

export interface EndpointView {
  platform_code: string;
  url: string;
  /** Whether deliveries are signed; the secret itself is never returned. */
  secret_set: boolean;
  /** The payload types delivered (every type when `all_payload_types`). */
  payload_types: string[];
  all_payload_types: boolean;
  enabled: boolean;
  created_at: number;
  updated_at: number;
}

export interface AttemptView {
  attempt_number: number;
  attempted_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  outcome: string;
}

export interface NotificationView {
  notification_id: string;
  platform_code: string;
  payload_type: string;
  resource_key: string;
  status: NotificationStatus;
  status_reason: string | null;
  created_at: number;
  /** When the next attempt may start; null unless pending or retrying. */
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  delivered_at: number | null;
  dead_at: number | null;
  attempt_count: number;
  payload: object;
  attempts: AttemptView[];
}

export interface NotificationQuery {
  status?: string;
  payload_type?: string;
  resource_key?: string;
  page?: number;
  page_size?: number;
}

export interface RedeliverSinceInput {
  /** Epoch ms: notifications recorded at or after it. */
  since: number;
  /** Epoch ms: only those recorded before it (default: no end). */
  until?: number;
  /** Only notifications in these states (default every state). */
  status?: string[];
  /** The `resume` of an earlier answer that was not complete. */
  resume?: string;
}

/** Notifications a statement of a redelivery since a time puts back (a fraction of a second each). */
const REDELIVER_BATCH = 5_000;
/**
 * Tries of one batch that PostgreSQL ends for a deadlock: a worker recording its attempts locks some of the batch's
 * rows in its own order (probe: 10 deadlocks in 12 redeliveries of 124,000 while a worker delivered, each a 503).
 * The batch rolled back whole, so it is tried again.
 */
const REDELIVER_BATCH_TRIES = 5;

/** PostgreSQL's bigint: a seq past it in a `resume` was not given by this service. */
const MAX_SEQ = 2n ** 63n - 1n;

/** `run`, again while PostgreSQL ends it for a deadlock, at most REDELIVER_BATCH_TRIES times in all. */
async function batchRetryingDeadlocks<T>(run: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries += 1) {
    try {
      return await run();
    } catch (error) {
      if (tries >= REDELIVER_BATCH_TRIES || pgErrorCode(error) !== PG_DEADLOCK) throw error;
    }
  }
}

/** The seqs a `resume` names (`after-last`), or a problem naming it. */
function resumePoint(resume: string): { afterSeq: string; lastSeq: string } | string {
  const [, afterSeq, lastSeq] = /^(\d+)-(\d+)$/.exec(resume) ?? [];
  if (
    afterSeq === undefined ||
    lastSeq === undefined ||
    BigInt(afterSeq) > MAX_SEQ ||
    BigInt(lastSeq) > MAX_SEQ
  )
    return `resume: "${resume}" is not a resume point this service gave`;
  return { afterSeq, lastSeq };
}

/** Where a redelivery goes on, as its `resume` says it (resumePoint reads it back). */
function resumeAt(range: { afterSeq: string; lastSeq: string }): string {
  return `${range.afterSeq}-${range.lastSeq}`;
}

const MAX_URL_IN_MESSAGE = 200;

const quote = (value: string) =>
  JSON.stringify(value.length > MAX_URL_IN_MESSAGE ? `${value.slice(0, MAX_URL_IN_MESSAGE)}…` : value);

/** What the URL parser normalises away, read from the URL as typed: a scheme, `//` and a host, a user part (`…@`). */
const SCHEME = '^[a-z][a-z0-9+.-]*:';
const HAS_SCHEME = new RegExp(SCHEME, 'i');
const HAS_AUTHORITY = new RegExp(`${SCHEME}//[^/]`, 'i');
const HAS_USER_PART = new RegExp(`${SCHEME}//[^/?#]*@`, 'i');
const AUTHORITY = new RegExp(`${SCHEME}//([^/?#]*)`, 'i');

/** Characters that show nothing (Unicode's default-ignorable code points: zero-width spaces, soft hyphens, …). */
const INVISIBLE = /\p{Default_Ignorable_Code_Point}/u;

/**
 * The authority of a URL as typed (after `scheme://`, up to its path, query or fragment), percent-decoded: the URL
 * parser decodes a host before its IDNA mapping, which then drops an invisible character sent as `%E2%80%8B`
 * (review). Empty when there is none or it does not decode.
 */
function decodedAuthority(raw: string): string {
  const authority = AUTHORITY.exec(raw)?.[1] ?? '';
  try {
    return decodeURIComponent(authority);
  } catch {
    return '';
  }
}

/**
 * Why a URL's host (as parsed: lower case, IDNA in punycode) can never be looked up in DNS (RFC 1035 §2.3.4:
 * labels of 1 to 63 octets, 253 in all), or undefined. Such a URL was accepted and its every delivery then
 * failed with ENOTFOUND until dead-lettered (probe: "http://example..com/"). An IP address is not a name; one
 * trailing dot (a fully qualified name) is allowed.
 */
function dnsNameProblem(hostname: string): string | undefined {
  if (hostname.startsWith('[') || /^[\d.]+$/.test(hostname)) return undefined;
  const name = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (name.length > 253) return `has a host of ${name.length} characters; a DNS name has at most 253`;
  const labels = name.split('.');
  if (labels.includes('')) return 'has an empty label in its host (two dots together, or one at its start)';
  const long = labels.find((label) => label.length > 63);
  if (long) return `has a host label of ${long.length} characters; a DNS label has at most 63`;
  return undefined;
}

/**
 * `url`: absolute http(s), no credentials (they would be shown and logged), no fragment, and at most
 * MAX_WEBHOOK_URL_LENGTH characters as stored: the normalised `href`, which percent-encoding can make
 * longer than the input the schema bounded (one `é` becomes `%C3%A9`, a space `%20`).
 */
export function checkWebhookUrl(raw: string, field = 'url'): { url: string } | { errors: string[] } {
  // The URL parser strips white space and control characters around a URL: a trailing one was dropped
  // silently while a leading one made "has no host" (review). Either is a mistake to name, not guess at.
  if (/^[\s\u0000-\u001f]|[\s\u0000-\u001f]$/.test(raw))
    return { errors: [`${field}: ${quote(raw)} has white space or a control character before or after it`] };
  // Inside it, tabs and line breaks are removed by the parser ("…/go\nod" became "…/good"): not what was typed.
  if (/[\t\n\r]/.test(raw)) return { errors: [`${field}: ${quote(raw)} has a tab or line break in it`] };
  // An invisible character is dropped from a host by its IDNA mapping ("exa\u200bmple.com" became "example.com",
  // probe), and is not what anyone meant to type elsewhere either: named by its code point, as it cannot be seen.
  const invisible = INVISIBLE.exec(raw)?.[0] ?? INVISIBLE.exec(decodedAuthority(raw))?.[0];
  if (invisible !== undefined) {
    const codePoint = invisible.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    return { errors: [`${field}: ${quote(raw)} has an invisible character (U+${codePoint}) in it`] };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Said as what it is: "http://h:99999/" was "not an absolute URL".
    const problem = HAS_SCHEME.test(raw)
      ? 'is not a valid URL (check its host and port: a port is at most 65535)'
      : 'is not an absolute URL (e.g. https://hooks.example.com/svc)';
    return { errors: [`${field}: ${quote(raw)} ${problem}`] };
  }
  const errors: string[] = [];
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    errors.push(`${field}: ${quote(raw)} must use http or https, not ${url.protocol.replace(/:$/, '')}`);
  }
  // "http:///path" parses with the path's first segment as the host: not what was meant.
  if (!url.hostname || !HAS_AUTHORITY.test(raw)) errors.push(`${field}: ${quote(raw)} has no host`);
  if (url.port === '0') errors.push(`${field}: ${quote(raw)} names port 0, where nothing can listen`);
  const hostProblem = dnsNameProblem(url.hostname);
  if (hostProblem) errors.push(`${field}: ${quote(raw)} ${hostProblem}`);
  // An empty user part ("http://@host", "http://:@host") is dropped by the parser: refused as what was typed.
  if (url.username || url.password || HAS_USER_PART.test(raw))
    errors.push(`${field}: ${quote(raw)} must not contain credentials`);
  // An empty fragment ("…/hooks#") leaves url.hash empty but stays in href.
  if (url.hash || url.href.includes('#')) errors.push(`${field}: ${quote(raw)} must not contain a fragment`);
  if (url.href.length > MAX_WEBHOOK_URL_LENGTH) {
    errors.push(
      `${field}: is ${url.href.length} characters once normalised (percent-encoded); at most ${MAX_WEBHOOK_URL_LENGTH}`,
    );
  }
  return errors.length ? { errors } : { url: url.href };
}

const unknownPayloadType = (field: string, value: string) =>
  `${field}: unknown payload type ${JSON.stringify(value)} (one of ${WEBHOOK_PAYLOAD_TYPES.join(', ')})`;

function checkPayloadTypes(types: string[], field: string): string[] {
  const errors: string[] = [];
  types.forEach((type, i) => {
    if (!isWebhookPayloadType(type)) {
      errors.push(unknownPayloadType(`${field}[${i}]`, type));
    } else if (types.indexOf(type) !== i) {
      errors.push(`${field}[${i}]: ${JSON.stringify(type)} is listed twice`);
    }
  });
  return errors;
}

function checkStatus(value: string, field: string): string[] {
  return (NOTIFICATION_STATUSES as readonly string[]).includes(value)
    ? []
    : [`${field}: ${JSON.stringify(value)} is not a status (one of ${NOTIFICATION_STATUSES.join(', ')})`];
}

const ms = (date: Date | null) => (date ? date.getTime() : null);

/** The hourly job that purges delivered and skipped notifications past their retention. */
export const PURGE_NOTIFICATIONS_TASK = 'webhooks.purge_finished';
/** Notifications looked at per purge statement (each its own transaction, so locks stay short). */
const PURGE_BATCH = 5_000;

export function createWebhooksService(deps: DomainDeps) {
  const { db } = deps;
  const metrics = createWebhookMetrics(db);
  const delivery = createWebhookDelivery({
    db,
    config: deps.config,
    secretKey: deps.secretKey,
    clock: deps.clock,
    metrics,
  });

  async function requirePlatform(platformCode: string) {
    if (!(await findPlatform(db, platformCode))) throw notFound(`platform ${platformCode} not found`);
  }

  function endpointView(row: NonNullable<Awaited<ReturnType<typeof repo.findEndpoint>>>): EndpointView {
    return {
      platform_code: row.platform_code,
      url: row.url,
      secret_set: row.secret_ciphertext !== null,
      payload_types: row.payload_types ?? [...WEBHOOK_PAYLOAD_TYPES],
      all_payload_types: row.payload_types === null,
      enabled: row.enabled,
      created_at: row.created_at.getTime(),
      updated_at: row.updated_at.getTime(),
    };
  }

  function notificationView(row: repo.NotificationRow, attempts: repo.AttemptRow[]): NotificationView {
    const open = row.status === 'pending' || row.status === 'retrying';
    return {
      notification_id: row.notification_id,
      platform_code: row.platform_code,
      payload_type: row.payload_type,
      resource_key: row.resource_key,
      status: row.status,
      status_reason: row.status_reason,
      created_at: row.created_at.getTime(),
      next_attempt_at: open ? row.next_attempt_at.getTime() : null,
      last_attempt_at: ms(row.last_attempt_at),
      delivered_at: ms(row.delivered_at),
      dead_at: ms(row.dead_at),
      attempt_count: row.attempt_count,
      payload: row.payload as object,
      attempts: attempts.map((a) => ({
        attempt_number: a.attempt_number,
        attempted_at: a.started_at.getTime(),
        duration_ms: a.duration_ms,
        status_code: a.status_code,
        error: a.error,
        outcome: a.outcome,
      })),
    };
  }

  async function withAttempts(rows: repo.NotificationRow[]): Promise<NotificationView[]> {
    const attempts = await repo.listAttempts(
      db,
      rows.map((r) => r.notification_id),
    );
    const byId = new Map<string, repo.AttemptRow[]>();
    for (const a of attempts) {
      const list = byId.get(a.notification_id) ?? [];
      list.push(a);
      byId.set(a.notification_id, list);
    }
    return rows.map((r) => notificationView(r, byId.get(r.notification_id) ?? []));
  }

  async function getNotification(notificationId: string): Promise<NotificationView> {
    const row = await repo.findNotification(db, notificationId);
    if (!row) throw notFound(`notification ${notificationId} not found`);
    return (await withAttempts([row]))[0]!;
  }

  /** The fields of a PUT or PATCH of the endpoint checked (400 naming each problem): the URL normalised, if given. */
  function checkedEndpointInput(input: Partial<EndpointInput>): string | undefined {
    const errors: string[] = [];
    const checked = input.url === undefined ? undefined : checkWebhookUrl(input.url);
    if (checked && 'errors' in checked) errors.push(...checked.errors);
    if (input.payload_types) {
      errors.push(...checkPayloadTypes(input.payload_types, 'payload_types'));
      if (input.payload_types.length === 0) {
        errors.push('payload_types: must name at least one type (omit it, or send null, for every type)');
      }
    }
    if (typeof input.secret === 'string' && input.secret.trim() !== input.secret) {
      errors.push('secret: must not start or end with white space');
    }
    if (errors.length) throw invalid(...errors);
    return (checked as { url: string } | undefined)?.url;
  }

  /** A secret as stored: undefined keeps the stored one, null removes it. */
  function sealedSecret(secret: string | null | undefined): Buffer | null | undefined {
    return secret === undefined ? undefined : secret === null ? null : encryptSecret(deps.secretKey, secret);
  }

  /** The platform's endpoint if it is enabled; refuses a redelivery that would only be skipped again. */
  async function requireDeliverableEndpoint(platformCode: string) {
    const endpoint = await repo.findEndpoint(db, platformCode);
    if (!endpoint) throw invalid(`webhook: platform ${platformCode} has no webhook configured`);
    if (!endpoint.enabled)
      throw invalid(
        `webhook: the webhook of platform ${platformCode} is disabled: enable it first (PATCH with enabled: true, svc webhooks update ${platformCode} --enabled)`,
      );
    return endpoint;
  }

  return {
    /** The worker side: partition leases, reads, attempts and records; started by the runtime (`startWorkerSide`). */
    delivery,

    /** Registers the webhook metrics on the process's registry (DESIGN §6 `/metrics`). */
    registerMetrics(registry: Registry): void {
      metrics.register(registry);
    },

    async getEndpoint(platformCode: string): Promise<EndpointView> {
      await requirePlatform(platformCode);
      const row = await repo.findEndpoint(db, platformCode);
      if (!row) throw notFound(`platform ${platformCode} has no webhook configured`);
      return endpointView(row);
    },

    async putEndpoint(platformCode: string, input: EndpointInput): Promise<EndpointView> {
      const url = checkedEndpointInput(input);
      await requirePlatform(platformCode);
      // One transaction: the change and its NOTIFY commit together. Two statements, a NOTIFY that failed after the
      // change had committed answered 500 for a change made, and left the workers on the old settings (review).
      const row = await db.transaction().execute((trx) =>
        repo.upsertEndpoint(trx, platformCode, {
          url: url!,
          secretCiphertext: sealedSecret(input.secret),
          payloadTypes: input.payload_types ?? null,
          enabled: input.enabled ?? true,
        }),
      );
      return endpointView(row);
    },

    /**
     * `PATCH /admin/platforms/{code}/webhook`: changes the fields given and keeps the others (review: rotating the
     * secret with PUT, as `svc webhooks set`, also subscribed a platform to every type and enabled a paused webhook).
     */
    async patchEndpoint(platformCode: string, input: Partial<EndpointInput>): Promise<EndpointView> {
      if (Object.values(input).every((value) => value === undefined))
        throw invalid('body: give at least one of url, secret, payload_types, enabled');
      const url = checkedEndpointInput(input);
      await requirePlatform(platformCode);
      const row = await db.transaction().execute(async (trx) => {
        const current = await repo.findEndpoint(trx, platformCode, { lock: true });
        if (!current)
          throw notFound(
            `platform ${platformCode} has no webhook configured: set one first (PUT, svc webhooks set)`,
          );
        return repo.upsertEndpoint(trx, platformCode, {
          url: url ?? current.url,
          secretCiphertext: sealedSecret(input.secret),
          payloadTypes: input.payload_types === undefined ? current.payload_types : input.payload_types,
          enabled: input.enabled ?? current.enabled,
        });
      });
      return endpointView(row);
    },

    async listNotifications(
      platformCode: string,
      query: NotificationQuery,
    ): Promise<{
      items: NotificationView[];
      page: number;
      page_size: number;
      total_pages: number;
      count: number;
    }> {
      const errors: string[] = [];
      if (query.status !== undefined) errors.push(...checkStatus(query.status, 'status'));
      if (query.payload_type !== undefined && !isWebhookPayloadType(query.payload_type)) {
        errors.push(unknownPayloadType('payload_type', query.payload_type));
      }
      if (errors.length) throw invalid(...errors);
      await requirePlatform(platformCode);
      const filter: repo.NotificationFilter = {
        platformCode,
        status: query.status as NotificationStatus | undefined,
        payloadType: query.payload_type,
        resourceKey: query.resource_key,
      };
      const page = pageOf(query);
      const { rows, count } = await inOneSnapshot(db, (trx) =>
        rowsAndCount(
          page.offset,
          () => repo.listNotifications(trx, filter, page),
          () => repo.countNotifications(trx, filter),
        ),
      );
      return { items: await withAttempts(rows), ...pageFields(page, count) };
    },

    getNotification,

    async redeliver(notificationId: string): Promise<NotificationView> {
      const row = await repo.findNotification(db, notificationId);
      if (!row) throw notFound(`notification ${notificationId} not found`);
      const endpoint = await requireDeliverableEndpoint(row.platform_code);
      if (endpoint.payload_types && !endpoint.payload_types.includes(row.payload_type)) {
        throw invalid(
          `payload_type: the webhook of platform ${row.platform_code} is not subscribed to ${row.payload_type}`,
        );
      }
      await repo.redeliverOne(db, row.platform_code, notificationId);
      return getNotification(notificationId);
    },

    /**
     * Redelivers the platform's notifications recorded since a time (and before `until`), in batches of their own
     * transaction, oldest seq first, the platform's last notification when the call began being the last; after
     * about `callMs` (SVC_WEBHOOK_REDELIVER_CALL_MS) it stops between two batches and answers where the next call
     * resumes. `batch` is for tests.
     */
    async redeliverSince(
      platformCode: string,
      input: RedeliverSinceInput,
      {
        batch = REDELIVER_BATCH,
        callMs = deps.config.webhooks.redeliverCallMs,
      }: { batch?: number; callMs?: number } = {},
    ): Promise<RedeliverSinceResult & { failure?: unknown }> {
      const errors = (input.status ?? []).flatMap((s, i) => checkStatus(s, `status[${i}]`));
      if (input.until !== undefined && input.until <= input.since)
        errors.push(`until: ${input.until} is not after since (${input.since})`);
      const resumed = input.resume === undefined ? undefined : resumePoint(input.resume);
      if (typeof resumed === 'string') errors.push(resumed);
      if (errors.length) throw invalid(...errors);
      await requirePlatform(platformCode);
      const endpoint = await requireDeliverableEndpoint(platformCode);
      const range: repo.RedeliverRange = {
        platformCode,
        sinceMs: input.since,
        untilMs: input.until,
        statuses: input.status as NotificationStatus[] | undefined,
        // Types the webhook does not want would only be skipped again: leave them as they are.
        payloadTypes: endpoint.payload_types,
        ...(typeof resumed === 'object'
          ? resumed
          : { afterSeq: '0', lastSeq: await repo.lastSeqOf(db, platformCode) }),
      };
      // Time the call takes, not the service's clock (which a test may hold still).
      const started = performance.now();
      let redelivered = 0;
      for (let batches = 0; ; batches += 1) {
        let step: Awaited<ReturnType<typeof repo.redeliverBatch>>;
        try {
          step = await batchRetryingDeadlocks(() => repo.redeliverBatch(db, range, batch));
        } catch (error) {
          // After batches of this call committed, a failure answers what they did and where to go on: thrown,
          // the caller could only start again from the call's beginning and send them all again (review). The
          // failure goes with it, for the caller's log (the domain has none).
          if (batches === 0) throw error;
          return {
            redelivered,
            complete: false,
            resume: resumeAt(range),
            interrupted:
              error instanceof OutcomeUnknownError
                ? 'the connection was lost before PostgreSQL answered the next batch: going on from resume redelivers it again if it was carried out'
                : 'the next batch failed (the service log has the error)',
            failure: error,
          };
        }
        redelivered += step.redelivered;
        if (step.reachedSeq === null) return { redelivered, complete: true };
        range.afterSeq = step.reachedSeq;
        if (performance.now() - started >= callMs)
          return { redelivered, complete: false, resume: resumeAt(range) };
      }
    },

    /**
     * Deletes the notifications delivered or skipped (and recorded) more than SVC_WEBHOOK_RETENTION_DAYS
     * ago, oldest first, in batches of `batch`; dead and undelivered ones stay. Stops between two batches once
     * `signal` is aborted (the worker is stopping: the next run goes on). Returns how many it deleted.
     */
    async purgeFinished({
      batch = PURGE_BATCH,
      signal,
    }: { batch?: number; signal?: AbortSignal } = {}): Promise<number> {
      const { retentionMs } = deps.config.webhooks;
      if (retentionMs === null) return 0;
      const before = new Date(deps.clock.now() - retentionMs);
      let purged = 0;
      let afterSeq = 0;
      for (;;) {
        const step = await repo.purgeFinishedNotifications(db, before, afterSeq, batch);
        purged += step.purged;
        if (step.reachedNewer || step.scanned < batch || signal?.aborted) return purged;
        afterSeq = step.lastSeq;
      }
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
