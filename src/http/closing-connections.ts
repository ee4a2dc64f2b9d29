import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * The connections of a closing listener that no request holds (DESIGN §6, SIGTERM). `server.close()` waits for every
 * connection to end, and Fastify's close ends only the keep-alive ones idle at that moment. A connection whose request
 * is still arriving is kept while others are being answered, so that a request completed meanwhile gets its retryable
 * 503 (app.ts); but one that never completes it (a load balancer's pre-opened connection, a client sending nothing,
 * or a byte at a time, headers or body) held every shutdown to SVC_SHUTDOWN_TIMEOUT_MS and an exit 1: Node stops the
 * request timeout's checks when the server closes (probe). So once no request the server holds is unanswered (see
 * `holds`), the connections left are ended: a body still coming then (a slow upload, an `Expect: 100-continue`
 * body one round trip behind) is cut, its request not carried out.
 *
 * Ours, not a library's: Node's `closeIdleConnections` keeps a connection whose request has begun to arrive, and
 * `closeAllConnections` would cut the requests being answered.
 */
export function closingConnections(server: Server): { startClosing(): void } {
  /** Each open connection, with its requests not yet answered (a pipelining client's may be several). */
  const requestsOf = new Map<Socket, Set<IncomingMessage>>();
  let closing = false;

  /**
   * An unanswered request holds its connection, and the closing, unless it is waiting on its client: its body is being
   * read (flowing) and has not all come. One the server has not begun to read (its hooks still at work: the firewall's
   * reload, the rate limit's Redis) holds even with its body unread, which Node stops taking off the socket past
   * its buffer (review: a whole 200 KB request was cut unanswered when only arrived requests held).
   */
  const holds = (requests: Set<IncomingMessage>) =>
    [...requests].some((req) => req.complete || req.readableFlowing !== true);
  const closeUnheldOnceFree = () => {
    if (!closing) return;
    for (const requests of requestsOf.values()) if (holds(requests)) return;
    // Ended rather than destroyed: an answer that just freed a connection may still be in its write buffer.
    for (const socket of requestsOf.keys()) socket.end(() => socket.destroy());
  };

  server.on('connection', (socket: Socket) => {
    requestsOf.set(socket, new Set());
    // A connection gone takes its requests with it, answered or not (a pipelined request's answer that never got
    // the socket has no 'close' of its own: counted so, it held every later shutdown, review).
    socket.once('close', () => {
      requestsOf.delete(socket);
      closeUnheldOnceFree();
    });
  });
  server.on('request', (req: IncomingMessage, res) => {
    const requests = requestsOf.get(req.socket);
    if (!requests) return;
    requests.add(req);
    res.once('close', () => {
      requests.delete(req);
      closeUnheldOnceFree();
    });
  });

  return {
    startClosing() {
      closing = true;
      closeUnheldOnceFree();
    },
  };
}
