import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { recordAnyNotification, type PayloadType } from '../../src/domain/webhooks/outbox.ts';
import type { Db } from '../../src/store/database.ts';

/**
 * A local webhook receiver for tests (issue 4): records every request it gets and answers what the test's
 * handler says: a status, a redirect, a hang (no answer until closed) or a connection reset.
 */
export interface ReceivedDelivery {
  /** Epoch ms when the request was complete. */
  at: number;
  headers: IncomingHttpHeaders;
  rawBody: string;
  notificationId: string;
  payloadType: string;
  path: string;
}

export type ReceiverAction =
  | number
  | { status: number; headers?: Record<string, string>; body?: string; delayMs?: number }
  | 'hang'
  | 'reset';

export type ReceiverHandler = (delivery: ReceivedDelivery) => ReceiverAction | Promise<ReceiverAction>;

/** An answer a receiver's handler returns and the test gives when it chooses (`release`), holding the delivery. */
export function heldAnswer(): { answer: Promise<ReceiverAction>; release(action?: ReceiverAction): void } {
  let release!: (action: ReceiverAction) => void;
  const answer = new Promise<ReceiverAction>((resolve) => (release = resolve));
  return { answer, release: (action = 200) => release(action) };
}

export interface TestReceiver {
  url: string;
  deliveries: ReceivedDelivery[];
  setHandler(handler: ReceiverHandler): void;
  /** Requests whose handling has started but not ended (for overlap checks). */
  inFlight: Map<string, number>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(handler: ReceiverHandler = () => 200): Promise<TestReceiver> {
  let current = handler;
  const deliveries: ReceivedDelivery[] = [];
  const inFlight = new Map<string, number>();
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const header = (name: string) => String(req.headers[name] ?? '');
      const delivery: ReceivedDelivery = {
        at: Date.now(),
        headers: req.headers,
        rawBody: Buffer.concat(chunks).toString('utf8'),
        notificationId: header('x-svc-hook-notification-id'),
        payloadType: header('x-svc-hook-payload-type'),
        path: req.url ?? '/',
      };
      deliveries.push(delivery);
      inFlight.set(delivery.notificationId, (inFlight.get(delivery.notificationId) ?? 0) + 1);
      const done = () =>
        inFlight.set(delivery.notificationId, (inFlight.get(delivery.notificationId) ?? 1) - 1);
      let action: ReceiverAction;
      try {
        action = await current(delivery);
      } catch {
        action = 500;
      }
      if (action === 'hang') {
        hanging.add(res);
        res.on('close', done);
        return;
      }
      if (action === 'reset') {
        done();
        req.socket.destroy();
        return;
      }
      const spec = typeof action === 'number' ? { status: action } : action;
      if (spec.delayMs) await new Promise((r) => setTimeout(r, spec.delayMs));
      done();
      res.writeHead(spec.status, { 'content-type': 'text/plain', ...spec.headers });
      res.end(spec.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    deliveries,
    inFlight,
    setHandler(next) {
      current = next;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Polls `check` until it returns a truthy value or the deadline passes (no fixed sleeps in tests). */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 15_000,
  everyMs = 25,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Records one notification in its own committed transaction; returns its id. */
export function record(
  db: Db,
  platformCode: string,
  resourceKey: string,
  payload: object = { n: 1 },
  payloadType: PayloadType = 'trade_status_changed',
): Promise<string> {
  return db
    .transaction()
    .execute((trx) => recordAnyNotification(trx, { platformCode, payloadType, resourceKey, payload }));
}

/**
 * Records notifications of one resource, payloads `{ event }`, in one committed transaction, so that one claim takes
 * them all; returns their ids.
 */
export function recordEvents(
  db: Db,
  platformCode: string,
  resourceKey: string,
  events: number[],
): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    const ids: string[] = [];
    for (const event of events)
      ids.push(
        await recordAnyNotification(trx, {
          platformCode,
          payloadType: 'trade_status_changed',
          resourceKey,
          payload: { event },
        }),
      );
    return ids;
  });
}

/** The `event` of a delivery recorded by recordEvents. */
export const eventOf = (delivery: ReceivedDelivery) =>
  (JSON.parse(delivery.rawBody) as { event?: number }).event;

/** A notification's delivery state straight from the database. */
export async function notificationState(db: Db, notificationId: string) {
  const result = await sql<{
    status: string;
    status_reason: string | null;
    attempt_count: number;
    round_attempts: number;
  }>`select status, status_reason, attempt_count, round_attempts from webhook_notifications
     where notification_id = ${notificationId}::uuid`.execute(db);
  return result.rows[0];
}
