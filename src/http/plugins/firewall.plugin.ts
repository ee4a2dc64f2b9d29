import type { FastifyReply, FastifyRequest } from 'fastify';
import { FIREWALL_REFUSAL_TEXT } from '../../contract/wire-values.ts';
import type { NetworkRules } from '../../domain/platforms/network-rules.ts';

/** wire-contract §2.1: an IP on no platform's allow-list is refused at the edge with the 1020 text. */
export function firewallHook(networkRules: NetworkRules) {
  return async function firewallOnRequest(request: FastifyRequest, reply: FastifyReply) {
    if (await networkRules.firewallAllows(request.ip)) return;
    return reply.code(403).type('text/plain; charset=utf-8').send(FIREWALL_REFUSAL_TEXT);
  };
}
