import type { FastifyInstance } from 'fastify';
import { JWKS_PATH } from '../../contract/wire-values.ts';
import { Error400, Error429, firewallResponses } from '../../contract/responses.ts';
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
        summary: 'Public keys of the SDK token signer',
        security: [],
        // 400: a target that cannot be read (a `#`, bad percent-encoding); 403: the firewall (wire-contract §2.1).
        response: { 200: Jwks, 400: Error400, ...firewallResponses, 429: Error429 },
      },
    },
    async (_request, reply) => {
      // The key changes only with config (and a restart); verifiers may cache it for a while.
      reply.header('cache-control', 'public, max-age=300');
      return funding.jwks();
    },
  );
}
