/**
 * Applies the retry table of spec 7.1–7.3 (`retry-policy.ts`) to one call: sends, asks `decideRetry` what
 * to do, and carries it out. The endpoint-specific parts (idempotence checks, recoveries) are given by
 * the resource method that knows them; this loop only sequences them.
 */
import { resolveRetryOptions, type RetryOptions } from './backoff.ts';
import { JWKS_PATH } from '../contract/wire-values.ts';
import { errorForStatus, SvcAbortedError, SvcConnectionError, SvcError, SvcServerError } from './errors.ts';
import {
  connectionNeverMade,
  decideRetry,
  isIndeterminateStatus,
  retryClassFor,
  type RequestOutcome,
  type RetryClass,
} from './retry-policy.ts';

/** What came back from one attempt: its status, headers, parsed body and request id. */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: unknown;
  requestId: string | undefined;
}

/**
 * The look-ups of a call. Each is given `startedAt`, the call's start by its retry clock: run with
 * `lookupOptions(options, startedAt)`, its own waits count against the call's `deadlineMs`.
 */
export interface RecoveryHooks<T> {
  /** spec 7.1.2: after a 502/504 on a write, find out whether the work happened; its result if it did. */
  idempotenceCheck?: (startedAt: number) => Promise<T | undefined>;
  /**
   * spec 7.2: execute answered 404: look the trade up, re-quote if allowed; undefined → throw the 404.
   * `earlierUnanswered`: an earlier attempt of this call got no answer, so it may still be carried out: the
   * 404 does not show the quote expired unexecuted, and a re-quote could trade twice.
   */
  recover404?: (
    options: ReturnType<typeof resolveRetryOptions>,
    context: { earlierUnanswered: boolean; startedAt: number },
  ) => Promise<T | undefined>;
  /**
   * spec 7.3: customer creation answered a conflict 400 (`refusal` is that answer): look the participant
   * up; undefined → throw the 400.
   */
  recover73?: (refusal: RawResponse, startedAt: number) => Promise<T | undefined>;
}

export interface SendPlan<T> {
  method: string;
  path: string;
  /** Defaults to the class the retry policy assigns to method and path. */
  retryClass?: RetryClass;
  send: () => Promise<RawResponse>;
  hooks?: RecoveryHooks<T>;
  retry?: RetryOptions | false;
  /** A look-up's: the start, by the retry clock, of the call it looks for (its budget); else now. */
  startedAt?: number;
  /** The caller's cancellation: also ends a wait between attempts. */
  signal?: AbortSignal;
}

function errorFor(response: RawResponse): SvcError {
  return errorForStatus(response.status, response.requestId, response.body);
}

/**
 * Runs an idempotence check. If the check itself fails, the outcome of the call is still unknown: the
 * caller gets the indeterminate answer's error (a 502/504 or no response, which says "look before you
 * repeat"), not the check's (a 500 of the look-up would read as "execute failed"), with the check's
 * failure in `checkError`.
 */
async function runCheck<T>(
  check: () => Promise<T | undefined>,
  original: () => SvcError,
): Promise<T | undefined> {
  try {
    return await check();
  } catch (checkError) {
    // The caller gave up: said as such, the call's outcome unknown (the check did not finish looking).
    if (checkError instanceof SvcAbortedError) {
      checkError.outcomeUnknown = true;
      throw checkError;
    }
    const error = original();
    error.checkError = checkError;
    error.outcomeUnknown = true;
    throw error;
  }
}

/**
 * Runs a spec 7.2/7.3 recovery. When an earlier attempt got no answer (it may still have been carried out), a
 * look-up that fails leaves the call's outcome unknown, as a failed idempotence check does ({@link runCheck}): the
 * caller gets this attempt's refusal with the look-up's failure in `checkError` and `outcomeUnknown`. Thrown as the
 * look-up's own error (a GET's 500, a 429, no answer), nothing said that a trade may have been booked, and spec 7.2
 * reads a 404 without a trade found as "re-quote and execute" (review). Otherwise the look-up's error is the call's.
 */
