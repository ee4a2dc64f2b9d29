/**
 * SDK errors by status family; each carries the HTTP status, the X-REQUEST-ID of the answer and the parsed
 * body, so a caller can log and support can trace it.
 */
export class SvcError extends Error {
  /**
   * Set on a 502/504 or no-response error when the idempotence check that should have settled it failed
   * too (spec 7.1.2): whether the work happened is unknown; look again before repeating the call.
   */
  checkError?: unknown;
  /**
   * Set on a write (not GET) that ended with a 502/504 or no response and that no idempotence check showed
   * was not carried out (the call has none, the check failed, or the last attempt got no answer, so the server
   * may still have been at it when the check ran): it may have been carried out; look before repeating. With
   * `retry: false` the check still runs: an empty one after a 502/504 answer settles it as not carried out.
   * Always set when `checkError` is.
   */
  outcomeUnknown?: true;

  constructor(
    message: string,
    readonly status: number,
    readonly requestId: string | undefined,
    readonly body: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }

  /** The server's `errors` list (wire-contract §3: 400 and 409 bodies, "<field>: <problem>"); else []. */
  get errors(): string[] {
    const errors = (this.body as { errors?: unknown } | undefined)?.errors;
    return Array.isArray(errors) ? errors.map(String) : [];
  }
}

/**
 * 400 (and 413): the request is wrong; `errors` lists each bad field. After
 * `participants.createCustomer` it can also be a spec 7.3 refusal that the look-up could not resolve.
 */
export class SvcInvalidRequestError extends SvcError {}
/** 401 */
export class SvcAuthenticationError extends SvcError {}
/** 403, including the firewall's "error code: 1020". */
export class SvcPermissionError extends SvcError {}
/** 404 */
export class SvcNotFoundError extends SvcError {}
/** 409: a duplicate entity, or a lock not acquired (`errors` says which). */
export class SvcConflictError extends SvcError {}
/** 429: thrown only when the retry budget ran out while the IP was still blocked. */
export class SvcRateLimitError extends SvcError {}
/**
 * 5xx (and any other status). A 500 is never retried; a 502 or 504 left after the retries (or on a write
 * with no idempotence check) means the outcome is unknown: look before repeating the call.
 */
export class SvcServerError extends SvcError {}
/**
 * An argument of a call that cannot be sent as given (`.` or `..` as a trade id, a zrn, an email: a path
 * segment the URL would drop or climb); thrown before any request. A TypeError, as it was before it had a
 * class of its own.
 */
export class SvcArgumentError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = 'SvcArgumentError';
  }
}

/** No HTTP answer at all (connection refused, reset, timed out). */
export class SvcConnectionError extends SvcError {
  constructor(
    message: string,
    cause: unknown,
    /** The server the call was for (the client's `baseUrl`), to tell a wrong address from a server down. */
    readonly baseUrl?: string,
  ) {
    super(message, 0, undefined, undefined);
    this.cause = cause;
  }
}

/**
 * The caller's `signal` aborted the call. Before anything was sent, nothing happened; after, a write
 * (`outcomeUnknown`) may have been carried out: look before repeating it. `cause` is the signal's reason.
 */
export class SvcAbortedError extends SvcError {
  constructor(message: string, reason: unknown) {
    super(message, 0, undefined, undefined);
    this.cause = reason;
  }
}

export function errorForStatus(status: number, requestId: string | undefined, body: unknown): SvcError {
  const detail =
    typeof body === 'string'
      ? body
      : (((body as { error?: unknown; message?: unknown; errors?: unknown }) ?? {}).errors ??
        (body as { message?: unknown })?.message ??
        (body as { error?: unknown })?.error);
  // A body with none of those (a proxy's `{}`, nothing at all), or whose words are empty, is shown as it came: it
  // said "undefined" (probe), and `{"errors": []}` nothing (review).
  const words = (value: unknown): string =>
    Array.isArray(value)
      ? value.map((item) => (typeof item === 'string' ? item : JSON.stringify(item))).join('; ')
      : typeof value === 'string'
        ? value
        : value === undefined || value === null
          ? ''
          : JSON.stringify(value);
  const asItCame = typeof body === 'string' ? body : body === undefined ? '' : JSON.stringify(body);
  const text = words(detail) || asItCame || '(no body)';
  const message = `HTTP ${status}: ${text}${requestId ? ` (request id ${requestId})` : ''}`;
  if (status === 400 || status === 413 || status === 422)
    return new SvcInvalidRequestError(message, status, requestId, body);
  if (status === 401) return new SvcAuthenticationError(message, status, requestId, body);
  if (status === 403) return new SvcPermissionError(message, status, requestId, body);
  if (status === 404) return new SvcNotFoundError(message, status, requestId, body);
  if (status === 409) return new SvcConflictError(message, status, requestId, body);
  if (status === 429) return new SvcRateLimitError(message, status, requestId, body);
  return new SvcServerError(message, status, requestId, body);
}
