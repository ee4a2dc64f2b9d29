import { isIP, isIPv6 } from 'node:net';
import { Redis, type RedisOptions } from 'ioredis';
import { monotonicClock, type Clock } from '../../lib/clock.ts';
import { invalid, unavailable } from '../errors.ts';
import { MemoryRateLimitStore } from './memory-rate-limit.store.ts';
import { RedisRateLimitStore, rateLimitRedisOptions } from './redis-rate-limit.store.ts';
import {
  rateLimitKey,
  refused,
  resolvePolicy,
  retryAfterSeconds,
  silentLogger,
  type RateLimitDecision,
  type RateLimitLogger,
  type RateLimitPolicy,
  type RateLimiter,
  type RateLimitState,
} from './rate-limiter.ts';

export interface RateLimiterServiceOptions {
  policy?: Partial<RateLimitPolicy>;
  /**
   * This instance's time: its blocks held in memory, its "blocked until" cache, its back-off. Default: monotonic, so
   * that a wall clock stepped back a minute does not refuse a blocked IP for a minute more (review).
   */
  clock?: Clock;
  logger?: RateLimitLogger;
  /** The shared store (Redis). Absent → this instance limits on its own, in memory. */
  shared?: RedisRateLimitStore;
  /** close() also closes the shared store's Redis connection. */
  ownsSharedClient?: boolean;
  /** Where the shared store is (REDIS_URL without its password), for the logs. */
  sharedAddress?: string;
  /** After a Redis failure, serve from memory at least this long before trying Redis again (or until it reconnects). */
  retrySharedAfterMs?: number;
  /** Period of the idle-IP sweep (real time). Default: the window. false: no timer; call sweep() yourself. */
  sweepIntervalMs?: number | false;
}

/** Counters since start, exported to Prometheus by `registerRateLimitMetrics`. */
export interface RateLimiterStats {
  /** Requests refused with 429 (during a block or starting one). */
  refused: number;
  /** Blocks started (the would-be (limit+1)-th requests). */
  blocksStarted: number;
  /** Refusals answered from the local "blocked until" cache, without asking the store. */
  cachedRefusals: number;
  /** Times this instance switched from Redis to the in-memory fallback. */
  fallbacks: number;
  /** Redis commands that failed. */
  sharedErrors: number;
}

/** ioredis connection states in which a command fails at once (the limiter's client queues none). */
const CONNECTION_DOWN = new Set(['close', 'reconnecting', 'end']);

/**
 * The limiter the app uses: a store (Redis when configured, else memory), plus per instance
 * - a "blocked until" cache, so a blocked IP costs no Redis round trip (DESIGN §5);
 * - the fallback: while Redis errors or is unreachable, the in-memory store limits this instance's
 *   traffic; logged once per outage, visible as `fallbackActive`; `check` never rejects;
 * - resumption: when ioredis reconnects, or when Redis, asked in the background `retrySharedAfterMs` after a
 *   failure (at a request, or at /readyz), takes writes again, the shared limit is back.
 */
export class RateLimiterService implements RateLimiter {
  readonly policy: RateLimitPolicy;
  readonly memory: MemoryRateLimitStore;
  readonly shared: RedisRateLimitStore | undefined;
  readonly stats: RateLimiterStats = {
    refused: 0,
    blocksStarted: 0,
    cachedRefusals: 0,
    fallbacks: 0,
    sharedErrors: 0,
  };
  /** Resolves once this instance listens for unblocks made by other instances (immediately without Redis). */
  readonly unblockSubscription: Promise<void>;

