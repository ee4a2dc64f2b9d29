import { Agent, type Dispatcher } from 'undici';
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
  /**
   * Called by the deadline sweep once the attempt has run for `slowMs` without its answer, and at each sweep after
   * while it returns false.
   */
  onSlow?: () => boolean;
}

export interface WebhookSender {
  send(input: SendInput): Promise<AttemptResult>;
  /** Aborts every attempt under way, and any later one at once: the worker is stopping (outcome `aborted`). */
  abortAll(): void;
  close(): Promise<void>;
}

/** Longest error text stored with an attempt. */
const MAX_ERROR_LENGTH = 300;

/** An attempt under way: what the deadline sweep and abortAll need. */
interface InFlight {
  /** undici's abort for this request, once it has started (see `exchange`). */
  controller: Dispatcher.DispatchController | null;
  /**
   * Ends the attempt while there is no controller yet (still connecting: a receiver's host that drops SYNs
   * holds it there until the connect timeout); the request is aborted when it starts.
   */
  cancel: ((reason: Error) => void) | null;
  deadline: number;
  /** performance.now() past which the attempt is slow: `onSlow` is called then (again while it returns false). */
  slowAt: number;
  onSlow: (() => boolean) | null;
  timedOut: boolean;
  /**
   * performance.now() when the status line arrived (0: not yet), the attempt's duration whatever is read after it.
   * Once it has, the result is known and only the rest of the body is being read off: cutting it now loses nothing
   * but the connection.
   */
  answeredAt: number;
  /** A failure's first body bytes (4xx, 5xx): the receiver's reason, kept with the attempt's error. */
  excerpt: Buffer[] | null;
}

/** Longest response body read off (to keep the connection reusable); a longer one closes it. */
const MAX_BODY_BYTES = 64 * 1024;
/**
 * How much of a 4xx or 5xx answer's body is kept with the attempt (review: a receiver refusing a signature said why,
 * "signature does not match", and the operator saw "HTTP 400" only), and how long its arrival is waited for after
 * the status line: the answer is the status, and a body that does not come does not hold the attempt up.
 */
const EXCERPT_BYTES = 200;
const EXCERPT_WAIT_MS = 500;

/** A failure's body excerpt as one printable line, or '' (binary, blank). */
function excerptText(chunks: Buffer[]): string {
  return (
    Buffer.concat(chunks)
      .subarray(0, EXCERPT_BYTES)
      .toString('utf8')
      // A character cut at the end, controls and line breaks: one line of what prints.
      .replace(/\uFFFD+$/, '')
      .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\uFFFD]+/gu, ' ')
      .replace(/\s+/g, ' ')
      .trim()
  );
}

// Module-level rather than closures made per attempt: each attempt made three, each costing an allocation and
// (under tsx, which keeps function names) a defineProperty.
/** ms since `started` (performance.now()), whole and never negative. */
function elapsedMs(started: number): number {
  return Math.max(0, Math.round(performance.now() - started));
}

function abortedResult(startedAt: number, started: number): AttemptResult {
  return {
    outcome: 'aborted',
    statusCode: null,
    error: 'aborted: worker shutting down',
    startedAt,
    durationMs: elapsedMs(started),
  };
}

function timedOutResult(startedAt: number, started: number, timeoutMs: number): AttemptResult {
  return {
    outcome: 'failed',
    statusCode: null,
    error: `timeout: no response within ${timeoutMs} ms`,
    startedAt,
    durationMs: elapsedMs(started),
  };
}

/** The most an answer's headers may take (more is a failed attempt, `UND_ERR_HEADERS_OVERFLOW`). */
export const ANSWER_HEADERS_MAX_BYTES = 256 * 1024;

