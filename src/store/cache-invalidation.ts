import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import pg from 'pg';
import type { Executor } from './database.ts';

/**
 * Cross-instance cache invalidation over PostgreSQL LISTEN/NOTIFY: a revoked key or a changed allow-list
 * must take effect on every instance (wire-contract §1). `publish` runs inside the writer's transaction,
 * so the notice goes out exactly when the change commits; writers also call `applyLocally` after commit
 * so their own instance does not wait for the round trip.
 */
export type CacheEvent =
  | { type: 'api_key_revoked'; api_key: string }
  | { type: 'platform_changed'; platform_code: string }
  | { type: 'all' };

const CHANNEL = 'svc_cache_invalidation';

export class CacheInvalidation {
  private readonly events = new EventEmitter();
  private client: pg.Client | null = null;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | null = null;

  constructor(private readonly databaseUrl: string | null) {
    this.events.setMaxListeners(50);
  }

  async publish(db: Executor, event: CacheEvent): Promise<void> {
    await sql`select pg_notify(${CHANNEL}, ${JSON.stringify(event)})`.execute(db);
  }

  applyLocally(event: CacheEvent): void {
    this.events.emit('event', event);
  }

  subscribe(handler: (event: CacheEvent) => void): void {
    this.events.on('event', handler);
  }

  async start(): Promise<void> {
    if (!this.databaseUrl || this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL || !msg.payload) return;
      try {
        this.applyLocally(JSON.parse(msg.payload) as CacheEvent);
      } catch {
        this.applyLocally({ type: 'all' });
      }
    });
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
      this.client = client;
      // Anything missed while disconnected is unknown: drop every cache.
      this.applyLocally({ type: 'all' });
    } catch {
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.stopped || this.reconnectTimer) return;
    if (this.client === client) this.client = null;
    client.end().catch(() => {});
    this.applyLocally({ type: 'all' });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.start();
    }, 1000);
    this.reconnectTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = null;
    if (client) await client.end().catch(() => {});
  }
}
