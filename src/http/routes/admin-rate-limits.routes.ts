import type { FastifyInstance } from 'fastify';
import { NoFieldsBody } from '../../contract/responses.ts';
import { RateLimitIpParams, RateLimitStateResponse } from '../../contract/rate-limits.schemas.ts';
import type { RateLimiter } from '../../domain/ratelimit/rate-limiter.ts';
import { adminErrorResponses } from './admin-errors.ts';
import { bareBodyAsEmpty } from './optional-body.ts';

/** Operator API for the per-IP rate limit (DESIGN §3): see an IP's count and block, lift a block. */
export async function adminRateLimitsRoutes(app: FastifyInstance, { limiter }: { limiter: RateLimiter }) {
  const tags = ['Operator: rate limits'];

  app.get<{ Params: RateLimitIpParams }>(
    '/rate_limits/:ip',
    {
      schema: {
        tags,
        operationId: 'adminGetRateLimit',
        summary: "An IP's accepted requests in the current window and its block, if any",
        params: RateLimitIpParams,
        response: { 200: RateLimitStateResponse, ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await limiter.inspect(request.params.ip) }),
  );

  app.delete<{ Params: RateLimitIpParams }>(
    '/rate_limits/:ip',
    {
      schema: {
        tags,
        operationId: 'adminUnblockIp',
        summary:
          'Lift the block of an IP on every instance and clear its count; returns the state afterwards',
        params: RateLimitIpParams,
        // A body's fields are refused by name, as on every action (probe: ignored).
        body: NoFieldsBody,
        response: { 200: RateLimitStateResponse, ...adminErrorResponses },
      },
      preValidation: bareBodyAsEmpty,
    },
    async (request) => ({ message: await limiter.unblock(request.params.ip) }),
  );
}
