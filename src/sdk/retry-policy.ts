/**
 * The retry rules of spec 7.1–7.3 as one table ({@link RETRY_TABLE}) and the small pure function
 * that applies it ({@link decideRetry}). The request sender (`request-sender.ts`) owns the I/O: it sends,
 * calls `decideRetry` with what happened, and carries out the returned action.
 *
 * @example
 * // The sender loop, in outline:
 * const opts = resolveRetryOptions(callOptions);
 * const retryClass = retryClassFor(method, path);
 * const started = opts.now();
 * for (let attempt = 1; ; attempt++) {
 *   const outcome = await sendOnce(); // { kind: 'response', status, headers, body } | { kind: 'network-error', error }
 *   const action = decideRetry({ method, retryClass, outcome, attempt, elapsedMs: opts.now() - started }, opts);
 *   switch (action.kind) {
 *     case 'return': return finish(outcome); // success, or throw the mapped error
 *     case 'retry':
 *     case 'wait-rate-limit': await opts.sleep(action.delayMs); continue;
 *     case 'check-then-retry': case 'check-then-return': {
 *       const done = await idempotenceCheck(); // e.g. GET /trades?client_trade_id=<quote_id>
 *       if (done) return done;
 *       if (action.kind === 'check-then-return') return finish(outcome);
 *       await opts.sleep(action.delayMs); continue;
 *     }
 *     case 'recover-404': return recoverExecute404(); // look the trade up; re-quote only if opts.allowRequote
 *     case 'recover-7.3': return findParticipantByEmail(); // spec 7.3: return the existing customer
 *   }
 * }
 */
import { readHeader, type HeaderSource } from '../contract/webhook-headers.ts';
import { DATA_USED_WITH_DIFFERENT_REQUEST_ID, EMAIL_ALREADY_EXISTS } from '../contract/wire-values.ts';
import { backoffDelay, resolveRetryOptions, type RetryOptions } from './backoff.ts';

/**
 * What an endpoint offers when its outcome is uncertain (spec 7.2, issue 9):
 * - `plain`: nothing; the generic rules only.
 * - `execute`: idempotence check `GET /trades?client_trade_id=<quote_id>`; 404 → recover (spec 7.2).
 * - `customer-create`: idempotence check = participant look-up by email; 400 of spec 7.3 → recover.
 * - `tenant-change`: idempotence check = `GET /accounts/{zrn}/details`, is the tenant (not) there.
 */
export type RetryClass = 'plain' | 'execute' | 'customer-create' | 'tenant-change';

export const RETRY_CLASSES: readonly RetryClass[] = ['plain', 'execute', 'customer-create', 'tenant-change'];

/** Which endpoints have which retry class; anything not listed is `plain`. */
export const ENDPOINT_RETRY_CLASSES: readonly {
  readonly method: string;
  readonly path: RegExp;
  readonly retryClass: RetryClass;
  /** What the sender runs for `check-then-retry` / `check-then-return`. */
  readonly idempotenceCheck: string;
}[] = [
  {
    method: 'POST',
    path: /^\/liquidity\/execute$/,
    retryClass: 'execute',
    idempotenceCheck: 'GET /trades?client_trade_id=<quote_id>',
  },
  {
    method: 'POST',
    path: /^\/convert_withdraw\/execute$/,
    retryClass: 'execute',
    idempotenceCheck: 'GET /trades?client_trade_id=<quote_id>',
  },
  {
    method: 'POST',
    path: /^\/participants\/customers\/new$/,
    retryClass: 'customer-create',
    idempotenceCheck: 'participant look-up by email',
  },
  {
    method: 'POST',
    path: /^\/accounts\/[^/]+\/tenants$/,
    retryClass: 'tenant-change',
    idempotenceCheck: 'GET /accounts/{zrn}/details: tenant present',
  },
  {
    method: 'DELETE',
    path: /^\/accounts\/[^/]+\/tenants\/[^/]+$/,
    retryClass: 'tenant-change',
    idempotenceCheck: 'GET /accounts/{zrn}/details: tenant absent',
  },
];

/** The retry class of a request, from its method and path (a query string is ignored). */
export function retryClassFor(method: string, path: string): RetryClass {
  const upper = method.toUpperCase();
  const bare = path.split('?', 1)[0] ?? path;
  return ENDPOINT_RETRY_CLASSES.find((e) => e.method === upper && e.path.test(bare))?.retryClass ?? 'plain';
}

/**
 * spec 7.3: the two 400 messages of `POST /participants/customers/new` that mean "this customer may
 * already exist". Any other 400 there is a format error and is returned as it is.
 */
export const SPEC_7_3_MESSAGES = [EMAIL_ALREADY_EXISTS, DATA_USED_WITH_DIFFERENT_REQUEST_ID] as const;

