import pg from 'pg';

export interface ChannelHandlers {
  onMessage(payload: string): void;
  /** After every (re)connection: notifications sent while disconnected are lost. */
  onConnected?(): void;
}

/**
 * LISTEN on PostgreSQL channels on one connection of its own per process, reconnecting after a second
 * when the connection drops. Notifications sent while it was down are lost, so each channel's
 * `onConnected` runs after every (re)connection: its owner then assumes it missed something (drops its
 * caches, looks for work). pg's Client already does LISTEN; what it lacks, and this adds, is staying
 * subscribed across reconnects, and several owners (cache invalidation, the webhook dispatcher) sharing
 * one connection rather than holding one each.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private readonly channels = new Map<string, ChannelHandlers>();

  constructor(private readonly databaseUrl: string) {}

  /** Listens on `channel` from now on (at once if connected, else from the next connection). */
  async listen(channel: string, handlers: ChannelHandlers): Promise<void> {
    if (this.channels.has(channel)) throw new Error(`already listening on ${channel}`);
    this.channels.set(channel, handlers);
    const client = this.client;
    if (!client) return;
    try {
      await client.query(`listen ${pg.escapeIdentifier(channel)}`);
      handlers.onConnected?.();
    } catch {
      this.reconnect(client);
    }
  }

  /** Stops listening on `channel`; the connection stays for the others. */
  async unlisten(channel: string): Promise<void> {
    if (!this.channels.delete(channel)) return;
    await this.client?.query(`unlisten ${pg.escapeIdentifier(channel)}`).catch(() => {});
  }

  async start(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => this.channels.get(msg.channel)?.onMessage(msg.payload ?? ''));
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      for (const channel of this.channels.keys())
        await client.query(`listen ${pg.escapeIdentifier(channel)}`);
      this.client = client;
      for (const handlers of this.channels.values()) handlers.onConnected?.();
    } catch {
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.stopped || this.reconnectTimer) return;
    if (this.client === client) this.client = null;
    client.end().catch(() => {});
    for (const handlers of this.channels.values()) handlers.onConnected?.();
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