  private readonly clock: Clock;
  private readonly logger: RateLimitLogger;
  private readonly retrySharedAfterMs: number;
  private readonly ownsSharedClient: boolean;
  /**
   * ip → end of its block on *this* instance's clock, and whether the block was decided here, from memory
   * (Redis never heard of it), or by Redis.
   */
  private readonly blockedUntil = new Map<string, { until: number; fromMemory: boolean }>();
  private inFallback = false;
  private retrySharedAt = 0;
  /**
   * In fallback, whether Redis is being asked (in the background, at most once per back-off) if it is back;
   * every request is decided from memory meanwhile.
   */
  private probing = false;
  /** Counts the unblocks heard: a refusal Redis gave before an unblock must not be cached after it. */
  private unblocks = 0;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  private readonly closeSubscription: () => void;
  /** The connection's last error, the cause of its loss when it closes (ECONNREFUSED, ETIMEDOUT, …). */
  private lastSharedError: unknown;
  private readonly onSharedError = (err: unknown): void => {
    this.lastSharedError = err;
  };
  private readonly sharedAddress: string | undefined;
  private readonly onSharedReady = (): void => {
    this.readSharedClock();
    this.sharedBack();
  };
  /**
   * The connection is lost: the outage is said (logged, counted) now, not when a request first meets it, which on
   * an idle instance was never (probe: fallback_active 1 with no log line and fallbacks_total 0).
   */
  private readonly onSharedClose = (): void => {
    this.shared!.forgetClock();
    this.fallBack(this.lastSharedError ?? new Error('connection to Redis lost'), false);
    this.lastSharedError = undefined;
  };

  constructor(options: RateLimiterServiceOptions = {}) {
    this.policy = resolvePolicy(options.shared?.policy ?? options.policy);
    this.clock = options.clock ?? monotonicClock;
    this.logger = options.logger ?? silentLogger;
    this.memory = new MemoryRateLimitStore({ policy: this.policy, clock: this.clock });
    this.shared = options.shared;
    this.ownsSharedClient = options.ownsSharedClient ?? false;
    this.sharedAddress = options.sharedAddress;
    this.retrySharedAfterMs = options.retrySharedAfterMs ?? 1000;

    if (this.shared) {
      // Without an error listener ioredis prints every connection error; failures are reported
      // once, by fallBack. On 'ready' (reconnected) the next request tries Redis again.
      this.shared.client.on('error', this.onSharedError).on('ready', this.onSharedReady);
      if (this.shared.ready) this.readSharedClock();
      const subscription = this.shared.subscribeUnblocks(
        (ip) => this.forget(ip),
        () => this.dropSharedBlocks(),
      );
      this.unblockSubscription = subscription.subscribed;
      this.closeSubscription = subscription.close;
    } else {
      this.unblockSubscription = Promise.resolve();
      this.closeSubscription = () => {};
    }

    const sweepIntervalMs = options.sweepIntervalMs ?? this.policy.windowMs;
    if (sweepIntervalMs !== false) {
      this.sweepTimer = setInterval(() => this.sweep(), sweepIntervalMs);
      this.sweepTimer.unref();
    }
  }

  /**
   * true while requests are limited by this instance's memory because Redis failed, or would be because its
   * connection is down: an idle instance (no request has met the outage yet) shows it as /readyz does.
   */
  get fallbackActive(): boolean {
    return this.inFallback || (this.shared !== undefined && CONNECTION_DOWN.has(this.shared.client.status));
  }

  /** Number of "blocked until" entries cached on this instance. */
  get cachedBlocks(): number {
    return this.blockedUntil.size;
  }

  /**
   * Decides one request from `address` and calls `done` with the decision: at once when it is known
   * locally (cached block, memory store, fallback), when Redis answers otherwise. Never fails: a Redis
   * error decides the request from memory. The HTTP hook's path, so it costs no promise.
   */
  decide(address: string, done: (decision: RateLimitDecision) => void): void {
    const ip = rateLimitKey(address, this.policy.ipv6PrefixLength);
    const now = this.clock.now();
    const until = this.blockedUntil.get(ip)?.until;
    if (until !== undefined) {
      if (now < until) {
        this.stats.refused++;
        this.stats.cachedRefusals++;
        done(refused(until - now, false));
        return;
      }
      this.blockedUntil.delete(ip);
    }
    const shared = this.shared;
    if (shared === undefined || this.inFallback) {
      if (shared !== undefined && this.mayProbe(now)) this.probeShared();
      done(this.record(ip, now, this.memory.hit(ip), true));
      return;
    }
    const unblocksBefore = this.unblocks;
    shared.decide(ip, (err, decision) => {
      if (decision !== undefined) {
        if (this.inFallback) this.resume();
        // Decided before an operator lifted this (or any) block: answered, not cached.
        if (this.unblocks !== unblocksBefore) done(this.count(decision));
        else done(this.record(ip, now, decision));
      } else {
        this.fallBack(err);
        done(this.record(ip, now, this.memory.hit(ip), true));
      }
    });
  }