/** What one attempt produced, as the sender saw it. */
export type RequestOutcome =
  /**
   * No response: connection refused or reset, timeout, DNS failure. Whether the server acted is unknown, unless
   * no connection was made ({@link connectionNeverMade}).
   */
  | { readonly kind: 'network-error'; readonly error?: unknown }
  /** A response; `body` is the parsed JSON body (or the text), needed only to recognise spec 7.3. */
  | {
      readonly kind: 'response';
      readonly status: number;
      readonly headers?: HeaderSource;
      readonly body?: unknown;
    };

/** The status classes the table distinguishes. `400-spec-7.3` is a 400 carrying a {@link SPEC_7_3_MESSAGES} message. */
export type OutcomeClass =
  | 'success'
  | 'network-error'
  | '400'
  | '400-spec-7.3'
  | '404'
  | '409'
  | '429'
  | '500'
  | '502'
  | '503'
  | '504'
  | 'other-error';

export const OUTCOME_CLASSES: readonly OutcomeClass[] = [
  'success',
  'network-error',
  '400',
  '400-spec-7.3',
  '404',
  '409',
  '429',
  '500',
  '502',
  '503',
  '504',
  'other-error',
];

/** spec 7.1.1: GETs (and the other safe methods) are idempotent; everything else follows the POST rules. */
export type MethodGroup = 'read' | 'write';

export function methodGroup(method: string): MethodGroup {
  const upper = method.toUpperCase();
  return upper === 'GET' || upper === 'HEAD' || upper === 'OPTIONS' ? 'read' : 'write';
}

export type RetryActionKind =
  'return' | 'retry' | 'check-then-retry' | 'recover-404' | 'recover-7.3' | 'wait-rate-limit';

export interface RetryRule {
  readonly methods: MethodGroup | 'any';
  readonly outcomes: readonly OutcomeClass[] | 'any';
  readonly retryClasses: readonly RetryClass[] | 'any';
  readonly action: RetryActionKind;
  /** The rule it implements, reported with every decision (logs, tests). */
  readonly rule: string;
}

const WITH_IDEMPOTENCE_CHECK: readonly RetryClass[] = ['execute', 'customer-create', 'tenant-change'];

/**
 * spec 7.1–7.3 (and issue 9) as data. The first row that matches decides; the last row matches
 * everything. Retry budget (maxRetries, deadline) is applied afterwards by {@link decideRetry}.
 */
export const RETRY_TABLE: readonly RetryRule[] = [
  { methods: 'any', outcomes: ['success'], retryClasses: 'any', action: 'return', rule: 'success' },
  // Before any retry row, so nothing can override it.
  {
    methods: 'any',
    outcomes: ['500'],
    retryClasses: 'any',
    action: 'return',
    rule: 'spec 7.1.3: 500 is never retried',
  },
  // wire-contract §9: the limiter runs before authentication, so a 429 did nothing: any method may resend.
  {
    methods: 'any',
    outcomes: ['429'],
    retryClasses: 'any',
    action: 'wait-rate-limit',
    rule: 'spec 7, part 8: 429 → wait 10 s (or Retry-After when longer), then retry',
  },
  {
    methods: 'read',
    outcomes: ['network-error', '502', '503', '504'],
    retryClasses: 'any',
    action: 'retry',
    rule: 'spec 7.1.1: GET is idempotent, retry on network error, 502, 503, 504',
  },
  {
    methods: 'write',
    outcomes: ['503'],
    retryClasses: 'any',
    action: 'retry',
    rule: 'spec 7.1.2: POST 503 → retry without a check',
  },
  {
    methods: 'write',
    outcomes: ['502', '504', 'network-error'],
    retryClasses: WITH_IDEMPOTENCE_CHECK,
    action: 'check-then-retry',
    rule: 'spec 7.1.2, 7.2: POST 502/504 (or no response) is indeterminate → idempotence check, then retry',
  },
  {
    methods: 'write',
    outcomes: ['502', '504', 'network-error'],
    retryClasses: ['plain'],
    action: 'return',
    rule: 'spec 7.1.2: indeterminate POST without an idempotence check → the caller decides',
  },
  {
    methods: 'write',
    outcomes: ['404'],
    retryClasses: ['execute'],
    action: 'recover-404',
    rule: 'spec 7.2: execute 404 → GET /trades?client_trade_id=<quote_id>; none → re-quote if allowed',
  },
  {
    methods: 'write',
    outcomes: ['400-spec-7.3'],
    retryClasses: ['customer-create'],
    action: 'recover-7.3',
    rule: 'spec 7.3: customer creation 400 conflict → look the participant up by email',
  },
  // wire-contract §9: a duplicate that arrives while the first is in flight "may get a 409 it can
  // retry"; the resend gets the replay or a spec 7.3 400, both of which end well.
  {
    methods: 'write',
    outcomes: ['409'],
    retryClasses: ['customer-create'],
    action: 'retry',
    rule: 'wire-contract §9: customer creation 409 while a duplicate is in flight → retry',
  },
  { methods: 'any', outcomes: 'any', retryClasses: 'any', action: 'return', rule: 'not retryable' },
];

