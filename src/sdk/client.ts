import { AUTH_HEADERS, signRequest, signingMessage } from '../contract/request-signature.ts';
import type { RetryOptions } from './backoff.ts';
import { SvcAbortedError, SvcArgumentError, SvcConnectionError } from './errors.ts';
import { sendWithRetries, type RecoveryHooks } from './request-sender.ts';
import { REQUEST_ID_HEADER, SIMULATOR_SCENARIO_HEADER } from '../contract/wire-values.ts';

/**
 * The SDK core: signs every request as wire-contract §1 and sends it. `send` returns any answer as it
 * is, once; `request` applies the retry rules of spec 7 and returns the body of a 2xx, or throws the
 * status family's error.
 */
export interface ClientCredentials {
  apiKey: string;
  apiSecret: string;
  passphrase: string;
}

export interface ClientOptions extends ClientCredentials {
  /** The server: an http(s) URL, as text or a `URL`. */
  baseUrl: string | URL;
  /** Injected for tests; defaults to Date.now. */
  now?: () => number;
  fetch?: typeof fetch;
  /** Extra headers on every request (e.g. X-Simulator-Scenario in cert); one whose value is undefined is left out. */
  headers?: Record<string, string | undefined>;
  /** Retry rules of spec 7 for `request` (defaults: 3 retries, 100–500 ms first backoff); false turns them off. */
  retry?: RetryOptions | false;
  /**
   * Gives up on one attempt after this many ms (default 30 000); the attempt then counts as "no response"
   * (`SvcConnectionError`), which the retry rules treat like a 502: GETs are resent, writes checked first.
   */
  timeoutMs?: number;
}

/** Default time one attempt may take before it is abandoned as "no response". */
export const DEFAULT_TIMEOUT_MS = 30_000;
/**
 * The longest timeout a timer can hold (2^31 - 1 ms, about 24.8 days): a longer one fires at once, and every
 * attempt "timed out" after 1 ms, a write perhaps carried out meanwhile.
 */
export const MAX_TIMEOUT_MS = 2_147_483_647;

export type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  query?: Record<string, QueryValue>;
  /** A JSON value, or a string sent as is (tests send malformed or exotic bodies this way). */
  body?: unknown;
  /** Extra headers for this call; one whose value is undefined is left out. */
  headers?: Record<string, string | undefined>;
  /** Overrides the client's retry options for this call. */
  retry?: RetryOptions | false;
  /** false: send no X-SCX-* headers (`GET /time` and `GET /.well-known/jwks.json` need none). Default true. */
  authenticate?: boolean;
  /**
   * true: no `X-Simulator-Scenario`, neither this call's nor the client's (`ClientOptions.headers`): an
   * idempotence check or recovery look-up must see the real state (see {@link lookupOptions}).
   */
  withoutScenario?: boolean;
  /**
   * A look-up within a call (see {@link lookupOptions}): the retry clock's reading when that call began, so that the
   * look-up's waits count against the call's `deadlineMs` rather than a budget of its own (review: a check's 429
   * waited 10 s past the deadline).
   */
  budgetFrom?: number;
  /**
   * Cancels the call: the attempt under way, a wait between attempts and the spec 7 look-ups end with
   * `SvcAbortedError` (its `outcomeUnknown` set when a write may already have reached the server).
   */
  signal?: AbortSignal;
}

/** A URL as text with any user name and password in it replaced, for an error message (review: echoed). */
function withoutCredentials(url: string): string {
  // Up to the last `@`: a password may hold `@`, `#`, `/` or `?`, and an unparsable URL tells nothing of where it
  // ends (review).
  return url.replace(/\/\/.*@/s, '//…@');
}

/** What keeps a text from being a base URL (see `baseUrlFault`). */
export type BaseUrlFault = 'not-http' | 'credentials' | 'query' | 'spaces';

/**
 * Why `raw` cannot be the base URL that each call's path is added after, or null, with the URL as a message may show
 * it: one rule for the SDK's `baseUrl` and the CLI's `--url`/`--admin-url`, which word it each their own way.
 * - `not-http`: fetch cannot use it, and every call failed as "no answer" (a write of unknown outcome, review);
 * - `credentials`: fetch refuses it too (probe); the password is never shown;
 * - `query`: a query or fragment, after which each path went (a write POSTed to the host's root, refused as "invalid
 *   signature", probe); the query is not shown (it may hold a token);
 * - `spaces`: URL() trims them, but the path followed them (review: "http://host/ " fetched "/ /time").
 */
