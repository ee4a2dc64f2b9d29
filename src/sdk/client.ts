import { AUTH_HEADERS, signRequest, signingMessage } from '../contract/request-signature.ts';
import { REQUEST_ID_HEADER } from '../contract/responses.ts';
import type { RetryOptions } from './backoff.ts';
import { SvcConnectionError } from './errors.ts';
import { sendWithRetries, type RecoveryHooks } from './request-sender.ts';

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
  baseUrl: string;
  /** Injected for tests; defaults to Date.now. */
  now?: () => number;
  fetch?: typeof fetch;
  /** Extra headers on every request (e.g. X-Simulator-Scenario in cert). */
  headers?: Record<string, string>;
  /** Retry rules of spec 7 for `request` (defaults: 3 retries, 100–500 ms first backoff); false turns them off. */
  retry?: RetryOptions | false;
}

export type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  query?: Record<string, QueryValue>;
  /** A JSON value, or a string sent as is (tests send malformed or exotic bodies this way). */
  body?: unknown;
  headers?: Record<string, string>;
  /** Overrides the client's retry options for this call. */
  retry?: RetryOptions | false;
}

export interface SvcResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  requestId: string | undefined;
}

export function buildTarget(path: string, query: Record<string, QueryValue> | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export class SvcClient {
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;

  constructor(readonly options: ClientOptions) {
    this.fetchImpl = options.fetch ?? fetch;
    this.now = options.now ?? Date.now;
  }

  /** Signs and sends; never throws for an HTTP status (only for no answer at all). */
  async send<T = unknown>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<SvcResponse<T>> {
    const target = buildTarget(path, options.query);
    const body =
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body);
    const timestamp = String(Math.floor(this.now() / 1000));
    const signature = signRequest(this.options.apiSecret, signingMessage(timestamp, method, target, body));
    const headers: Record<string, string> = {
      [AUTH_HEADERS.apiKey]: this.options.apiKey,
      [AUTH_HEADERS.signed]: signature,
      [AUTH_HEADERS.timestamp]: timestamp,
      [AUTH_HEADERS.passphrase]: this.options.passphrase,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...this.options.headers,
      ...options.headers,
    };
    let response: Response;
    try {
      response = await this.fetchImpl(this.options.baseUrl.replace(/\/$/, '') + target, {
        method,
        headers,
        body,
      });
    } catch (error) {
      throw new SvcConnectionError(`${method} ${target}: ${(error as Error).message}`, error);
    }
    const text = await response.text();
    let parsed: unknown = text;
    if ((response.headers.get('content-type') ?? '').includes('json') && text) {
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

  /**
   * Sends with the retry rules of spec 7 and unwraps: the parsed body of a 2xx, or the status family's
   * SvcError. `hooks` give the endpoint's idempotence check and recoveries (spec 7.2, 7.3).
   */
  async request<T = unknown>(
    method: string,
    path: string,
    options: RequestOptions = {},
    hooks?: RecoveryHooks<T>,
  ): Promise<T> {
    const retry = options.retry ?? this.options.retry;
    return sendWithRetries<T>({ method, path, hooks, retry, send: () => this.send(method, path, options) });
  }
}
