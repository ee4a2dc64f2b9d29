import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebhookVerificationError, verifyWebhook } from '../sdk/webhook-verify.ts';

/**
 * `svc webhooks listen --port N --secret S` (issue 4 point 6): a local receiver for a platform developer.
 * Every POST is verified with the SDK's `verifyWebhook` (signature in constant time, timestamp within the
 * tolerance) and printed; a verified delivery is answered 204, a refused one 400 with the reason, so the
 * service retries it as it would for a real receiver. Deliveries are at least once: a repeated
 * notification id is printed with `duplicate`.
 *
 * Output: one line per event on stdout (`--json`: one JSON object per line), refusals (`--json`: JSON lines
 * too) and the listening address on stderr, so stdout can be piped.
 */
export interface ListenOptions {
  port: number;
  host?: string;
  secret: string;
  /** JSON lines instead of the readable form. */
  json?: boolean;
  toleranceMs?: number;
  out?: (line: string) => void;
  err?: (line: string) => void;
}

/** Largest body accepted (the service's own request limit). */
const MAX_BODY_BYTES = 1024 * 1024;
/** Ids remembered for duplicate detection. */
const MAX_REMEMBERED = 100_000;

export async function startWebhookListener(
  options: ListenOptions,
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const out = options.out ?? ((line: string) => process.stdout.write(line + '\n'));
  const err = options.err ?? ((line: string) => process.stderr.write(line + '\n'));
  const seen = new Set<string>();
  /** Prints a refusal on stderr (under --json as a JSON line: scripts read both streams). */
  const refused = (reason: string, message: string, header?: string) =>
    err(
      options.json
        ? JSON.stringify({ refused: reason, header: header ?? null, message })
        : `refused: ${reason}${header ? ` (${header})` : ''}: ${message}`,
    );

  const server = createServer((req, res) => {
    // Every refusal is printed, these two as well (probe: a 405 and a 413 were answered and never shown).
    if (req.method !== 'POST') {
      refused('method_not_allowed', `${req.method} ${req.url}: deliveries are POSTs (answered 405)`);
      res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' }).end('{"error":"POST only"}');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        refused('body_too_large', `a body over ${MAX_BODY_BYTES} bytes (answered 413)`);
        res.writeHead(413, { 'content-type': 'application/json' }).end('{"error":"body too large"}');
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (res.headersSent) return;
      const rawBody = Buffer.concat(chunks);
      try {
        const event = verifyWebhook(rawBody, req.headers, options.secret, {
          toleranceMs: options.toleranceMs,
        });
        const duplicate = seen.has(event.notificationId);
        if (!duplicate) {
          // The oldest forgotten first: emptied whole, a redelivery just after the clear was not told a duplicate.
          if (seen.size >= MAX_REMEMBERED) seen.delete(seen.values().next().value!);
          seen.add(event.notificationId);
        }
        if (options.json) {
          out(
            JSON.stringify({
              notification_id: event.notificationId,
              payload_type: event.payloadType,
              timestamp: event.timestamp,
              duplicate,
              payload: event.payload,
            }),
          );
        } else {
          out(
            `${new Date(event.timestamp).toISOString()} ${event.payloadType} ${event.notificationId}` +
              `${duplicate ? ' (duplicate)' : ''}\n${JSON.stringify(event.payload, null, 2)}`,
          );
        }
        res.writeHead(204).end();
      } catch (error) {
        if (!(error instanceof WebhookVerificationError)) {
          err(`error: ${(error as Error).message}`);
          res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"Internal Server Error"}');
          return;
        }
        refused(error.reason, error.message, error.header);
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: error.reason }));
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}/`;
  err(`svc webhooks listen: receiving on ${url} (verifying signatures; Ctrl-C to stop)`);
  return {
    url,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
