import { SvcClient } from '../sdk/client.ts';
import { SvcConnectionError } from '../sdk/errors.ts';
import { connectionNeverMade, isIndeterminateStatus } from '../sdk/retry-policy.ts';

/** A small client for the operator API (DESIGN §3), used by the CLI and by tests. */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    /** The parsed JSON answer, its text when it was not JSON, or undefined when it had no body. */
    readonly body: unknown,
    /** The answer's X-REQUEST-ID, to quote to support. */
    readonly requestId?: string,
  ) {
    const text =
      body === undefined || body === null || body === ''
        ? '(empty body)'
        : typeof body === 'string'
          ? body
          : JSON.stringify(body);
    super(`operator API answered ${status}: ${text.length > 300 ? `${text.slice(0, 300)}…` : text}`);
    this.name = 'AdminApiError';
  }

  /** A write answered 502 or 504 (or a CDN's 520, 524): it may have been carried out (spec 7.1.2), as the SDK's own errors say. */
  outcomeUnknown?: true;
}

/** The SDK's connection errors met by an operator call, which are not of a class of their own. */
const operatorConnectionErrors = new WeakSet<SvcConnectionError>();

/** Whether an error was met calling the operator API (rather than the public API through the SDK). */
export function isOperatorApiFailure(error: unknown): boolean {
  return (
    error instanceof AdminApiError ||
    (error instanceof SvcConnectionError && operatorConnectionErrors.has(error))
  );
}

export interface AdminClientOptions {
  /**
   * Gives up on a call after this many ms (default: the SDK's 30 000); the call then fails with the SDK's
   * `SvcConnectionError`, as when no server answers at all.
   */
  timeoutMs?: number;
}

export class AdminClient {
  /**
   * The SDK's transport without its request signing (the operator API takes a bearer token): the same
   * timeout, and the same `SvcConnectionError` for no answer (refused, reset, timed out, bad port).
   */
  private readonly http: SvcClient;

  constructor(
    readonly baseUrl: string,
    private readonly token: string,
    options: AdminClientOptions = {},
  ) {
    this.http = new SvcClient({
      baseUrl,
      apiKey: '',
      apiSecret: '',
      passphrase: '',
      retry: false,
      timeoutMs: options.timeoutMs,
    });
  }

  async request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    texts?: ReadonlyArray<keyof T & string>,
  ): Promise<T> {
    return (await this.answer<{ message: T }>(method, path, body, texts)).message;
  }

  /**
   * One call, answered with its whole body: `message`, and for a paged list `page`, `page_size`,
   * `total_pages` and `count`. Every call goes through here. `texts`: fields the message must hold as text, for a
   * caller that goes on with them (svc demo): an answer without them is not the operator API's.
   */
  async answer<A extends { message: unknown }>(
    method: string,
    path: string,
    body?: unknown,
    texts: ReadonlyArray<string> = [],
  ): Promise<A> {
    // A write that got no answer, or a 502/504, may have been carried out: said so, so that nobody repeats a
    // balance adjustment (which has no idempotency key) after "server unreachable" (review).
    const outcomeUnknownIfWrite = <E extends { outcomeUnknown?: true }>(error: E): E => {
      if (method !== 'GET') error.outcomeUnknown = true;
      return error;
    };
    const response = await this.http
      .send(method, `/admin${path}`, {
        // The SDK sends a string as it is; every operator body is JSON.
        body: typeof body === 'string' ? JSON.stringify(body) : body,
        authenticate: false,
        headers: { authorization: `Bearer ${this.token}` },
      })
      .catch((error: unknown) => {
        if (!(error instanceof SvcConnectionError)) throw error;
        operatorConnectionErrors.add(error);
        throw connectionNeverMade(error) ? error : outcomeUnknownIfWrite(error);
      });
    // A body that is not JSON (a proxy page, the firewall's text, another service) arrives as its text.
    const answer = response.body === '' ? undefined : response.body;
    const refused = () => new AdminApiError(response.status, answer, response.requestId);
    if (response.status < 200 || response.status > 299) {
      throw isIndeterminateStatus(response.status) ? outcomeUnknownIfWrite(refused()) : refused();
    }
    // Not the operator API's answer (a proxy's page, another service's JSON): a write may have reached it or not.
    // Its `message` is always an object or a list; one without the fields asked for is another server's too
    // (probe: svc demo went on with `undefined` for a platform code and its API key).
    const message = (answer as { message?: unknown } | undefined)?.message;
    if (
      typeof message !== 'object' ||
      message === null ||
      !texts.every((field) => typeof (message as Record<string, unknown>)[field] === 'string')
    ) {
      throw outcomeUnknownIfWrite(refused());
    }
    return answer as A;
  }

  get<T = unknown>(path: string) {
    return this.request<T>('GET', path);
  }
  /** A paged list: its items under `key`, with where the page is (wire-contract §3 `page`, `total_pages`). */
  async getPage<T = unknown>(path: string, key: string) {
    const { message, ...paging } = await this.answer<{ message: T[] }>('GET', path);
    return { [key]: message, ...paging };
  }
  post<T = unknown>(path: string, body: unknown = {}, texts?: ReadonlyArray<keyof T & string>) {
    return this.request<T>('POST', path, body, texts);
  }
  put<T = unknown>(path: string, body: unknown) {
    return this.request<T>('PUT', path, body);
  }
  patch<T = unknown>(path: string, body: unknown) {
    return this.request<T>('PATCH', path, body);
  }
  delete<T = unknown>(path: string) {
    return this.request<T>('DELETE', path);
  }
}
