import type { DomainDeps } from './deps.ts';
import { createCustomerAccountsService } from './accounts/customer-accounts.service.ts';
import { createTenantsService } from './accounts/tenants.service.ts';
import { createBalancesService } from './balances/balances.service.ts';
import { createParticipantsService } from './participants/participants.service.ts';
import { createAuthenticator } from './platforms/authenticator.ts';
import { createNetworkRules } from './platforms/network-rules.ts';
import { createPlatformsService } from './platforms/platforms.service.ts';
import { createPricesService } from './prices/prices.service.ts';
import { createQuotesService } from './quotes/quotes.service.ts';
import { createTradesService } from './trades/trades.service.ts';
import { createFundingService } from './funding/funding.service.ts';
import { createWebhooksService } from './webhooks/webhooks.service.ts';

/** Every domain service, built once per process from the same dependencies. */
export function createServices(deps: DomainDeps) {
  return {
    platforms: createPlatformsService(deps),
    authenticator: createAuthenticator(deps),
    networkRules: createNetworkRules(deps),
    participants: createParticipantsService(deps),
    customerAccounts: createCustomerAccountsService(deps),
    tenants: createTenantsService(deps),
    balances: createBalancesService(deps),
    prices: createPricesService(deps),
    quotes: createQuotesService(deps),
    trades: createTradesService(deps),
    funding: createFundingService(deps),
    webhooks: createWebhooksService(deps),
  };
}

export type Services = ReturnType<typeof createServices>;
