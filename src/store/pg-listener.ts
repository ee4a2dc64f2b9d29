import pg from 'pg';
import { createFailureLog, type FailureLog } from '../lib/failure-log.ts';
import type { Log } from '../lib/log.ts';
import { within } from '../lib/within.ts';
// TCP keepalive (the store's setting) lets the kernel notice a vanished peer too, between heartbeats.
import { KEEPALIVE_IDLE_MS } from './database.ts';

export interface ChannelHandlers {
  onMessage(payload: string): void;
  /** After every (re)connection: notifications sent while disconnected are lost. */
  onConnected?(): void;
  /**
   * Once the connection is listening again after it was lost (not at the first connection, nor at each
   * failed attempt in between): what was read while the notifications were missed may be out of date.
   */
  onReconnected?(): void;
}

export interface PgListenerOptions {
  /**
   * Told when the connection is lost (once, then every 30 s while it stays down) and when it listens again: while
   * it is down, caches are checked against the database and webhook wake-ups wait for the poll, which nothing else
   * showed (review).
   */
  logger?: Log;
  /** How often the connection is checked with a `select 1`. */
  heartbeatIntervalMs?: number;
  /**
   * A heartbeat, LISTEN or UNLISTEN not answered within this, or a connection not established within it,
   * counts as a lost connection.
   */
  heartbeatTimeoutMs?: number;
}

/**
 * The defaults replace a connection that went silent within 6 s, and stop counting it as heard from (see
 * `hearing`) within 2 s. A heartbeat is one trivial statement a second per process; a server too loaded to
 * answer `select 1` within 5 s costs at worst a needless reconnection (its owners drop their caches and look
 * for work), one slower than a second only a few seconds of `hearing()` false.
 */
const DEFAULT_HEARTBEAT_INTERVAL_MS = 1_000;
const DEFAULT_HEARTBEAT_TIMEOUT_MS = 5_000;
const RECONNECT_DELAY_MS = 1_000;
/** How late past the heartbeat interval the last answer may be while the connection still counts as heard. */
const HEARING_GRACE_MS = 1_000;

/**
 * LISTEN on PostgreSQL channels on one connection of its own per process, reconnecting after a second
 * when the connection drops. Notifications sent while it was down are lost, so each channel's
 * `onConnected` runs after every (re)connection: its owner then assumes it missed something (drops its
 * caches, looks for work). pg's Client already does LISTEN; what it lacks, and this adds, is staying
 * subscribed across reconnects, and several owners (cache invalidation, the webhook dispatcher) sharing
 * one connection rather than holding one each.
 *
 * A connection can also go silent without closing (a network partition, a failover that leaves it
 * half-open, a hung host): pg then reports nothing, and notifications (an API key revocation, a webhook
 * wake-up) would be lost until the process restarts. So the connection is checked with a heartbeat, and one
 * whose heartbeat goes unanswered is dropped and replaced like a closed one.
 */
export class PgListener {
  /** The connection, once it listens on every channel. */
  private client: pg.Client | null = null;
  /** The connection being established. */
  private connecting: pg.Client | null = null;
  private stopped = false;
  /** A connection has listened before: the next one to succeed is a reconnection. */
  private listenedBefore = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  /** When the connection in use last answered (its LISTENs, then each heartbeat), by performance.now(). */
  private answeredAt = 0;
  private readonly channels = new Map<string, ChannelHandlers>();
  private readonly heartbeatIntervalMs: number;
  private readonly heartbeatTimeoutMs: number;
  private readonly outage: FailureLog | null;

  constructor(
    private readonly databaseUrl: string,
    options: PgListenerOptions = {},
  ) {
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
    this.outage = options.logger
      ? createFailureLog(
          options.logger,
          {
            failed:
              'LISTEN connection lost or not made (notifications unheard meanwhile: caches are checked against the database, webhook workers poll); trying again every second',
            stillFailing: 'LISTEN connection still down',
            recovered: 'LISTEN connection listening again',
          },
          // Worked around (the caches and the poll): not an error of the process.
          { level: 'warn' },
        )
      : null;
  }

