import type { IssuedApiKey, Participant, Platform } from '../contract/admin.schemas.ts';
import type { CustomerAccountDetails } from '../contract/accounts.schemas.ts';
import { AdminApiError, type AdminClient } from './admin-client.ts';
import { createClient } from '../sdk/platform.ts';

export interface DemoOptions {
  /**
   * Where the public API is: the platform calls go there, and the output points there. It differs from the
   * operator client's URL when the operator API has its own listener (SVC_ADMIN_LISTEN); undefined: the
   * same URL (one listener serves both).
   */
  publicUrl?: string;
  /** The SDK's per-attempt timeout for the platform calls (its default when undefined). */
  timeoutMs?: number;
}

/**
 * The demo's platform: with an open allow-list where the server takes one (cert), so that the demo can be
 * called from anywhere, else (a prod server refuses an empty list with a 400 naming it) loopback. The server's
 * answer decides, not the CLI's own SVC_ENV: run from a shell without it, the demo failed against prod.
 */
async function createDemoPlatform(client: AdminClient, name: string): Promise<Platform> {
  const create = (ip_allowlist: string[]) =>
    client.post<Platform>('/platforms', { name, ip_allowlist }, ['platform_code']);
  try {
    return await create([]);
  } catch (error) {
    if (!(error instanceof AdminApiError && error.status === 400 && namesAllowList(error.body))) throw error;
    return create(['127.0.0.1/32', '::1/128']);
  }
}

/** A 400's body whose `errors` name the allow-list. */
function namesAllowList(body: unknown): boolean {
  const errors = (body as { errors?: unknown } | null)?.errors;
  return Array.isArray(errors) && errors.some((e) => String(e).startsWith('ip_allowlist: '));
}

/**
 * `svc demo`: a ready-to-call setup on a running server: a platform (open allow-list in cert, else
 * loopback), an API key, two participants (a primary holder and a future tenant), a customer account and
 * prices. Later capabilities extend it.
 */
export async function runDemo(client: AdminClient, options: DemoOptions = {}) {
  const publicUrl = options.publicUrl ?? client.baseUrl;
  const suffix = Date.now().toString(36);
  // The fields the demo goes on with: an answer without them is another server's, said so (AdminClient.answer).
  const platform = await createDemoPlatform(client, `Demo platform ${suffix}`);
  const key = await client.post<IssuedApiKey>(`/platforms/${platform.platform_code}/api_keys`, {}, [
    'api_key',
    'api_secret',
    'passphrase',
  ]);
  const holder = await client.post<Participant>('/participants', {
    platform_code: platform.platform_code,
    email: `alice+${suffix}@example.com`,
    first_name: 'Alice',
    last_name: 'Holder',
  });
  const tenant = await client.post<Participant>('/participants', {
    platform_code: platform.platform_code,
    email: `bob+${suffix}@example.com`,
    first_name: 'Bob',
    last_name: 'Tenant',
  });
  const account = await client.post<CustomerAccountDetails>('/customer_accounts', {
    platform_code: platform.platform_code,
    participant_code: holder.participant_code,
    region: 'us',
    account_label: 'general',
  });
  const prices = await client.post('/prices', {
    pairs: { 'BTC/USD': '65000.00', 'ETH/USD': '3200.00', 'USDC/USD': '1.00' },
  });
  // Issue 7: USD for the holder's trades (balances move when a trade settles).
  const usd = await client.post<{ balance: string }>('/balances', {
    participant_code: holder.participant_code,
    account_label: 'general',
    asset: 'USD',
    amount: '100000',
  });
  // Issue 6: a fund quote for the holder, signed with the new key as a platform would: the deposit address
  // to show the customer. Best effort: the demo's other steps stand even if the public API does not answer.
  const platformClient = createClient({
    baseUrl: publicUrl,
    apiKey: key.api_key,
    apiSecret: key.api_secret,
    passphrase: key.passphrase,
    retry: false,
    timeoutMs: options.timeoutMs,
  });
  const fundQuote = await platformClient.funding
    .requestQuote({
      participant_code: holder.participant_code,
      fund_asset: 'USDC.ETH',
      client_fund_id: `demo-${suffix}`,
    })
    .then((quote) => ({
      ...quote,
      try_a_deposit: `npx svc deposits record ${quote.deposit_address} 100 --fund-asset USDC.ETH`,
    }))
    .catch((error: Error) => ({ error: `no fund quote: ${error.message}` }));
  return {
    base_url: publicUrl,
    admin_url: client.baseUrl,
    platform_code: platform.platform_code,
    api_key: key.api_key,
    api_secret: key.api_secret,
    passphrase: key.passphrase,
    participants: { primary_holder: holder.participant_code, tenant_candidate: tenant.participant_code },
    customer_account: account.zrn,
    prices,
    fund_quote: fundQuote,
    trading: {
      usd_balance: usd.balance,
      try_a_quote: `GET /liquidity/rfq?side=buy&underlying=BTC&quoted_currency=USD&quantity=0.01&participant_code=${holder.participant_code}`,
      then: 'POST /liquidity/execute {"quote_id":"<quote_id>"}, then GET /trades?client_trade_id=<quote_id>',
      with_the_cli: [
        `export SVC_URL=${publicUrl}${client.baseUrl === publicUrl ? '' : ` SVC_ADMIN_URL=${client.baseUrl}`} SVC_API_KEY=${key.api_key} SVC_API_SECRET=${key.api_secret} SVC_PASSPHRASE=${key.passphrase}`,
        `npx svc api quote --side buy --underlying BTC --quoted-currency USD --quantity 0.01 --participant ${holder.participant_code}`,
        'npx svc api execute <quote_id>',
      ],
    },
  };
}