function recovering<T>(
  recover: () => Promise<T | undefined>,
  earlierUnanswered: boolean,
  original: () => SvcError,
): Promise<T | undefined> {
  return earlierUnanswered ? runCheck(recover, original) : recover();
}

/**
 * A 2xx of this API, by its status: a 204 without a body, a 202's `{}`, the JWKS document (the one answer not in
 * the envelope), and otherwise the
 * envelope with its `message` (wire-contract §3). Anything else is not its answer but a proxy's or a captive
 * portal's, however it parses: `{"foo":1}` or `{}` resolved a customer account's creation as done, `time()` as
 * undefined, and made a quote's execution fail with a TypeError (review, session 31). The ops and docs paths
 * (/healthz, /docs/json) are not this API: `client.http.send` reads them.
 */
function isThisApisAnswer(response: RawResponse, path: string): boolean {
  const { status, body } = response;
  if (status === 204) return body === '' || body === undefined;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const fields = body as Record<string, unknown>;
  if (path === JWKS_PATH) return Array.isArray(fields.keys);
  if (status === 202) return Object.keys(fields).length === 0;
  return fields.message !== undefined && fields.message !== null;
}

/**
 * The retry options' sleep, ended early by the caller's signal. The sleep is given the signal (the default one
 * then stops its timer), and raced against it too: an injected sleep (tests, a caller's scheduler) may ignore it.
 */
