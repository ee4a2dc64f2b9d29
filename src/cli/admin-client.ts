/** A small client for the operator API (DESIGN §3), used by the CLI and by tests. */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    /** The answer's X-REQUEST-ID, to quote to support. */
    readonly requestId?: string,
  ) {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    super(`operator API answered ${status}: ${text.length > 300 ? `${text.slice(0, 300)}…` : text}`);
    this.name = 'AdminApiError';
  }
}

export class AdminClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(new URL(`/admin${path}`, this.baseUrl), {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const requestId = response.headers.get('x-request-id') ?? undefined;
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // Not the operator API (a proxy page, the firewall's text, another service): report it as it came.
      throw new AdminApiError(response.status, text, requestId);
    }
    if (!response.ok) throw new AdminApiError(response.status, parsed, requestId);
    if (typeof parsed !== 'object' || parsed === null || !('message' in parsed)) {
      throw new AdminApiError(response.status, parsed ?? '', requestId);
    }
    return (parsed as { message: T }).message;
  }

  get<T = unknown>(path: string) {
    return this.request<T>('GET', path);
  }
  post<T = unknown>(path: string, body: unknown = {}) {
    return this.request<T>('POST', path, body);
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