  /** `decide` for callers that prefer a value: the decision itself when known at once, else a promise. */
  check(address: string): RateLimitDecision | Promise<RateLimitDecision> {
    let known: RateLimitDecision | undefined;
    let resolve: ((decision: RateLimitDecision) => void) | undefined;
    this.decide(address, (decision) => {
      if (resolve) resolve(decision);
      else known = decision;
    });
    return known ?? new Promise((r) => (resolve = r));
  }

  /** Operator view, from the store that is limiting right now. */
  inspect(address: string): Promise<RateLimitState> {
    return this.inspectKey(operatorKey(address, this.policy));
  }

  /**
   * `inspect` of a canonical key (which need not be an address itself: a zone stays on it), with this
   * instance's own block when it ends later than the store's: a block Redis decided, cached here while
   * Redis is away, or one decided from memory during an outage, which holds to its end after Redis is
   * back. The view used to say "not blocked" while this instance refused the IP (review).
   */
  private async inspectKey(ip: string): Promise<RateLimitState> {
    const state = await this.inspectStore(ip);
    const cached = this.blockedUntil.get(ip)?.until;
    const now = this.clock.now();
    if (cached === undefined || now >= cached) return state;
    const storeEnds = state.blocked ? now + state.retry_after_seconds * 1000 : 0;
    if (storeEnds >= cached) return state;
    return {
      ...state,
      blocked: true,
      blocked_until: cached,
      retry_after_seconds: retryAfterSeconds(cached - now),
    };
  }

  private async inspectStore(ip: string): Promise<RateLimitState> {
    if (this.shared !== undefined && (!this.inFallback || this.mayProbe(this.clock.now()))) {
      try {
        const state = await this.shared.inspect(ip);
        if (this.inFallback) this.resume();
        return state;
      } catch (err) {
        this.fallBack(err);
      }
    }
    return this.memory.inspect(ip);
  }

  /**
   * Lifts the IP's block and clears its log, here and (through Redis pub/sub) on every instance. When
   * Redis cannot be reached the block held there stays in force for every instance: that is a retryable
   * 503, not a "lifted" the other instances would contradict (this instance's memory is cleared all the
   * same). Returns the state afterwards.
   */
  async unblock(address: string): Promise<RateLimitState> {
    const ip = operatorKey(address, this.policy);
    this.forget(ip);
    if (this.shared !== undefined) {
      try {
        await this.shared.unblock(ip);
      } catch (err) {
        this.fallBack(err);
        throw unavailable('the block could not be lifted in Redis; retry when it is reachable');
      }
    }
    // The key, not validated again as an address: "::ffff:1.2.3.4%x" is keyed "1.2.3.4%x", which is not one,
    // and a 400 now would report a refusal after the block was lifted.
    return this.inspectKey(ip);
  }

  /** For /readyz (DESIGN §6): whether the shared store answers and takes writes; true when there is none. */
  async sharedReachable(): Promise<boolean> {
    if (this.shared === undefined) return true;
    return this.shared.takesWrites().then(
      () => {
        // A stall ends with no reconnection ('ready'): the probe that finds Redis answering ends the fallback.
        if (this.inFallback) this.sharedBack();
        return true;
      },
      (err: unknown) => {
        // And the probe that finds it failing starts one: an idle instance whose Redis hung or took no writes said
        // degraded on /readyz while svc_rate_limit_fallback_active stayed 0, unlogged, until a request met it (probe).
        this.fallBack(err, false);
        return false;
      },
    );
  }