export function createWebhookSender(options: {
  timeoutMs: number;
  /** How long an attempt runs without its answer before it is slow (SendInput.onSlow); 1 s by default. */
  slowMs?: number;
  now?: () => number;
  /** TESTS ONLY: how connections are made (undici's connector), e.g. one that never answers. */
  connect?: Agent.Options['connect'];
}): WebhookSender {
  const now = options.now ?? Date.now;
  const { timeoutMs, slowMs = 1_000 } = options;
  // One keep-alive pool for all receivers: a busy receiver gets its connections reused rather than a TCP
  // (and TLS) handshake per delivery. Every phase is bounded by the attempt timeout as well.
  const agent = new Agent({
    connect: options.connect ?? { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 60_000,
    // A receiver's 2xx is its answer whatever headers come with it (wire-contract §5): undici's 16 KiB default
    // failed one with a long set-cookie, which was then sent again and dead-lettered though taken (probe). Still
    // bounded, as the parser holds them while they arrive.
    maxHeaderSize: ANSWER_HEADERS_MAX_BYTES,
  });

  // The whole attempt is bounded by the timeout (the lease only covers that much). One timer aborts the
  // attempts past their deadline, rather than an AbortSignal.timeout (and an AbortSignal.any with the
  // shutdown signal) per attempt: those cost about 30 µs of CPU per delivery, a third of the HTTP cost.
  const inFlight = new Set<InFlight>();
  const sweepEveryMs = Math.min(250, Math.max(5, Math.floor(timeoutMs / 20)));
  let sweeper: NodeJS.Timeout | null = null;
  let aborting = false;
  let closed: Promise<void> | null = null;
  const sweep = () => {
    const at = performance.now();
    let slow: InFlight[] | null = null;
    for (const attempt of inFlight) {
      if (at >= attempt.deadline) {
        attempt.timedOut = true;
        // Still connecting, it has no controller: ended here, or it ran on to undici's connect timeout, which
        // its coarse timers fire up to half a second late (probe: attempts of 1.5 s at a timeout of 1 s).
        if (attempt.controller) attempt.controller.abort(new Error('timeout'));
        else attempt.cancel?.(new Error('timeout'));
      }
      if (attempt.onSlow && at >= attempt.slowAt && attempt.answeredAt === 0 && !attempt.timedOut)
        (slow ??= []).push(attempt);
    }
    // After the loop: a callback may start attempts (a freed slot), which join inFlight. One that throws is
    // not asked again, and does not keep the others from being asked (a timer's callback must not throw).
    if (slow)
      for (const attempt of slow) {
        let done = true;
        try {
          done = attempt.onSlow!();
        } catch {
          // not asked again
        }
        if (done) attempt.onSlow = null;
      }
  };

  // Receivers' URLs parsed once: `origin` and `path` are what the agent needs (bounded: one per platform).
  const targets = new Map<string, { origin: string; path: string }>();
  function targetOf(url: string) {
    let target = targets.get(url);
    if (!target) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
      // Emptied whole when full (past 1,000 platforms' URLs): parsing one again costs less than keeping recency.
      if (targets.size >= 1_000) targets.clear();
      targets.set(url, target);
    }
    return target;
  }

  /** The exchange is over (body ended or cut, or the request failed): the sweep no longer watches it. */
  function settle(attempt: InFlight) {
    // Nothing is left to abort. Kept until the attempt itself was dropped, the controller (and the request it
    // holds) cost about 10 µs of CPU per request more (bench/webhook-sender.bench.ts, measured alone).
    attempt.controller = null;
    inFlight.delete(attempt);
    if (inFlight.size === 0 && sweeper) {
      clearInterval(sweeper);
      sweeper = null;
    }
  }

  /**
   * One POST through undici's dispatcher API. Resolves with the status as soon as the status line arrives:
   * that is the answer (wire-contract §5 "Success = any 2xx within 10 s"), so a receiver that is slow to
   * finish its body is not retried, which would deliver twice, and a failure's status is kept whatever becomes
   * of its body. The rest of that body is still read off, to keep the connection for reuse, until it ends,
   * passes MAX_BODY_BYTES or the attempt's deadline (then it is cut and the connection dropped). A network
   * error before the status line rejects. The handler API rather than
   * `request()`: no response stream and no AbortSignal per attempt, which made the HTTP half of a delivery's
   * CPU (measured: 19 against 51-67 µs per request).
   */
  function exchange(input: SendInput, attempt: InFlight): Promise<number> {
    return new Promise((resolve, reject) => {
      attempt.cancel = (reason) => {
        settle(attempt);
        reject(reason);
      };
      let status = 0;
      let received = 0;
      let cut = false;
      /**
       * A failure's wait for its excerpt, which ends in its answer; whatever ends the exchange first clears it and
       * answers (resolving again changes nothing). No closure for it on a 2xx: each costs the hot path an allocation.
       */
      let excerptWait: NodeJS.Timeout | undefined;
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(controller) {
          attempt.controller = controller;
          if (attempt.timedOut || aborting) controller.abort(new Error('aborted'));
        },
        onResponseStart(_controller, statusCode) {
          // An interim answer (103 Early Hints, 102 Processing) comes before the final one (RFC 9110 §15.2): it is
          // not the answer. Taken for it, a receiver that answered 103 then 204 was retried and dead-lettered, and
          // got the notification seven times (probe). A 101 ends the exchange (no upgrade was asked for): a failure.
          if (statusCode >= 100 && statusCode < 200 && statusCode !== 101) return;
          status = statusCode;
          // The status line is the answer, whatever it is: a failure too (a 500 whose body was then cut, or
          // stalled, was recorded as "other side closed", or as a timeout, without its status: review).
          attempt.answeredAt = performance.now();
          if (statusCode < 400 || statusCode === 410) return resolve(statusCode);
          // A failure's reason, if its body brings one soon.
          attempt.excerpt = [];
          excerptWait = setTimeout(() => resolve(status), EXCERPT_WAIT_MS);
        },
        onResponseData(controller, chunk) {
          if (attempt.excerpt && received < EXCERPT_BYTES) {
            attempt.excerpt.push(chunk);
            if (received + chunk.length >= EXCERPT_BYTES) {
              clearTimeout(excerptWait);
              resolve(status);
            }
          }
          received += chunk.length;
          if (received > MAX_BODY_BYTES && !cut) {
            // The status is the answer; a body this long is not read to the end.
            cut = true;
            controller.abort(new Error('response body too long'));
          }
        },
        onResponseEnd() {
          settle(attempt);
          clearTimeout(excerptWait);
          resolve(status);
        },
        onResponseError(_controller, error) {
          settle(attempt);
          clearTimeout(excerptWait);
          // After the status line this only drops the connection: the answer is its status.
          if (attempt.answeredAt !== 0) resolve(status);
          else reject(error);
        },
      };
      try {
        // The fields named one by one: spreading the target into the options cost about 12 µs of CPU per
        // request in undici's Request (bench/webhook-sender.bench.ts: with settle's below, 1.63 → 1.13 of a
        // bare dispatch).
        const { origin, path } = targetOf(input.url);
        agent.dispatch(
          { origin, path, method: 'POST', body: input.rawBody, headers: input.headers },
          handler,
        );
      } catch (err) {
        // e.g. the agent is closed: no handler callback will come.
        settle(attempt);
        reject(err);
      }
    });
  }

  async function send(input: SendInput): Promise<AttemptResult> {
    const startedAt = now();
    const started = performance.now();
    if (aborting) return abortedResult(startedAt, started);
    const attempt: InFlight = {
      controller: null,
      cancel: null,
      deadline: started + timeoutMs,
      slowAt: started + slowMs,
      onSlow: input.onSlow ?? null,
      timedOut: false,
      answeredAt: 0,
      excerpt: null,
    };
    // Watched by the sweep until the exchange is over (`settle`), which for a 2xx or a 410 may be after
    // `send` has returned: the rest of the body is bounded by the same deadline.
    inFlight.add(attempt);
    if (!sweeper) {
      sweeper = setInterval(sweep, sweepEveryMs);
      sweeper.unref();
    }
    try {
      const statusCode = await exchange(input, attempt);
      const durationMs = Math.max(0, Math.round(attempt.answeredAt - started));
      // Success is a 2xx status line within the timeout: one that came later, before the sweep caught it, is not.
      if (durationMs > timeoutMs) return timedOutResult(startedAt, started, timeoutMs);
      if (statusCode >= 200 && statusCode < 300) {
        return { outcome: 'delivered', statusCode, error: null, startedAt, durationMs };
      }
      if (statusCode === 410) {
        return { outcome: 'gone', statusCode, error: '410 Gone: retries stopped', startedAt, durationMs };
      }
      // 304 Not Modified is of the class but points nowhere (RFC 9110 §15.4.5): no redirect to speak of.
      const reason = attempt.excerpt ? excerptText(attempt.excerpt) : '';
      const error =
        statusCode >= 300 && statusCode < 400 && statusCode !== 304
          ? `HTTP ${statusCode}: redirects are not followed`
          : reason
            ? `HTTP ${statusCode}: ${reason}`.slice(0, MAX_ERROR_LENGTH)
            : `HTTP ${statusCode}`;
      return { outcome: 'failed', statusCode, error, startedAt, durationMs };
    } catch (err) {
      if (attempt.timedOut || isTimeout(err)) return timedOutResult(startedAt, started, timeoutMs);
      if (aborting) return abortedResult(startedAt, started);
      return {
        outcome: 'failed',
        statusCode: null,
        error: isUnaskedContinue(err) ? UNASKED_CONTINUE : describeError(err),
        startedAt,
        durationMs: elapsedMs(started),
      };
    }
  }

  return {
    send,
    abortAll() {
      aborting = true;
      for (const attempt of inFlight) {
        if (attempt.controller) attempt.controller.abort(new Error('aborted'));
        else attempt.cancel?.(new Error('aborted'));
      }
    },
    // Once: a second close (a stop's, then a caller's finally) waits for the first. undici refuses to close an
    // agent it destroyed after abortAll, and a second close failed with ClientDestroyedError (CI, session 17).
    close() {
      return (closed ??= (async () => {
        // Bodies still being read after their answer are of no more use: cut them rather than wait for them.
        for (const attempt of inFlight) {
          if (attempt.answeredAt !== 0) attempt.controller?.abort(new Error('sender closed'));
        }
        // After abortAll, connections still being made are dropped rather than waited for (up to the timeout).
        if (aborting) await agent.destroy();
        else await agent.close();
        if (sweeper) clearInterval(sweeper);
        sweeper = null;
      })());
    },
  };
}

