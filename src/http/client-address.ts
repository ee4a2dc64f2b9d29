import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { isIP, isIPv4, isIPv6 } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';

/** Which peers are trusted proxies (wire-contract §2.4), compiled by proxy-addr. */
export type ProxyTrust = ReturnType<typeof proxyAddr.compile>;

const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED_IPV6 = /^\[([^\]]+)\](?::\d{1,5})?$/;

/**
 * An X-Forwarded-For entry without the port some proxies write with it (Azure Application Gateway:
 * `203.0.113.9:51234`, `[2001:db8::1]:443`). proxy-addr, Fastify's, takes the entry as written, so every
 * connection of one client was a client of its own: a rate limit per connection, not per IP, and a 1020 for a
 * client on an allow-list (review). Our own code: proxy-addr has no option for it. Anything else is as given.
 */
function withoutPort(address: string): string {
  const v4 = IPV4_WITH_PORT.exec(address);
  if (v4 && isIPv4(v4[1]!)) return v4[1]!;
  const v6 = BRACKETED_IPV6.exec(address);
  if (v6 && isIPv6(v6[1]!)) return v6[1]!;
  return address;
}

/**
 * The client's address (wire-contract §2.4): the socket peer, or, when that is a trusted proxy, the right-most
 * X-Forwarded-For entry that is not one, without a port. Each entry is judged without its port too: judged as
 * written, a trusted hop with one (`client, 10.2.2.2:443`, a gateway behind a CDN) could not be parsed, so was
 * taken for the client, and every client was that proxy (review).
 */
function forwardedClientAddress(request: IncomingMessage, trust: ProxyTrust): string {
  const client = withoutPort(proxyAddr(request, (address, hop) => trust(withoutPort(address), hop)));
  // An entry that is no address ("unknown", as some proxies write when they do not know, or garbage) says nothing
  // of the client: the peer is the source, as when the proxy sends no X-Forwarded-For. Taken as written, it was a
  // client of its own, shared by everyone behind such a proxy, whose block the operator could not lift (review).
  return isIP(client) === 0 ? (request.socket.remoteAddress ?? client) : client;
}

/**
 * Sets `request.ip` to the client's address, found once: every hook that reads it (firewall, rate limit,
 * allow-list, log) gets it without its port, and Fastify's getter does not run proxy-addr again at each read.
 */
export function setClientAddress(request: FastifyRequest, trust: ProxyTrust): void {
  Object.defineProperty(request, 'ip', { value: forwardedClientAddress(request.raw, trust) });
}