  /**
   * Redis answers again (reconnected, or found answering by the readiness probe): the shared limit applies
   * again now, not at the next request (an idle instance's svc_rate_limit_fallback_active stayed 1 until one
   * came, while /readyz said ready; review).
   */
  private sharedBack(): void {
    this.retrySharedAt = 0;
    this.dropSharedBlocks();
    if (this.inFallback) this.resume();
  }

  /** Redis's clock, for the deadlines of the calls (RedisRateLimitStore.readClock); a failure leaves them without. */
  private readSharedClock(): void {
    this.shared!.readClock().catch(() => {});
  }

  /** Drops idle IPs from memory and ended blocks from the cache. Runs on a timer unless disabled. */
  sweep(): void {
    this.memory.sweep();
    const now = this.clock.now();
    for (const [ip, { until }] of this.blockedUntil) {
      if (now >= until) this.blockedUntil.delete(ip);
    }
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.closeSubscription();
    if (!this.shared) return;
    const { client } = this.shared;
    // Off before the client quits: its own closing is no outage.
    client.off('ready', this.onSharedReady).off('close', this.onSharedClose);
    // A connection of the caller's: its errors are the caller's to hear.
    if (!this.ownsSharedClient) {
      client.off('error', this.onSharedError);
      return;
    }
    // Ours keeps its (silent) error listener while it closes: what fails from here on (a TLS handshake cut short,
    // a connect timing out) tells nothing, and unheard, ioredis printed it with its stack (review: `rediss://` to a
    // Redis without TLS, stopped).
    await client.quit().catch(() => client.disconnect());
  }

  /**
   * In fallback, whether Redis may be asked again: it is connected, the back-off has passed, and no other
   * probe is asking. A Redis that is slow rather than down stays "ready": without the single probe, every
   * request after the back-off would wait for the command timeout.
   */
  private mayProbe(now: number): boolean {
    return !this.probing && now >= this.retrySharedAt && this.shared!.ready;
  }

  /**
   * In fallback, asks Redis in the background whether it takes writes again (the script /readyz runs): the
   * request that found the back-off over is decided from memory with the others. It used to be the probe
   * itself, so that while Redis hung, one request per back-off on each instance waited the whole command
   * timeout (probe: 1 s added to every fifth request).
   */
  private probeShared(): void {
    this.probing = true;
    this.shared!.takesWrites().then(
      () => {
        this.probing = false;
        this.sharedBack();
      },
      (err: unknown) => {
        this.probing = false;
        this.fallBack(err, false);
      },
    );
  }

  private count(decision: RateLimitDecision): RateLimitDecision {
    if (!decision.allowed) {
      this.stats.refused++;
      if (decision.blockStarted) this.stats.blocksStarted++;
    }
    return decision;
  }

  private record(
    ip: string,
    now: number,
    decision: RateLimitDecision,
    fromMemory = false,
  ): RateLimitDecision {
    // Relative to our clock at send time, so Redis-vs-instance clock skew does not matter and the cache
    // never outlasts the block held in the store.
    if (!this.count(decision).allowed)
      this.blockedUntil.set(ip, { until: now + decision.retryAfterMs, fromMemory });
    return decision;
  }

  /**
   * Redis is back, or its unblock channel was subscribed again: unblocks published meanwhile were not heard,
   * so the cached blocks Redis decided may have been lifted; Redis holds them, and the next request of a
   * blocked IP caches its block again. The blocks this instance decided from memory during the outage are
   * kept to their end: Redis never heard of them, and dropping them lifted each at once, well before the
   * Retry-After it had announced (review).
   */
  private dropSharedBlocks(): void {
    for (const [ip, block] of this.blockedUntil) if (!block.fromMemory) this.blockedUntil.delete(ip);
  }

  private forget(ip: string): void {
    this.unblocks++;
    this.blockedUntil.delete(ip);
    this.memory.unblock(ip);
  }