/** undici's own connect, headers and body timeouts (each also set to the attempt timeout). */
function isTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT'
  );
}

/**
 * undici (client-h1.js `onHeadersComplete`) destroys the connection on a `100 Continue` it did not ask for, the one
 * interim answer it refuses (102 and 103 are skipped), as a SocketError "bad response": with a request under way, it
 * raises that error for nothing else. RFC 9110 §15.2 lets a server send one; said as what happened, not as undici's
 * words (probe: "bad response" of a receiver that answered 200). Not read past: that would mean parsing the
 * receiver's bytes ourselves on every delivery, or patching undici.
 */
function isUnaskedContinue(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e?.code === 'UND_ERR_SOCKET' && e.message === 'bad response';
}
const UNASKED_CONTINUE =
  'HTTP 100 Continue before the answer: an interim answer this sender does not read (the receiver must send its final status alone)';

/** A network error as one line: code first (ECONNRESET, ECONNREFUSED, UND_ERR_…), then the message. */
function describeError(err: unknown): string {
  const e = err as {
    code?: unknown;
    message?: unknown;
    reason?: unknown;
    cause?: { code?: unknown; message?: unknown; reason?: unknown };
  };
  const code = e?.code ?? e?.cause?.code;
  // OpenSSL's message is its error queue, with its own source paths ("…:error:0A00010B:SSL routines:ssl_get_record:
  // wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:350:"): its reason says it (probe).
  const reason = e?.reason ?? e?.cause?.reason;
  if (typeof code === 'string' && code.startsWith('ERR_SSL_') && typeof reason === 'string') {
    const hint =
      code === 'ERR_SSL_WRONG_VERSION_NUMBER'
        ? ' (does the receiver speak TLS on that port? an https URL needs it)'
        : '';
    return `${code}: TLS: ${reason}${hint}`.slice(0, MAX_ERROR_LENGTH);
  }
  const message = String(e?.message ?? e?.cause?.message ?? err);
  const text = code && !message.includes(String(code)) ? `${String(code)}: ${message}` : message;
  return text.replace(/\s+/g, ' ').slice(0, MAX_ERROR_LENGTH);
}