  /**
   * Whether notifications can be trusted to arrive now: a connection listens and has answered within the
   * heartbeat interval (plus a second). False while disconnected, reconnecting, before the first connection,
   * and once a heartbeat is late: a connection gone silent is not yet replaced (that waits for the heartbeat
   * timeout), but what it would have carried may already be lost. Owners of caches check the database
   * instead while it is false.
   */
  hearing(): boolean {
    return (
      this.client !== null &&
      performance.now() - this.answeredAt <= this.heartbeatIntervalMs + HEARING_GRACE_MS
    );
  }

  /** Listens on `channel` from now on (at once if connected, else from the next connection). */
  async listen(channel: string, handlers: ChannelHandlers): Promise<void> {
    if (this.channels.has(channel)) throw new Error(`already listening on ${channel}`);
    this.channels.set(channel, handlers);
    const client = this.client;
    if (!client) return;
    try {
      await this.answered(client, `listen ${pg.escapeIdentifier(channel)}`);
      handlers.onConnected?.();
    } catch (err) {
      this.reconnect(client, err);
    }
  }

  /** Stops listening on `channel`; the connection stays for the others. */
  async unlisten(channel: string): Promise<void> {
    if (!this.channels.delete(channel)) return;
    const client = this.client;
    if (!client) return;
    await this.answered(client, `unlisten ${pg.escapeIdentifier(channel)}`).catch((err: unknown) =>
      this.reconnect(client, err),
    );
  }

  async start(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({
      connectionString: this.databaseUrl,
      // Names the connection in pg_stat_activity.
      application_name: 'svc-platform listener',
      connectionTimeoutMillis: this.heartbeatTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    });
    this.connecting = client;
    client.on('notification', (msg) => this.channels.get(msg.channel)?.onMessage(msg.payload ?? ''));
    client.on('error', (err) => this.reconnect(client, err));
    client.on('end', () => this.reconnect(client, new Error('the connection ended')));
    try {
      await client.connect();
      for (const channel of this.channels.keys())
        await this.answered(client, `listen ${pg.escapeIdentifier(channel)}`);
      if (this.connecting !== client) return; // stopped meanwhile
      this.connecting = null;
      this.client = client;
      this.answeredAt = performance.now();
      const reconnected = this.listenedBefore;
      this.listenedBefore = true;
      for (const handlers of this.channels.values()) {
        handlers.onConnected?.();
        if (reconnected) handlers.onReconnected?.();
      }
      this.scheduleHeartbeat(client);
      this.outage?.succeeded();
    } catch (err) {
      this.reconnect(client, err);
    }
  }

  /** Runs `statement` on `client`; rejects when it fails or gets no answer within the heartbeat timeout. */
  private async answered(client: pg.Client, statement: string): Promise<void> {
    await within(client.query(statement), this.heartbeatTimeoutMs);
  }

  private scheduleHeartbeat(client: pg.Client): void {
    this.heartbeatTimer = setTimeout(() => {
      this.heartbeatTimer = null;
      if (this.client !== client) return;
      this.answered(client, 'select 1').then(
        () => {
          if (this.client !== client) return;
          this.answeredAt = performance.now();
          if (!this.heartbeatTimer) this.scheduleHeartbeat(client);
        },
        (err: unknown) => this.reconnect(client, err),
      );
    }, this.heartbeatIntervalMs);
    this.heartbeatTimer.unref();
  }

  /** Drops `client`, if it is still the one in use or being established, and connects again after a delay. */
  private reconnect(client: pg.Client, err: unknown = new Error('no answer in time')): void {
    // A connection already dropped reports its end later; and stop() ends the connection itself.
    if (this.stopped || (client !== this.client && client !== this.connecting)) return;
    this.outage?.failed(err);
    this.client = null;
    this.connecting = null;
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    this.heartbeatTimer = null;
    void this.end(client);
    for (const handlers of this.channels.values()) handlers.onConnected?.();
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.start();
    }, RECONNECT_DELAY_MS);
    this.reconnectTimer.unref();
  }

  /**
   * Ends `client`. A graceful end waits for the server to close its side, which a silent server never does:
   * after the heartbeat timeout the socket is closed regardless.
   */
  private async end(client: pg.Client): Promise<void> {
    const cut = setTimeout(() => client.connection.stream.destroy(), this.heartbeatTimeoutMs);
    try {
      await client.end();
    } catch {
      // Already failed: nothing left to end.
    } finally {
      clearTimeout(cut);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    const clients = [this.client, this.connecting];
    this.client = null;
    this.connecting = null;
    for (const client of clients) if (client) await this.end(client);
  }
}