  /**
   * Redis could not be reached at start: the outage is said then, with where, not at the first request (the
   * limiter serves from memory meanwhile, and switches when ioredis gets through).
   */
  unreachableAtStart(err: unknown): void {
    this.fallBack(err);
  }

  /**
   * From now on a lost connection is an outage said at once (logged, counted in `fallbacks`), not when a request
   * first meets it. Called once the connection was first tried: before, a start that stops (Redis refused the
   * database) warned of an outage it then did not run in (review).
   */
  watchConnection(): void {
    this.shared?.client.on('close', this.onSharedClose);
  }

  /**
   * DESIGN §5: Redis failed → limit from memory, log once per outage, never answer 5xx. `failedDecision`: a
   * request's (or an operator call's) decision failed, counted in `sharedErrors`; a lost connection or a failed
   * probe is not one (review: the reconnect attempts of an outage counted as store errors).
   */
  private fallBack(err: unknown, failedDecision = true): void {
    if (failedDecision) this.stats.sharedErrors++;
    this.retrySharedAt = this.clock.now() + this.retrySharedAfterMs;
    if (this.inFallback) return;
    this.inFallback = true;
    this.stats.fallbacks++;
    this.logger.warn(
      { err: describeRedisFailure(err), redis: this.sharedAddress },
      'rate limit: Redis unavailable, limiting with the in-memory store of this instance',
    );
  }

  private resume(): void {
    this.inFallback = false;
    this.logger.info({}, 'rate limit: Redis is back, the shared limit applies again');
  }
}

/**
 * A Redis failure in words: ioredis refuses commands while disconnected with "Stream isn't writeable and
 * enableOfflineQueue options is false", which says nothing of the cause to an operator (review).
 */
function describeRedisFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return /Stream isn't writeable/.test(message) ? 'not connected (reconnecting)' : message;
}

/** REDIS_URL without its user name and password: where, for the logs. */
export function redisAddress(redisUrl: string): string {
  try {
    const url = new URL(redisUrl);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return 'REDIS_URL';
  }
}

/**
 * An address named by the operator, counted under its canonical key; or the IPv6 network the view names as the key
 * ("2001:db8:1:2::/64", which `svc rate-limits show` printed). 400 for anything else.
 */
function operatorKey(address: string, policy: RateLimitPolicy): string {
  const prefix = policy.ipv6PrefixLength;
  const slash = address.indexOf('/');
  if (slash !== -1) {
    if (prefix === 128) throw invalid(NOT_AN_ADDRESS);
    const network = address.slice(0, slash);
    // An IPv4(-mapped) or link-local address is counted per address, so no network of it is a key.
    const key = isIPv6(network) ? rateLimitKey(network, prefix) : '';
    if (address.slice(slash) !== `/${prefix}` || !key.endsWith(`/${prefix}`))
      throw invalid(
        `${NOT_AN_ADDRESS}, or an IPv6 network as counted (/${prefix}, SVC_RATE_LIMIT_IPV6_PREFIX)`,
      );
    return key;
  }
  if (isIP(address) === 0) throw invalid(NOT_AN_ADDRESS);
  return rateLimitKey(address, prefix);
}

const NOT_AN_ADDRESS = 'ip: must be an IPv4 or IPv6 address';

export interface CreateRateLimiterOptions {
  /** Unset → in-memory limiter for this instance only (DESIGN §6 `REDIS_URL`). */
  redisUrl?: string;
  policy?: Partial<RateLimitPolicy>;
  keyPrefix?: string;
  logger?: RateLimitLogger;
  clock?: Clock;
  /** Extra ioredis options (e.g. a faster retryStrategy in tests). */
  redisOptions?: RedisOptions;
}

/**
 * Builds the app's limiter from config. With a Redis URL it connects first; if Redis is not reachable
 * the limiter starts in fallback (logged) and switches to Redis when ioredis gets through.
 */