export type RetryAction =
  | { readonly kind: 'return'; readonly rule: string }
  | { readonly kind: 'retry'; readonly delayMs: number; readonly rule: string }
  /** Run the endpoint's idempotence check; if the work did not happen, wait `delayMs` and resend. */
  | { readonly kind: 'check-then-retry'; readonly delayMs: number; readonly rule: string }
  /**
   * Retry budget spent on an indeterminate outcome: still run the idempotence check (the work may
   * have happened, and the caller must get it), but do not resend; if nothing is found, return the error.
   */
  | { readonly kind: 'check-then-return'; readonly rule: string }
  | { readonly kind: 'recover-404'; readonly rule: string }
  | { readonly kind: 'recover-7.3'; readonly rule: string }
  | { readonly kind: 'wait-rate-limit'; readonly delayMs: number; readonly rule: string };

export interface RetryDecisionInput {
  /** HTTP method of the request. */
  method: string;
  /** From {@link retryClassFor} or declared by the resource method. */
  retryClass: RetryClass;
  outcome: RequestOutcome;
  /** 1-based number of the attempt that produced `outcome` (1 = the first send). */
  attempt: number;
  /** ms since the first send started. */
  elapsedMs: number;
}

/** spec 7 table and part 8: after a 429 wait 10 s. */
export const RATE_LIMIT_WAIT_MS = 10_000;

/**
 * The statuses a CDN in front of the API (the vendor's answers its firewall's `error code: 1020`) answers for
 * the origin, read as the origin's own statuses of the same meaning. 520 (the origin answered something that is
 * not HTTP) and 524 (the origin took the request and did not answer in time) may follow work done: indeterminate,
 * as 502 and 504. 521, 522 and 523 (origin down, no TCP connection, unreachable) mean the request never reached
 * it: transient, as 503. Read as "any other error", a 524 on an execute that had traded was thrown as a plain
 * failure, with no look-up and no `outcomeUnknown`.
 */
const CDN_STATUSES: Readonly<Record<number, '502' | '503' | '504'>> = {
  520: '502',
  521: '503',
  522: '503',
  523: '503',
  524: '504',
};

/** Connection failures in which nothing was sent: no TCP connection was made. */
const NEVER_CONNECTED: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  // undici's: no connection within its connect timeout (review).
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** Never connected only when met connecting: on a connection made they also end one whose request was sent (review). */
const UNREACHABLE_WHEN_CONNECTING: ReadonlySet<string> = new Set(['EHOSTUNREACH', 'ENETUNREACH']);

/**
 * No connection was made (refused, no such host, a port fetch will not use): the request never left, so it cannot
 * have been carried out, and is read as a 503 (transient, nothing done), as a CDN's 521–523. As "no response"
 * it was a write of unknown outcome, not resent (probe: `svc api execute` during a restart). undici's refusal of
 * a port (1, 6000, …) has no code, only its message.
 */
export function connectionNeverMade(error: unknown): boolean {
  for (
    let e = error as { code?: unknown; syscall?: unknown; message?: unknown; cause?: unknown } | undefined;
    e;
    e = e.cause as typeof e
  ) {
    if (typeof e.code === 'string' && NEVER_CONNECTED.has(e.code)) return true;
    if (typeof e.code === 'string' && UNREACHABLE_WHEN_CONNECTING.has(e.code) && e.syscall === 'connect')
      return true;
    if (e.message === 'bad port') return true;
  }
  return false;
}

/** An answer after which a write may or may not have been carried out (spec 7.1.2's 502 and 504). */
export function isIndeterminateStatus(status: number): boolean {
  const cls = CDN_STATUSES[status] ?? String(status);
  return cls === '502' || cls === '504';
}

/** Sorts an outcome into one of the table's {@link OutcomeClass}es. */
export function classifyOutcome(outcome: RequestOutcome): OutcomeClass {
  if (outcome.kind === 'network-error') return connectionNeverMade(outcome.error) ? '503' : 'network-error';
  const { status } = outcome;
  if (status < 400) return 'success';
  const cdn = CDN_STATUSES[status];
  if (cdn) return cdn;
  switch (status) {
    case 400:
      return spec73Text(outcome.body) !== undefined ? '400-spec-7.3' : '400';
    case 404:
    case 409:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return String(status) as OutcomeClass;
    default:
      return 'other-error';
  }
}

