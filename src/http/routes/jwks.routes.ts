import type { FastifyInstance } from 'fastify';
import { JWKS_PATH } from '../../contract/wire-values.ts';
import { openRouteErrorResponses } from '../../contract/responses.ts';
import { Jwks } from '../../contract/funding.schemas.ts';
import type { FundingService } from '../../domain/funding/funding.service.ts';

/**
 * GET /.well-known/jwks.json: the public keys that verify Account Funding SDK tokens (wire-contract §6).
 * Unauthenticated (wire-contract §1) but behind the firewall and the rate limit, like GET /time.
 */
export async function jwksRoutes(app: FastifyInstance, { funding }: { funding: FundingService }) {
  app.get(
    JWKS_PATH,
    {
      schema: {
        tags: ['Public'],
        operationId: 'getSigningKeys',
        summary: 'Public keys of the SDK token signer',
        security: [],
        response: { 200: Jwks, ...openRouteErrorResponses },
      },
    },
    async (_request, reply) => {
      // The key changes only with config (and a restart); verifiers may cache it for a while.
      reply.header('cache-control', 'public, max-age=300');
      return funding.jwks();
    },
  );
}
