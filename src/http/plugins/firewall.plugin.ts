import type { FastifyReply, FastifyRequest } from 'fastify';
import { FIREWALL_REFUSAL_TEXT } from '../../contract/wire-values.ts';
import type { NetworkRules } from '../../domain/platforms/network-rules.ts';
import type { RefusalLog } from '../refusal-log.ts';

/** wire-contract §2.1: an IP on no platform's allow-list is refused at the edge with the 1020 text. */
export function firewallHook(networkRules: NetworkRules, refusals: RefusalLog) {
  return async function firewallOnRequest(request: FastifyRequest, reply: FastifyReply) {
    if (await networkRules.firewallAllows(request.ip)) return;
    if (!refusals.atInfo('firewall', request.ip)) request.quietLog = true;
    return reply.code(403).type('text/plain; charset=utf-8').send(FIREWALL_REFUSAL_TEXT);
  };
}
