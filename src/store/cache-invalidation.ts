import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import type { Executor } from './database.ts';
import { PgListener } from './pg-listener.ts';

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

  /** `listener`: the process's LISTEN connection (null: this instance hears only its own changes). */
  constructor(private readonly listener: PgListener | null) {
    this.events.setMaxListeners(50);
  }

  async publish(db: Executor, event: CacheEvent): Promise<void> {
    await sql`select pg_notify(${CHANNEL}, ${JSON.stringify(event)})`.execute(db);
  }

  applyLocally(event: CacheEvent): void {
    this.events.emit('event', event);
  }

  /**
   * Whether another instance's change would reach this one now (PgListener.hearing; always, without a
   * listener: a single process hears its own). While false, a cache checks the database before trusting
   * what it holds: a revocation published meanwhile is lost to this instance.
   */
  hearing(): boolean {
    return this.listener?.hearing() ?? true;
  }

  subscribe(handler: (event: CacheEvent) => void): void {
    this.events.on('event', handler);
  }

  async start(): Promise<void> {
    await this.listener?.listen(CHANNEL, {
      onMessage: (payload) => {
        try {
          this.applyLocally(JSON.parse(payload) as CacheEvent);
        } catch {
          this.applyLocally({ type: 'all' });
        }
      },
      // Anything missed while disconnected is unknown: drop every cache.
      onConnected: () => this.applyLocally({ type: 'all' }),
    });
  }

  async stop(): Promise<void> {
    await this.listener?.unlisten(CHANNEL);
  }
}
