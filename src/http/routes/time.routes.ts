import type { FastifyInstance } from 'fastify';
import { openRouteErrorResponses } from '../../contract/responses.ts';
import type { Clock } from '../../lib/clock.ts';
import { TimeResponse } from '../../contract/time.schemas.ts';

/** GET /time: unauthenticated, vendor shape with epoch milliseconds (wire-contract §9). */
export async function timeRoutes(app: FastifyInstance, options: { clock: Clock }) {
  app.get(
    '/time',
    {
      schema: {
        tags: ['Public'],
        operationId: 'getTime',
        summary: 'Server time',
        security: [],
        response: { 200: TimeResponse, ...openRouteErrorResponses },
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