export function baseUrlFault(raw: string): { fault: BaseUrlFault; shown: string } | null {
  let url: URL | null = null;
  try {
    url = new URL(raw);
  } catch {
    // e.g. a port above 65535
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    return { fault: 'not-http', shown: withoutCredentials(raw) };
  const shown = `${url.protocol}//${url.host}${url.pathname}`;
  if (url.username || url.password) return { fault: 'credentials', shown };
  if (/[?#]/.test(raw)) return { fault: 'query', shown };
  if (/\s/.test(raw)) return { fault: 'spaces', shown: raw };
  return null;
}

/** The SDK's words for each `BaseUrlFault`, given the URL as it may be shown. */
const BASE_URL_REFUSALS: Record<BaseUrlFault, (shown: string) => string> = {
  'not-http': (shown) =>
    `baseUrl must be an http or https URL (e.g. http://127.0.0.1:8080), got ${JSON.stringify(shown)}`,
  credentials: (shown) =>
    `baseUrl must not carry a user name or password (requests are signed with apiKey and apiSecret), got ${JSON.stringify(shown)} with them`,
  query: (shown) =>
    `baseUrl must not carry a query or fragment (each call adds its path after it), got ${JSON.stringify(shown)} with one`,
  spaces: (shown) => `baseUrl must not contain spaces, got ${JSON.stringify(shown)}`,
};

/** The options every resource method takes. */
export type CallOptions = Pick<RequestOptions, 'headers' | 'retry' | 'signal'>;

export interface SvcResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  requestId: string | undefined;
}

export function buildTarget(path: string, query: Record<string, QueryValue> | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null) continue;
    // From JavaScript, or a cast: an object went as `[object Object]` and matched nothing (review).
    if (!['string', 'number', 'boolean'].includes(typeof value))
      throw new SvcArgumentError(
        `${key}: a query parameter must be a string, number or boolean, got ${typeof value}`,
      );
    params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * From JavaScript, or a cast (`send({method, path})`): a TypeError of a string method called on something else
 * (review); said by name, as the other arguments are.
 */
function checkMethodAndPath(method: unknown, path: unknown, call: 'send' | 'request'): void {
  for (const [name, value] of [
    ['method', method],
    ['path', path],
  ] as const)
    if (typeof value !== 'string')
      throw new SvcArgumentError(
        `${name} must be a string, got ${value === null ? 'null' : typeof value}: ${call}(method, path, options)`,
      );
}

/**
 * The signature covers the target as given, so it must be sent as given: one the URL parser changes (a character it
 * percent-encodes, such as a space or a letter past ASCII, a `#` and what follows, a `..` segment) was sent otherwise
 * and answered 401, which blamed the credentials; one without its leading `/` failed as an invalid URL, a write "of
 * unknown outcome" never sent (review). The resource methods encode their segments; `http` callers must too.
 */
function checkSentAsGiven(target: string): void {
  if (!target.startsWith('/') || target.startsWith('//'))
    throw new SvcArgumentError(`path must start with one "/", got ${JSON.stringify(target)}`);
  const url = new URL(target, 'http://host');
  const sent = url.pathname + url.search;
  if (sent !== target || url.hash !== '')
    throw new SvcArgumentError(
      `path ${JSON.stringify(target)} would be sent as ${JSON.stringify(sent)}${url.hash ? ' (without its #…)' : ''}, and the signature would not match: encode each segment with encodeURIComponent`,
    );
}

export class SvcClient {
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;
  /** `options.baseUrl` as text, without a trailing slash: each call's target goes after it. */
  private readonly base: string;

  constructor(readonly options: ClientOptions) {
    const { timeoutMs } = options;
    if (
      timeoutMs !== undefined &&
      !(Number.isInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= MAX_TIMEOUT_MS)
    )
      throw new RangeError(
        `timeoutMs must be a whole number of ms from 1 to ${MAX_TIMEOUT_MS}, got ${timeoutMs}`,
      );
    // A base URL that cannot work is the caller's mistake, said at once (review). A URL object is taken as its
    // text: checked as text, then kept as the object, it failed every call as "no answer", a write's outcome
    // unknown though nothing was sent (probe).
    const { baseUrl } = options;
    if (typeof baseUrl !== 'string' && !(baseUrl instanceof URL))
      throw new SvcArgumentError(
        `baseUrl must be an http or https URL, as text or a URL, got ${baseUrl === null ? 'null' : typeof baseUrl}`,
      );
    const refused = baseUrlFault(String(baseUrl));
    if (refused) throw new SvcArgumentError(BASE_URL_REFUSALS[refused.fault](refused.shown));
    this.base = String(baseUrl).replace(/\/$/, '');
    // Each is signed into every request: one left out (`apiSecret: process.env.SVC_API_SECRET`, unset) threw a
    // TypeError of node:crypto at the first call, or sent the key "undefined" (review). Said now, by name.
    for (const name of ['apiKey', 'apiSecret', 'passphrase'] as const) {
      if (typeof options[name] !== 'string')
        throw new SvcArgumentError(
          `${name} must be a string, got ${options[name] === null ? 'null' : typeof options[name]}`,
        );
    }
    this.fetchImpl = options.fetch ?? fetch;
    this.now = options.now ?? Date.now;
  }

  /**
   * Signs and sends once; never throws for an HTTP status (only `SvcConnectionError` for no answer at all).
   * For probing and tests; resource methods go through {@link SvcClient.request}.
   *
   * @example
   * const res = await client.http.send('GET', '/trades', { query: { page_size: 1 } });
   * console.log(res.status, res.requestId, res.body);
   */
  async send<T = unknown>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<SvcResponse<T>> {
    checkMethodAndPath(method, path, 'send');
    // As HTTP sends it: signed in one case and sent in another, a lower-case method was refused (review).
    method = method.toUpperCase();
    const target = buildTarget(path, options.query);
    checkSentAsGiven(target);
    const body =
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body);
    const headers = mergedHeaders(
      options.authenticate === false ? {} : this.authHeaders(method, target, body),
      body === undefined ? {} : { 'content-type': 'application/json' },
      this.options.headers,
      options.headers,
    );
    if (options.withoutScenario) {
      for (const name of Object.keys(headers))
        if (name.toLowerCase() === SIMULATOR_SCENARIO_HEADER) delete headers[name];
    }
    // A value fetch cannot send (a line break, a character past Latin-1, say in the passphrase) failed inside
    // fetch, read as "no answer": a write of unknown outcome that was never sent (review). The name only: the
    // value may be a credential.
    for (const [name, value] of Object.entries(headers)) {
      if (!HEADER_NAME.test(name))
        throw new SvcArgumentError(
          `header ${JSON.stringify(name)}: not a header name (letters, digits and !#$%&'*+-.^_\`|~ only)`,
        );
      // From JavaScript, or a cast: an object went as `[object Object]`, a number as its digits (probe).
      if (typeof value !== 'string')
        throw new SvcArgumentError(
          `header ${name}: its value must be a string, got ${value === null ? 'null' : typeof value}`,
        );
      if (!HEADER_VALUE.test(value))
        throw new SvcArgumentError(
          `header ${name}: its value cannot be sent (a line break, or a character past Latin-1)`,
        );
    }
    const { signal } = options;
    if (signal?.aborted)
      throw new SvcAbortedError(`${method} ${target}: aborted before it was sent`, signal.reason);
    // One controller per attempt, ended by the timeout or the caller's signal, rather than
    // AbortSignal.any([signal, AbortSignal.timeout(…)]): on Node 20 `any` leaves an entry on the caller's signal
    // that is never removed, so one long-lived signal passed to every call (an app's shutdown) grew by one
    // entry per call, for good (review: 9,000 after 9,000 calls and a GC).
    const attempt = new AbortController();
    const timer = setTimeout(
      () => attempt.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
      this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    );
    const abort = () => attempt.abort(signal!.reason);
    signal?.addEventListener('abort', abort, { once: true });
    let response: Response;
    let text: string;
    try {
      response = await this.fetchImpl(this.base + target, {
        method,
        headers,
        body,
        signal: attempt.signal,
        // A redirect is not followed: fetch would send the API key, passphrase and signature on to wherever
        // it points (it strips only Authorization and Cookie), and turn a POST into a GET. It is an error.
        redirect: 'manual',
      });
      // Inside the try: a connection cut while the body streams in is "no response" too.
      text = await response.text();
    } catch (error) {
      if (signal?.aborted) {
        const aborted = new SvcAbortedError(`${method} ${target}: aborted`, signal.reason);
        // It was sent: a write may be carried out all the same.
        if (method !== 'GET') aborted.outcomeUnknown = true;
        throw aborted;
      }
      throw new SvcConnectionError(`${method} ${target}: ${describeFetchError(error)}`, error, this.base);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    }
    let parsed: unknown = text;
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get('location') ?? '(no location)';
      parsed = {
        error: `redirected to ${location}; the SDK does not follow redirects, which would send the credentials there: check baseUrl`,
      };
    } else if ((response.headers.get('content-type') ?? '').includes('json') && text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return {
      status: response.status,
      headers: response.headers,
      body: parsed as T,
      requestId: response.headers.get(REQUEST_ID_HEADER) ?? undefined,
    };
  }

  /** wire-contract §1: the four X-SCX-* headers; the signature covers the target and body exactly as sent. */
  private authHeaders(method: string, target: string, body: string | undefined): Record<string, string> {
    const timestamp = String(Math.floor(this.now() / 1000));
    return {
      [AUTH_HEADERS.apiKey]: this.options.apiKey,
      [AUTH_HEADERS.signed]: signRequest(
        this.options.apiSecret,
        signingMessage(timestamp, method, target, body),
      ),
      [AUTH_HEADERS.timestamp]: timestamp,
      [AUTH_HEADERS.passphrase]: this.options.passphrase,
    };
  }

  /**
   * Sends with the retry rules of spec 7 and unwraps: the parsed body of a 2xx, or the status family's
   * SvcError. `hooks` give the endpoint's idempotence check and recoveries (spec 7.2, 7.3).
   *
   * @example
   * const { message } = await client.http.request<{ message: Trade[] }>('GET', '/trades', {
   *   query: { trade_state: 'active' },
   *   retry: { maxRetries: 5 },
   * });
   */
  async request<T = unknown>(
    method: string,
    path: string,
    options: RequestOptions = {},
    hooks?: RecoveryHooks<T>,
  ): Promise<T> {
    checkMethodAndPath(method, path, 'request');
    const retry = mergeRetry(this.options.retry, options.retry);
    const verb = method.toUpperCase();
    return sendWithRetries<T>({
      method: verb,
      path,
      hooks,
      retry,
      startedAt: options.budgetFrom,
      signal: options.signal,
      send: () => this.send(verb, path, options),
    });
  }
}

/**
 * A call's retry options with the client's: the call's `false` turns retries off for it; its options refine
 * the client's (say, allowRequote for one call) without dropping the client's injected sleep or clock, nor
 * its limits; and a client made with `false` stays without resends unless the call sets maxRetries itself.
 */
function mergeRetry(
  client: RetryOptions | false | undefined,
  call: RetryOptions | false | undefined,
): RetryOptions | false | undefined {
  if (call === false || call === undefined) return call ?? client;
  // A field the call leaves undefined keeps the client's: spread as it is, `{ maxRetries: undefined }` put the
  // default (3) in place of the client's 0, and an undefined sleep or clock dropped the client's (review).
  const given = Object.fromEntries(
    Object.entries(call).filter(([, value]) => value !== undefined),
  ) as RetryOptions;
  if (client === false) return { maxRetries: 0, ...given };
  return { ...client, ...given };
}

/** An HTTP header name (RFC 9110 token): fetch throws for any other, which read as "no answer" (review). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What an HTTP header value may hold, as fetch sends it (a ByteString without CR, LF or NUL). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Headers from several sources, later ones winning, by name in any letter case: spread as objects, a client-wide
 * `X-Request-Id` and a call's `x-request-id` both went, and fetch joined them ("client-wide, per-call"; review).
 */
function mergedHeaders(
  ...sources: Array<Record<string, string | undefined> | undefined>
): Record<string, string> {
  const merged: Record<string, string> = {};
  const nameOf = new Map<string, string>();
  for (const source of sources)
    for (const [name, value] of Object.entries(source ?? {})) {
      // Left out, as a query parameter's undefined is (`{ 'X-Simulator-Scenario': process.env.SCENARIO }`):
      // fetch sent the text "undefined" (probe).
      if (value === undefined) continue;
      const previous = nameOf.get(name.toLowerCase());
      if (previous !== undefined) delete merged[previous];
      nameOf.set(name.toLowerCase(), name);
      merged[name] = value;
    }
  return merged;
}

/** undici hides the useful part (ECONNREFUSED, ENOTFOUND, a timeout) in `cause`. */
function describeFetchError(error: unknown): string {
  const err = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError') return 'timed out';
  const cause = err?.cause?.code ?? err?.cause?.message;
  return cause ? `${err.message ?? String(error)} (${cause})` : (err?.message ?? String(error));
}

/**
 * The per-call options an idempotence check or recovery look-up runs with: the caller's retry options
 * (so an injected sleep or clock applies) and headers, without `X-Simulator-Scenario`, the call's or the
 * client's (a rehearsed failure is for the call itself; the check must see the real state), within the budget of
 * the call begun at `budgetFrom` (the sender gives each hook its call's start).
 */
export function lookupOptions(
  options: CallOptions,
  budgetFrom?: number,
): CallOptions & Pick<RequestOptions, 'withoutScenario' | 'budgetFrom'> {
  return {
    retry: options.retry,
    headers: options.headers,
    signal: options.signal,
    withoutScenario: true,
    budgetFrom,
  };
}
