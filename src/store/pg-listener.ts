import pg from 'pg';

/**
 * LISTEN on one PostgreSQL channel on a connection of its own, reconnecting after a second when the
 * connection drops. Notifications sent while it was down are lost, so `onConnected` runs after every
 * (re)connection: the listener's owner then assumes it missed something (drops its caches, looks for work).
 * pg's Client already does LISTEN; what it lacks, and this adds, is staying subscribed across reconnects.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly channel: string,
    private readonly handlers: { onMessage(payload: string): void; onConnected?(): void },
  ) {}

  async start(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => {
      if (msg.channel === this.channel) this.handlers.onMessage(msg.payload ?? '');
    });
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${pg.escapeIdentifier(this.channel)}`);
      this.client = client;
      this.handlers.onConnected?.();
    } catch {
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.stopped || this.reconnectTimer) return;
    if (this.client === client) this.client = null;
    client.end().catch(() => {});
    this.handlers.onConnected?.();
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
