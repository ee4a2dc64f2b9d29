import { lookup } from 'node:dns/promises';
import { createServer, type Server } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** The addresses a host name stands for (`dns.lookup` with `all`, as Fastify and Node's own listen use). */
export type LookupAll = (host: string) => Promise<string[]>;

const lookupAll: LookupAll = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

/** Errors of an address this machine does not have (IPv6 turned off): Fastify skips it too. */
const ABSENT_ADDRESS = new Set(['EADDRNOTAVAIL', 'EAFNOSUPPORT']);

/**
 * `app.listen` on `at`, the app's one server taking the connections of every address `localhost` stands for. Fastify
 * binds "localhost"'s other addresses (::1 beside 127.0.0.1) with servers of its own, made with Node's defaults: on
 * them, what app.ts sets on `app.server` was missing (our answer to a malformed request, a firewall's 1020 to it,
 * `Expect` served as any request, the connections closed at shutdown). Here the others are TCP listeners that hand each
 * connection to `app.server`, which Node documents for its 'connection' event. They stop listening when the app begins
 * to close (preClose), and the app's close waits for their connections as for its own (Node's server counts only
 * those it accepted itself: review, requests in flight there were cut at shutdown, under Fastify's too). Each address
 * is logged as Fastify logs its own. Any other host is Fastify's (a name stands for its first address, as in Node).
 * Resolves with the app's URL.
 */
export async function listenOn(
  app: FastifyInstance,
  at: { host: string; port: number },
  lookupAddresses: LookupAll = lookupAll,
): Promise<string> {
  if (at.host !== 'localhost') return app.listen({ host: at.host, port: at.port });
  const [first, ...others] = [...new Set(await lookupAddresses(at.host))];
  const extra: Server[] = [];
  const closed: Promise<void>[] = [];
  app.addHook('preClose', async () => {
    for (const server of extra) closed.push(new Promise((resolve) => server.close(() => resolve())));
  });
  app.addHook('onClose', async () => {
    await Promise.all(closed);
  });
  const url = await app.listen({ host: first ?? at.host, port: at.port });
  const { port } = app.server.address() as { port: number };
  for (const host of others) {
    // The net options Node's HTTP server gives its own listener (no Nagle delay: review, 40 ms on a response
    // written in two parts).
    const server = createServer({ noDelay: true, allowHalfOpen: true }, (socket) =>
      app.server.emit('connection', socket),
    );
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host, port }, () => {
          server.off('error', reject);
          resolve();
        });
      });
      extra.push(server);
      app.log.info(`Server listening at http://${host.includes(':') ? `[${host}]` : host}:${port}`);
    } catch (err) {
      // Those already listening stop with the app, which the caller closes.
      if (!ABSENT_ADDRESS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      app.log.warn({ address: host, err }, `not listening on ${host}, an address of localhost`);
    }
  }
  return url;
}
