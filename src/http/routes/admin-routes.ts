import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../app.ts';
import { Error413, NoQuery } from '../../contract/responses.ts';
import { adminDepositsRoutes } from './admin-deposits.routes.ts';
import { adminLedgerRoutes } from './admin-ledger.routes.ts';
import { adminParticipantsRoutes } from './admin-participants.routes.ts';
import { adminPlatformsRoutes } from './admin-platforms.routes.ts';
import { adminRateLimitsRoutes } from './admin-rate-limits.routes.ts';
import { adminTradesRoutes } from './admin-trades.routes.ts';
import { adminWebhooksRoutes } from './admin-webhooks.routes.ts';

/** Every operator route module, registered under /admin behind the bearer token. Add an area's routes here. */
export async function adminRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { services } = deps;
  // A route that takes no query parameter refuses one by name, as the routes that take some refuse the others:
  // `GET /admin/platforms?page=2` listed every platform, as if paged (review).
  app.addHook('onRoute', (route) => {
    if (route.schema?.querystring === undefined) route.schema = { ...route.schema, querystring: NoQuery };
    // A route that reads a body refuses one over the limit (1 MiB) whole: documented as each says what it answers.
    const methods = [route.method].flat();
    if (methods.some((method) => method !== 'GET' && method !== 'HEAD') && route.schema.response) {
      route.schema = { ...route.schema, response: { ...(route.schema.response as object), 413: Error413 } };
    }
  });
  await app.register(adminPlatformsRoutes, { platforms: services.platforms });
  await app.register(adminParticipantsRoutes, {
    participants: services.participants,
    customerAccounts: services.customerAccounts,
  });
  await app.register(adminLedgerRoutes, { prices: services.prices, balances: services.balances });
  await app.register(adminTradesRoutes, { trades: services.trades });
  await app.register(adminDepositsRoutes, { funding: services.funding });
  if (deps.rateLimiter) await app.register(adminRateLimitsRoutes, { limiter: deps.rateLimiter });
  await app.register(adminWebhooksRoutes, { webhooks: services.webhooks });
}
