import type { IssuedApiKey, Participant, Platform } from '../contract/admin.schemas.ts';
import type { CustomerAccountDetails } from '../contract/accounts.schemas.ts';
import type { AdminClient } from './admin-client.ts';

/**
 * `svc demo`: a ready-to-call setup on a running server: a platform (open allow-list in cert, else
 * loopback), an API key, two participants (a primary holder and a future tenant), a customer account and
 * prices. Later capabilities extend it.
 */
export async function runDemo(client: AdminClient, options: { env: 'cert' | 'prod' }) {
  const suffix = Date.now().toString(36);
  const platform = await client.post<Platform>('/platforms', {
    name: `Demo platform ${suffix}`,
    ip_allowlist: options.env === 'cert' ? [] : ['127.0.0.1/32', '::1/128'],
  });
  const key = await client.post<IssuedApiKey>(`/platforms/${platform.platform_code}/api_keys`);
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
  return {
    base_url: client.baseUrl,
    platform_code: platform.platform_code,
    api_key: key.api_key,
    api_secret: key.api_secret,
    passphrase: key.passphrase,
    participants: { primary_holder: holder.participant_code, tenant_candidate: tenant.participant_code },
    customer_account: account.zrn,
    prices,
  };
}