/** The first row of {@link RETRY_TABLE} that matches. */
export function findRetryRule(method: string, retryClass: RetryClass, outcomeClass: OutcomeClass): RetryRule {
  const group = methodGroup(method);
  const row = RETRY_TABLE.find(
    (r) =>
      (r.methods === 'any' || r.methods === group) &&
      (r.outcomes === 'any' || r.outcomes.includes(outcomeClass)) &&
      (r.retryClasses === 'any' || r.retryClasses.includes(retryClass)),
  );
  // The last row matches everything, so this cannot happen; it guards edits to the table.
  if (row === undefined) throw new Error(`retry table has no row for ${group} ${retryClass} ${outcomeClass}`);
  return row;
}

/**
 * Decides what the sender does after one attempt: the table's action, with a delay for the ones
 * that wait, limited by the retry budget (`maxRetries`, `deadlineMs`) of `options`.
 * Pure apart from `options.random` (backoff) and `options.now` (only for a date-form Retry-After).
 *
 * @example
 * decideRetry({ method: 'GET', retryClass: 'plain', outcome: { kind: 'response', status: 503 }, attempt: 1, elapsedMs: 0 });
 * // → { kind: 'retry', delayMs: <100..500>, rule: 'spec 7.1.1: …' }
 * decideRetry({ method: 'POST', retryClass: 'execute', outcome: { kind: 'response', status: 404 }, attempt: 1, elapsedMs: 0 });
 * // → { kind: 'recover-404', rule: 'spec 7.2: …' }
 */
export function decideRetry(input: RetryDecisionInput, options: RetryOptions = {}): RetryAction {
  const { method, retryClass, outcome, attempt, elapsedMs } = input;
  if (!Number.isInteger(attempt) || attempt < 1)
    throw new RangeError(`attempt must be an integer ≥ 1, got ${attempt}`);
  const opts = resolveRetryOptions(options);
  const { action, rule } = findRetryRule(method, retryClass, classifyOutcome(outcome));

  switch (action) {
    case 'return':
    case 'recover-404':
    case 'recover-7.3':
      // Recoveries are look-ups, not resends: they are owed to the caller whatever the budget left.
      return { kind: action, rule };
    case 'retry':
    case 'check-then-retry':
    case 'wait-rate-limit': {
      const delayMs =
        action === 'wait-rate-limit'
          ? rateLimitWaitMs(outcome, opts.now)
          : backoffDelay(attempt, { random: opts.random, capMs: opts.capMs });
      // Every resend counts against maxRetries, whatever caused it (5xx, network error or 429).
      const exhausted =
        attempt > opts.maxRetries
          ? 'maxRetries reached'
          : elapsedMs + delayMs > opts.deadlineMs
            ? 'deadline would pass'
            : undefined;
      if (exhausted !== undefined) {
        return action === 'check-then-retry'
          ? { kind: 'check-then-return', rule: `${rule}; ${exhausted}` }
          : { kind: 'return', rule: `${rule}; ${exhausted}` };
      }
      return { kind: action, delayMs, rule };
    }
  }
}

/** spec 7: wait 10 s; wire-contract §2.3: `Retry-After` says the seconds left, honoured when longer. */
export function rateLimitWaitMs(outcome: RequestOutcome, now: () => number = Date.now): number {
  const headers = outcome.kind === 'response' ? outcome.headers : undefined;
  const raw = headers === undefined ? undefined : readHeader(headers, 'retry-after');
  const value = typeof raw === 'string' ? raw : raw?.[0];
  return Math.max(RATE_LIMIT_WAIT_MS, parseRetryAfterMs(value, now) ?? 0);
}

/** RFC 9110 §10.2.3: delay-seconds or an HTTP-date; anything else is ignored. */
export function parseRetryAfterMs(
  value: string | undefined,
  now: () => number = Date.now,
): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) || !/[a-z]/i.test(trimmed) ? undefined : Math.max(0, date - now());
}

/** The first text of a 400's body (an `errors` entry, or the body itself as text) that carries a spec 7.3 message. */
export function spec73Text(body: unknown): string | undefined {
  const texts: unknown[] =
    typeof body === 'string'
      ? [body]
      : typeof body === 'object' && body !== null && Array.isArray((body as { errors?: unknown }).errors)
        ? (body as { errors: unknown[] }).errors
        : [];
  // wire-contract §3: 400 bodies are `{"errors":["<field>: <problem>"]}`, so match inside each entry.
  return texts.find(
    (t): t is string => typeof t === 'string' && SPEC_7_3_MESSAGES.some((m) => t.includes(m)),
  );
}
