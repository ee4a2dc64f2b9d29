import { Agent, request } from 'undici';
import type { AttemptOutcome } from '../../store/tables/webhooks.tables.ts';

/**
 * One HTTP attempt of a webhook delivery (wire-contract §5 "Delivery"), with undici:
 * - success is any 2xx whose status line arrives within the timeout (10 s); `410 Gone` is reported as
 *   `gone` so the caller stops retrying; any other status, redirects included (they are not followed: a
 *   receiver that moved must be reconfigured by the operator, and following one would send a signed
 *   payload to an address nobody configured), is a failed attempt;
 * - a receiver that hangs, resets or refuses the connection, or answers garbage, is a failed attempt with
 *   the reason in `error`, never an exception: `send` does not throw.
 */
export interface AttemptResult {
  outcome: AttemptOutcome;
  statusCode: number | null;
  error: string | null;
  /** Wall-clock start of the request (epoch ms). */
  startedAt: number;
  durationMs: number;
}

export interface SendInput {
  url: string;
  rawBody: string;
  headers: Record<string, string>;
  /** Aborts the attempt when the worker shuts down; the result is then `aborted`, not a failure. */
  signal?: AbortSignal;
}

export interface WebhookSender {
  send(input: SendInput): Promise<AttemptResult>;
  close(): Promise<void>;
}

/** Longest error text stored with an attempt. */
const MAX_ERROR_LENGTH = 300;

export function createWebhookSender(options: { timeoutMs: number; now?: () => number }): WebhookSender {
  const now = options.now ?? Date.now;
  const { timeoutMs } = options;
  // One keep-alive pool for all receivers: a busy receiver gets its connections reused rather than a TCP
  // (and TLS) handshake per delivery. Every phase is bounded by the attempt timeout as well.
  const agent = new Agent({
    connect: { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 60_000,
  });

  async function send(input: SendInput): Promise<AttemptResult> {
    const startedAt = now();
    const started = performance.now();
    const elapsed = () => Math.max(0, Math.round(performance.now() - started));
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = input.signal ? AbortSignal.any([timeout, input.signal]) : timeout;
    try {
      const response = await request(input.url, {
        method: 'POST',
        body: input.rawBody,
        headers: input.headers,
        dispatcher: agent,
        signal,
      });
      const statusCode = response.statusCode;
      // The status is the answer; the body is read off only to keep the connection reusable (bounded).
      await response.body.dump({ limit: 64 * 1024 }).catch(() => {});
      const durationMs = elapsed();
      if (statusCode >= 200 && statusCode < 300) {
        return { outcome: 'delivered', statusCode, error: null, startedAt, durationMs };
      }
      if (statusCode === 410) {
        return { outcome: 'gone', statusCode, error: '410 Gone: retries stopped', startedAt, durationMs };
      }
      const error =
        statusCode >= 300 && statusCode < 400
          ? `HTTP ${statusCode}: redirects are not followed`
          : `HTTP ${statusCode}`;
      return { outcome: 'failed', statusCode, error, startedAt, durationMs };
    } catch (err) {
      const durationMs = elapsed();
      if (input.signal?.aborted && !timeout.aborted) {
        return {
          outcome: 'aborted',
          statusCode: null,
          error: 'aborted: worker shutting down',
          startedAt,
          durationMs,
        };
      }
      const error = timeout.aborted ? `timeout: no response within ${timeoutMs} ms` : describeError(err);
      return { outcome: 'failed', statusCode: null, error, startedAt, durationMs };
    }
  }

  return { send, close: () => agent.close() };
}

/** A network error as one line: code first (ECONNRESET, ECONNREFUSED, UND_ERR_…), then the message. */
function describeError(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
  const code = e?.code ?? e?.cause?.code;
  const message = String(e?.message ?? e?.cause?.message ?? err);
  const text = code && !message.includes(String(code)) ? `${String(code)}: ${message}` : message;
  return text.replace(/\s+/g, ' ').slice(0, MAX_ERROR_LENGTH);
}