export async function createRateLimiter(options: CreateRateLimiterOptions = {}): Promise<RateLimiterService> {
  const { redisUrl, policy, keyPrefix, logger, clock, redisOptions } = options;
  if (!redisUrl) return new RateLimiterService({ policy, logger, clock });
  const client = new Redis(redisUrl, rateLimitRedisOptions(redisOptions));
  const shared = new RedisRateLimitStore({ client, policy, keyPrefix });
  const limiter = new RateLimiterService({
    shared,
    ownsSharedClient: true,
    sharedAddress: redisAddress(redisUrl),
    logger,
    clock,
  });
  let started = false;
  let refusedAtStart: string | null = null;
  watchRefusals(client, (refusal) => {
    if (!started) {
      // The first says why: AUTH's answer comes before those of the commands sent after it (NOAUTH to a SELECT).
      refusedAtStart ??= refusal.message;
      client.disconnect();
    } else if (refusal.of === 'database') {
      client.disconnect();
      logger?.warn(
        { refusal: refusal.message },
        "rate limit: REDIS_URL's database is refused; this instance limits in memory until it is restarted",
      );
    }
    // Credentials refused after the start (a password changed on Redis first) are an outage until they match
    // again: ioredis keeps trying and the fallback limits meanwhile, logged as any outage.
  });
  let unreachable: unknown = null;
  // connect() rejects with "Connection is closed."; the cause (ECONNREFUSED, ENOTFOUND, …) came as an event.
  let cause: unknown = null;
  const noteCause = (err: unknown) => (cause ??= err);
  client.on('error', noteCause);
  try {
    await client.connect();
  } catch (err) {
    // ioredis keeps reconnecting; requests are served from memory meanwhile.
    unreachable = cause ?? err;
  } finally {
    client.off('error', noteCause);
  }
  started = true;
  if (refusedAtStart !== null) {
    await limiter.close();
    throw new RedisDatabaseError(refusedAtStart);
  }
  // Known before the first request (connected, the limiter asked at 'ready'; this waits for that answer).
  if (unreachable === null) await shared.readClock().catch(() => {});
  if (unreachable !== null) limiter.unreachableAtStart(unreachable);
  limiter.watchConnection();
  return limiter;
}

/**
 * What the Redis of REDIS_URL refuses that no waiting mends: a configuration to correct, which stops the start rather
 * than leave the instance limiting alone in memory (`refused` is told; the caller drops the connection).
 * - **Its database.** ioredis selects the URL's database as each connection opens, and when the server refuses (no
 *   such database, an ACL without SELECT) it only emits the error and goes on in database 0 (review: `/99` on a Redis
 *   of 16 databases shared the limit in database 0, ready and silent). That error comes before the connection is
 *   ready, so it is dropped before any request reaches database 0. Database 0 is not selected (ioredis sends no
 *   SELECT for it), and a SELECT that fails otherwise (a timeout, the connection lost) is an outage.
 * - **Its credentials**: a password or user it refuses (`WRONGPASS`, an AUTH error), or none given where it wants
 *   one (`NOAUTH`, answered to whatever comes first). With database 0 this was an outage, the instance limiting in
 *   memory for good; with another, a refused SELECT (probe). ioredis itself only warns where a password is given
 *   to a Redis that wants none. The message never carries the command's arguments (AUTH's are the password).
 */
function watchRefusals(
  client: Redis,
  refused: (refusal: { of: 'database' | 'credentials'; message: string }) => void,
): void {
  client.on(
    'error',
    (err: { name?: unknown; message?: unknown; command?: { name?: unknown; args?: unknown[] } }) => {
      if (err?.name !== 'ReplyError') return;
      const reply = String(err.message);
      if (err.command?.name === 'auth' || /^(NOAUTH|WRONGPASS)\b/.test(reply)) {
        refused({ of: 'credentials', message: `Redis refused the credentials (${reply})` });
      } else if (err.command?.name === 'select') {
        refused({
          of: 'database',
          message: `Redis refused SELECT ${String(err.command.args?.[0])} (${reply})`,
        });
      }
    },
  );
}

/** The Redis of REDIS_URL answered, but refused its database or credentials: a configuration to mend, not an outage. */
export class RedisDatabaseError extends Error {}
