import type { FastifyInstance } from 'fastify';
import { Error400, Error429, firewallResponses } from '../../contract/responses.ts';
import type { Clock } from '../../lib/clock.ts';
import { TimeResponse } from '../../contract/time.schemas.ts';

/** GET /time: unauthenticated, vendor shape with epoch milliseconds (wire-contract §9). */
export async function timeRoutes(app: FastifyInstance, options: { clock: Clock }) {
  app.get(
    '/time',
    {
      schema: {
        tags: ['Public'],
        summary: 'Server time',
        security: [],
        // 400: a target that cannot be read (a `#`, bad percent-encoding); 403: the firewall (wire-contract §2.1).
        response: { 200: TimeResponse, 400: Error400, ...firewallResponses, 429: Error429 },
      },
    },
    async () => {
      const now = options.clock.now();
      return {
        message: { epoch: now, epoch_units: 'milliseconds' as const, iso_8601: new Date(now).toISOString() },
      };
    },
  );
}