async function pause(
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
  ms: number,
  signal: AbortSignal | undefined,
  aborted: () => SvcAbortedError,
): Promise<void> {
  if (!signal) return sleep(ms);
  if (signal.aborted) throw aborted();
  let onAbort!: () => void;
  const abort = new Promise<never>((_, reject) => {
    onAbort = () => reject(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([sleep(ms, signal), abort]);
    // The default sleep ends quietly when aborted: whichever settled first, an abort is an abort.
    if (signal.aborted) throw aborted();
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function abortedBetweenAttempts(
  method: string,
  path: string,
  signal: AbortSignal,
  mayHaveActed: boolean,
): SvcAbortedError {
  const error = new SvcAbortedError(`${method} ${path}: aborted while waiting to send again`, signal.reason);
  if (mayHaveActed && method !== 'GET') error.outcomeUnknown = true;
  return error;
}

export async function sendWithRetries<T>(plan: SendPlan<T>): Promise<T> {
  const options = resolveRetryOptions(plan.retry === false ? { maxRetries: 0 } : plan.retry);
  const retryClass = plan.retryClass ?? retryClassFor(plan.method, plan.path);
  const started = plan.startedAt ?? options.now();
  /** An earlier attempt of this call was indeterminate (502, 504, no answer) and its check found nothing. */
  let earlierIndeterminate = false;
  /** Of those, one got no answer at all: the server may have done its work after the check looked. */
  let earlierUnanswered = false;
  for (let attempt = 1; ; attempt++) {
    let response: RawResponse | undefined;
    let networkError: SvcConnectionError | undefined;
    try {
      response = await plan.send();
    } catch (error) {
      if (!(error instanceof SvcConnectionError)) throw error;
      networkError = error;
    }
    const outcome: RequestOutcome = response
      ? { kind: 'response', status: response.status, headers: response.headers, body: response.body }
      : { kind: 'network-error', error: networkError };
    /** What this attempt ended with, as the error to throw. */
    const failure = (): SvcError => (response ? errorFor(response) : networkError!);
    /**
     * No answer (but for a connection never made), or a 502/504 (a CDN's 520/524): this attempt may or may not
     * have been carried out.
     */
    const indeterminate = response
      ? isIndeterminateStatus(response.status)
      : !connectionNeverMade(networkError);
    /**
     * `checked`: an idempotence check has just shown the call was not carried out. Only an answer ends the
     * server's work: after a timeout or a lost answer the check may run before the request is done, so an
     * empty check proves nothing then and the outcome stays unknown.
     */
    const finish = (checked = false, mayHaveActed = false): T => {
      if (response && response.status >= 200 && response.status < 300) {
        if (isThisApisAnswer(response, plan.path)) return response.body as T;
        // A write may not have reached the API, or may have: not a success (review: it printed "hello").
        const what = typeof response.body === 'object' ? "JSON that is not this API's answer" : 'not JSON';
        const error = new SvcServerError(
          `${plan.method} ${plan.path}: answered ${response.status} with a body that is ${what}`,
          response.status,
          response.requestId,
          response.body,
        );
        if (plan.method !== 'GET') error.outcomeUnknown = true;
        throw error;
      }
      const error = failure();
      if ((indeterminate || mayHaveActed) && plan.method !== 'GET' && !checked) error.outcomeUnknown = true;
      throw error;
    };
    // `retry: false` is a budget of no resends (resolveRetryOptions), not a skip of the spec 7.1–7.3 look-ups,
    // which resend nothing: without them an executed quote's 404 read as "expired", and a caller who had turned
    // retries off to avoid duplicates could quote and trade again (review).
    const action = decideRetry(
      { method: plan.method, retryClass, outcome, attempt, elapsedMs: options.now() - started },
      options,
    );
    switch (action.kind) {
      case 'return': {
        // A resend refused (a tenant already added, already removed) after an indeterminate attempt: that attempt
        // may be what made the state so, and the check, looking again now that the server has answered, can tell.
        if (earlierIndeterminate && response && response.status >= 400 && plan.hooks?.idempotenceCheck) {
          const check = plan.hooks.idempotenceCheck;
          const done = await runCheck(() => check(started), failure);
          if (done !== undefined) return done;
        }
        return finish(false, earlierUnanswered);
      }
      case 'retry':
      case 'wait-rate-limit':
        await pause(options.sleep, action.delayMs, plan.signal, () =>
          abortedBetweenAttempts(plan.method, plan.path, plan.signal!, earlierUnanswered || indeterminate),
        );
        continue;
      case 'check-then-retry':
      case 'check-then-return': {
        const check = plan.hooks?.idempotenceCheck;
        const done = check ? await runCheck(() => check(started), failure) : undefined;
        if (done !== undefined) return done;
        // An empty check after this answer shows this attempt did nothing, but not an earlier one that got no
        // answer: that one may still be at work (review: a timeout, then 504s, was thrown as known not done).
        // The wait before the resend was allowed before the check ran; the check's own time (its waits too) may
        // have brought its end past the deadline (review: the write was resent 5.6 s after it).
        if (
          action.kind === 'check-then-return' ||
          !check ||
          options.now() + action.delayMs > started + options.deadlineMs
        )
          return finish(
            check !== undefined && response !== undefined && !earlierUnanswered,
            earlierUnanswered,
          );
        earlierIndeterminate = true;
        earlierUnanswered ||= response === undefined;
        // The check found nothing done: only an attempt that got no answer may still be at work.
        await pause(options.sleep, action.delayMs, plan.signal, () =>
          abortedBetweenAttempts(plan.method, plan.path, plan.signal!, earlierUnanswered),
        );
        continue;
      }
      // After an attempt that got no answer, the look-up finding nothing leaves the outcome unknown (review: it
      // was thrown as known not done, and re-quoted).
      case 'recover-404': {
        const recover404 = plan.hooks?.recover404;
        const recovered = recover404
          ? await recovering(
              () => recover404(options, { earlierUnanswered, startedAt: started }),
              earlierUnanswered,
              failure,
            )
          : undefined;
        if (recovered !== undefined) return recovered;
        return finish(false, earlierUnanswered);
      }
      case 'recover-7.3': {
        const recover73 = plan.hooks?.recover73;
        const recovered =
          recover73 && response
            ? await recovering(() => recover73(response!, started), earlierUnanswered, failure)
            : undefined;
        if (recovered !== undefined) return recovered;
        return finish(false, earlierUnanswered);
      }
    }
  }
}

export { SvcError };
