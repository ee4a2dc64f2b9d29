import type { FastifyInstance } from 'fastify';
import type { NetworkRules } from '../../domain/platforms/network-rules.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';

/** wire-contract §2.1: an IP on no platform's allow-list is refused at the edge with the 1020 text. */
async function firewall(app: FastifyInstance, options: { networkRules: NetworkRules }): Promise<void> {
  app.addHook('onRequest', async (request, reply) => {
    if (await options.networkRules.firewallAllows(request.ip)) return;
    return reply.code(403).type('text/plain; charset=utf-8').send('error code: 1020');
  });
}

export const firewallPlugin = appliesToRegisteringScope('firewall', firewall);
