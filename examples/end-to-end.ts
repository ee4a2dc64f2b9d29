/**
 * End to end with the SDK: onboard a customer, open a customer account and add a tenant, fund it with the
 * platform's own reference, quote and execute a trade, and receive (and verify) the webhooks of each step.
 * `test/e2e/sdk-end-to-end.test.ts` runs this file against a real service, and checks that the README
 * quotes the region between the `#region` markers word for word, so the README shows code that runs.
 *
 * Run it yourself against a cert service (`npm start`, then `npm run svc -- demo` for a key):
 *
 *     SVC_URL=http://127.0.0.1:8080 SVC_API_KEY=… SVC_API_SECRET=… SVC_PASSPHRASE=… \
 *     SVC_WEBHOOK_SECRET=whatever-you-like WEBHOOK_PORT=4000 node --import tsx examples/end-to-end.ts
 *
 * and have the operator point the platform's webhook at the receiver it starts:
 * `npx svc webhooks set PLATFORM http://127.0.0.1:4000/ --secret whatever-you-like`. When it prints the
 * deposit address, play the blockchain: `npx svc deposits record ADDRESS 100 --fund-asset USDC.ETH`.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createClient,
  verifyWebhook,
  WebhookVerificationError,
  type AccountBalanceChanged,
  type CustomerAccountDetails,
  type FundEvent,
  type PostCustomerBody,
  type SvcPlatform,
  type TradeStatusNotification,
  type VerifiedWebhook,
} from 'svc-platform/sdk';

/** A webhook receiver: verifies every delivery with `verifyWebhook` and keeps what it verified. */
export interface WebhookReceiver {
  url: string;
  /** Resolves with the first verified event (already received or still to come) that `match` accepts. */
  waitFor<T>(payloadType: string, match: (payload: T) => boolean, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(secret: string, port = 0): Promise<WebhookReceiver> {
  const events: VerifiedWebhook[] = [];
  const seen = new Set<string>();
  const waiters = new Set<() => void>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        // The raw bytes, before any JSON parsing: the signature covers them exactly.
        const event = verifyWebhook(Buffer.concat(chunks), req.headers, secret);
        // Delivery is at least once: the notification id is stable across retries, so de-duplicate on it.
        if (!seen.has(event.notificationId)) {
          seen.add(event.notificationId);
          events.push(event);
          for (const wake of waiters) wake();
        }
        res.writeHead(204).end();
      } catch (error) {
        const reason = error instanceof WebhookVerificationError ? error.reason : 'error';
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: reason }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}/`,
    waitFor<T>(payloadType: string, match: (payload: T) => boolean, timeoutMs = 120_000) {
      return new Promise<T>((resolve, reject) => {
        const check = () => {
          const event = events.find((e) => e.payloadType === payloadType && match(e.payload as T));
          if (!event) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(event.payload as T);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${payloadType} webhook within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A customer as the platform's onboarding flow would submit it (KYC and sanctions screening passed). */
export function customerProfile(firstName: string, lastName: string, email: string): PostCustomerBody {
  const now = Date.now();
  return {
    first_name: firstName,
    last_name: lastName,
    email,
    address_one: '1 Main St',
    city: 'Chicago',
    zip: '60601',
    jurisdiction_code: 'US-IL',
    date_of_birth: '1985-09-02',
    citizenship_code: 'US',
    tax_id: '123-45-6789',
    kyc: 'pass',
    kyc_timestamp: now,
    sanction_screening: 'pass',
    sanction_screening_timestamp: now,
    signed_timestamp: now,
    b_notice_receipt: false,
    is_w_form_certified: true,
    w_form_certification: now,
    signature: `${firstName} ${lastName}`,
    signature_timestamp: now,
    payee_exemption: 'NONE',
    fatca_reporting_exemption: 'NONE',
    is_not_subject_backup_withholding: true,
  };
}

export interface EndToEndResult {
  holder: string;
  tenant: string;
  zrn: string;
  depositAddress: string;
  fundEvent: FundEvent;
  tradeId: string;
  btcBalance: string;
}

// #region end-to-end
export async function endToEnd(
  client: SvcPlatform,
  webhooks: WebhookReceiver,
  /** Called with the deposit address to show the customer; resolves once the customer has sent the funds. */
  deposit: (address: string) => Promise<void>,
): Promise<EndToEndResult> {
  const run = randomUUID().slice(0, 8);

  // 1. Onboard two customers. The request id makes a repeat of this exact call safe (spec 7.3); after a
  //    lost answer the SDK looks the customer up by email instead of creating it twice (spec 7.2).
  const ada = await client.participants.createCustomer(
    customerProfile('Ada', 'Lovelace', `ada.${run}@example.com`),
    { requestId: `onboard-ada-${run}` },
  );
  const bob = await client.participants.createCustomer(
    customerProfile('Bob', 'Babbage', `bob.${run}@example.com`),
    { requestId: `onboard-bob-${run}` },
  );

  // 2. A customer account for Ada (202: created in the background), announced by a webhook with its zrn.
  await client.accounts.create({
    participant_code: ada.participant_code,
    account_label: 'general',
    type: 'individual',
    tier: 'pro',
  });
  const account = await webhooks.waitFor<CustomerAccountDetails>(
    'customer_account_status_changed',
    (a) => a.participant_code === ada.participant_code,
  );

  // 3. Bob becomes a tenant: 202 means accepted (spec 3.2); the webhook says when it is in effect.
  await client.accounts.addTenant(account.zrn, bob.participant_code);
  await webhooks.waitFor<CustomerAccountDetails>(
    'customer_account_status_changed',
    (a) => a.zrn === account.zrn && a.tenants.includes(bob.participant_code),
  );

  // 4. Fund with the platform's own reference: every deposit to this address now carries it (spec 2.3).
  const reference = `order-${run}`;
  const fundQuote = await client.funding.requestQuote({
    participant_code: ada.participant_code,
    fund_asset: 'USDC.ETH',
    client_fund_id: reference,
  });
  await deposit(fundQuote.deposit_address);
  const fundEvent = await webhooks.waitFor<FundEvent>(
    'deposit_fund_complete',
    (f) => f.reference_id === reference,
  );

  // 5. Quote and execute. If the answer to execute is lost (502/504, a cut connection), the SDK finds the
  //    trade with GET /trades?client_trade_id=<quote_id> instead of executing twice.
  const quote = await client.quotes.requestLiquidityQuote({
    side: 'buy',
    underlying: 'BTC',
    quoted_currency: 'USD',
    total: '50',
    participant_code: ada.participant_code,
  });
  const { trade_id: tradeId } = await client.quotes.executeLiquidityQuote(quote.quote_id);

  // 6. The trade settles: accepted → active → terminated, then Ada's BTC balance moves.
  await webhooks.waitFor<TradeStatusNotification>(
    'trade_status_changed',
    (t) => t.trade_id === tradeId && t.trade_state === 'terminated',
  );
  const btc = await webhooks.waitFor<AccountBalanceChanged>(
    'account_balance.changed',
    (b) => b.participant_code === ada.participant_code && b.asset === 'BTC',
  );

  return {
    holder: ada.participant_code,
    tenant: bob.participant_code,
    zrn: account.zrn,
    depositAddress: fundQuote.deposit_address,
    fundEvent,
    tradeId,
    btcBalance: btc.balance,
  };
}
// #endregion end-to-end

/** `node --import tsx examples/end-to-end.ts`: the same flow against the service named by the environment. */
async function main(): Promise<void> {
  const env = (name: string): string => {
    const value = process.env[name];
    if (!value) throw new Error(`set ${name}`);
    return value;
  };
  const client = createClient({
    baseUrl: env('SVC_URL'),
    apiKey: env('SVC_API_KEY'),
    apiSecret: env('SVC_API_SECRET'),
    passphrase: env('SVC_PASSPHRASE'),
  });
  const webhooks = await startWebhookReceiver(
    env('SVC_WEBHOOK_SECRET'),
    Number(process.env.WEBHOOK_PORT ?? 4000),
  );
  console.log(`receiving webhooks on ${webhooks.url}`);
  try {
    const result = await endToEnd(client, webhooks, async (address) => {
      console.log(
        `send USDC to ${address} (in cert: svc deposits record ${address} 100 --fund-asset USDC.ETH)`,
      );
    });
    console.log(JSON.stringify(result, null, 2));
  } finally {
    await webhooks.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
