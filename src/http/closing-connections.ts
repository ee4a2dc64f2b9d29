import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * The connections of a closing listener that no request holds (DESIGN §6, SIGTERM). `server.close()` waits for every
 * connection to end, and Fastify's close ends only the keep-alive ones idle at that moment. A connection whose request
 * is still arriving is kept, so that a request completed meanwhile gets its retryable 503 (app.ts); but one that never
 * completes it (a load balancer's pre-opened connection, a client sending nothing, or a byte at a time) held every
 * shutdown to SVC_SHUTDOWN_TIMEOUT_MS and an exit 1: Node stops the request timeout's checks when the server closes
 * (probe). So once no request is being handled, the connections without one are closed.
 *
 * Ours, not a library's: Node's `closeIdleConnections` keeps a connection whose request has begun to arrive, and
 * `closeAllConnections` would cut the requests in flight.
 */
export function closingConnections(server: Server): { startClosing(): void } {
  /** Each open connection, with how many of its requests are being handled. */
  const requestsOf = new Map<Socket, number>();
  let handling = 0;
  let closing = false;

  // Ended rather than destroyed: the answer that just freed a connection may still be in its write buffer.
  const closeUnheld = () => {
    for (const [socket, requests] of requestsOf) if (requests === 0) socket.end(() => socket.destroy());
  };

  server.on('connection', (socket: Socket) => {
    requestsOf.set(socket, 0);
    socket.once('close', () => requestsOf.delete(socket));
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    requestsOf.set(socket, (requestsOf.get(socket) ?? 0) + 1);
    handling++;
    res.once('close', () => {
      handling--;
      if (requestsOf.has(socket)) requestsOf.set(socket, requestsOf.get(socket)! - 1);
      if (closing && handling === 0) closeUnheld();
    });
  });

  return {
    startClosing() {
      closing = true;
      if (handling === 0) closeUnheld();
    },
  };
}
