import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { TSchema } from 'typebox';
import {
  ClientAuthTokenBody,
  FundRfqBody,
  FundTransactionsQuery,
  RevokeClientAuthTokenBody,
  type FundEvent,
  type FundQuote,
} from '../../src/contract/funding.schemas.ts';
import {
  ConvertWithdrawExecuteBody,
  ConvertWithdrawQuoteBody,
  ConvertWithdrawQuoteRequest,
  ExecuteQuoteBody,
  LiquidityQuoteBody,
  LiquidityQuoteRequest,
  type ConvertWithdrawExecution,
  type ConvertWithdrawQuote,
  type LiquidityExecution,
  type LiquidityQuote,
} from '../../src/contract/quotes.schemas.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import type { QueryValue, SvcClient } from '../../src/sdk/client.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema, VENDOR_OPENAPI_PATH } from '../helpers/vendor-schema.ts';
import { fund } from '../helpers/trades-fixtures.ts';
import { setPrices } from '../helpers/funding-fixtures.ts';
import { CLIENT_TOKEN_PERMISSIONS } from '../../src/contract/wire-values.ts';

/**
 * wire-contract: "real clients written for the vendor's public API work against us unchanged". Every field of
 * the vendor's request shapes (body and query) of the funding and quote operations is accepted with the
 * vendor's type: honoured where the service has its meaning, otherwise type-checked and not used. A field the
 * vendor does not document is still refused (400 "is not allowed").
 */

// ---- The vendor's document, read as data ----

type JsonSchema = Record<string, unknown>;
const SPEC = JSON.parse(readFileSync(VENDOR_OPENAPI_PATH, 'utf8')) as {
  paths: Record<string, Record<string, JsonSchema>>;
  components: { schemas: Record<string, JsonSchema> };
};

function deref(node: JsonSchema): JsonSchema {
  const ref = node.$ref as string | undefined;
  return ref ? deref(SPEC.components.schemas[ref.split('/').pop()!]!) : node;
}

/** The alternatives a schema stands for: its oneOf/anyOf variants (recursively), else itself. */
function variants(node: JsonSchema): JsonSchema[] {
  const resolved = deref(node);
  const alternatives = (resolved.oneOf ?? resolved.anyOf) as JsonSchema[] | undefined;
  return alternatives ? alternatives.flatMap(variants) : [resolved];
}

function jsonType(node: JsonSchema): string | undefined {
  const types = variants(node).map((v) => (v.type as string | undefined) ?? (v.enum ? 'string' : undefined));
  return types.find((t) => t !== undefined);
}

/** Every property path of a vendor schema, over all its variants, with the vendor's JSON type. */
function vendorFields(node: JsonSchema, prefix = ''): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  for (const variant of variants(node)) {
    for (const [name, child] of Object.entries((variant.properties ?? {}) as Record<string, JsonSchema>)) {
      const field = `${prefix}${name}`;
      out.set(field, jsonType(child));
      const inner = variants(child);
      for (const v of inner) {
        if (v.type === 'object') for (const [k, t] of vendorFields(v, `${field}.`)) out.set(k, t);
        if (v.type === 'array' && v.items) {
          for (const [k, t] of vendorFields(v.items as JsonSchema, `${field}[].`)) out.set(k, t);
        }
      }
    }
  }
  return out;
}

/** Our schema node at a property path (`a.b`, `fees[].amount`), through unions and arrays. */
function ourField(schema: TSchema, field: string): JsonSchema | undefined {
  let nodes: JsonSchema[] = [schema as JsonSchema];
  for (const segment of field.split('.')) {
    const array = segment.endsWith('[]');
    const name = array ? segment.slice(0, -2) : segment;
    const next: JsonSchema[] = [];
    for (const node of nodes.flatMap((n) => (n.anyOf as JsonSchema[] | undefined) ?? [n])) {
      const child = (node.properties as Record<string, JsonSchema> | undefined)?.[name];
      if (!child) continue;
      next.push(array ? (child.items as JsonSchema) : child);
    }
    if (next.length === 0) return undefined;
    nodes = next;
  }
  return nodes[0];
}

function ourType(node: JsonSchema): string | undefined {
  const first = ((node.anyOf as JsonSchema[] | undefined) ?? [node])[0]!;
  return (first.type as string | undefined) ?? (first.enum ? 'string' : undefined);
}

const BODY_OPERATIONS: Array<[string, string, TSchema]> = [
  ['post', '/client_auth_token', ClientAuthTokenBody],
  ['post', '/revoke_auth_token', RevokeClientAuthTokenBody],
  ['post', '/fund/rfq', FundRfqBody],
  ['post', '/liquidity/rfq', LiquidityQuoteBody],
  ['post', '/liquidity/execute', ExecuteQuoteBody],
  ['post', '/convert_withdraw/rfq', ConvertWithdrawQuoteBody],
  ['post', '/convert_withdraw/execute', ConvertWithdrawExecuteBody],
];
const QUERY_OPERATIONS: Array<[string, TSchema]> = [
  ['/fund/transactions', FundTransactionsQuery],
  ['/liquidity/rfq', LiquidityQuoteRequest],
  ['/convert_withdraw/rfq', ConvertWithdrawQuoteRequest],
];

describe("the contract declares every field of the vendor's request shapes", () => {
  for (const [method, route, ours] of BODY_OPERATIONS) {
    test(`${method.toUpperCase()} ${route} body`, () => {
      const body = SPEC.paths[route]![method]!.requestBody as JsonSchema;
      const schema = (body.content as Record<string, { schema: JsonSchema }>)['application/json']!.schema;
      const fields = vendorFields(schema);
      assert.ok(fields.size > 0);
      for (const [field, type] of fields) {
        const node = ourField(ours, field);
        assert.ok(node, `${route}: ${field} is not declared`);
        if (type !== undefined) assert.equal(ourType(node), type, `${route}: ${field} has the vendor's type`);
      }
    });
  }
  for (const [route, ours] of QUERY_OPERATIONS) {
    test(`GET ${route} query`, () => {
      const parameters = SPEC.paths[route]!.get!.parameters as Array<{ in?: string; name?: string }>;
      const names = parameters.filter((p) => p.in === 'query').map((p) => p.name!);
      assert.ok(names.length > 0);
      for (const name of names) assert.ok(ourField(ours, name), `${route}: ${name} is not declared`);
    });
  }
});

// ---- The vendor's fullest requests, over HTTP ----

const clock = new ManualClock(Date.now());
let svc: TestService;
let client: SvcClient;
let customer: { code: string; email: string };
const EVM_ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';

before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc);
  const fixture = await svc.newPlatform();
  client = fixture.client;
  const participant = await svc.newParticipant(fixture.platform.platform_code);
  await svc.newCustomerAccount(fixture.platform.platform_code, participant.participant_code);
  customer = { code: participant.participant_code, email: participant.email! };
  await fund(svc, customer.code, 'USD', '1000000');
});
after(() => svc?.close());

async function ok<T>(
  method: 'GET' | 'POST',
  route: string,
  request: { body?: unknown; query?: Record<string, QueryValue> },
  status: number,
): Promise<T> {
  const res = await client.send<{ message: T }>(method, route, request);
  assert.equal(res.status, status, `${method} ${route}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

async function refused(
  method: 'GET' | 'POST',
  route: string,
  request: { body?: unknown; query?: Record<string, QueryValue> },
) {
  const res = await client.send<{ errors: string[] }>(method, route, request);
  assert.equal(res.status, 400, `${method} ${route}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.errors;
}

const customFees = {
  spread_bps: '50',
  fees: [{ type: 'bps', amount: '20', name: 'platform_fee' }],
};

describe('account funding', () => {
  test('POST /client_auth_token: the fullest request (every SDK variant) → 201, funding session as asked', async () => {
    const body = {
      participant_code: customer.code,
      email: customer.email,
      phone_number: '+15555550100',
      otp_verified: 'email',
      reference_id: 'a81bc81b-dead-4e5d-abff-90865d1e13b1',
      merchant_participant_code: 'MERCH1',
      permissions: [...CLIENT_TOKEN_PERMISSIONS],
      withdrawal_details: {
        quoted_asset: 'USD',
        withdrawal_request_amount: '125.55',
        external_account_id: 'a81bc81b-dead-4e5d-abff-90865d1e13b1',
        account_label: 'general',
      },
      deposit_details: {
        account_label: 'general',
        external_wallet_address: EVM_ADDRESS,
        deposit_amount: '250.00',
        denominated_currency: 'USD',
      },
      payment_details: { purchase_amount: '250.00', denominated_currency: 'USD' },
      client_device_info: { ip_address: '81.2.69.142', location: 'US-IL' },
      custom_fees_and_spreads: { crypto_buy: customFees, crypto_sell: customFees },
    };
    assertVendorSchema(body, 'ClientAuthTokenRequestBody');
    const token = await ok<{ token: string; deposit_intent_id?: string }>(
      'POST',
      '/client_auth_token',
      { body },
      201,
    );
    assert.ok(token.deposit_intent_id);
    const session = await svc.runtime.store.db
      .selectFrom('funding_sessions')
      .select(['reference_id', 'account_label'])
      .where('session_id', '=', token.deposit_intent_id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(session, { reference_id: body.reference_id, account_label: 'general' });

    const revoke = { token: token.token };
    assertVendorSchema(revoke, 'RevokeClientAuthTokenRequestBody');
    const revoked = await client.send('POST', '/revoke_auth_token', { body: revoke });
    assert.equal(revoked.status, 204, JSON.stringify(revoked.body));
  });

  test("POST /client_auth_token: the vendor's Account Funding SDK – Deposits variant → 201", async () => {
    const body = {
      participant_code: customer.code,
      permissions: ['fwc'],
      reference_id: 'deposit-variant',
      deposit_details: {
        account_label: 'general',
        external_wallet_address: EVM_ADDRESS,
        deposit_amount: '250.00',
        denominated_currency: 'USD',
      },
      client_device_info: { ip_address: '81.2.69.142', location: 'US-IL' },
    };
    assertVendorSchema(body, 'ClientAuthTokenRequestBody');
    const token = await ok<{ deposit_intent_id?: string }>('POST', '/client_auth_token', { body }, 201);
    assert.ok(token.deposit_intent_id);
  });

  test('POST /client_auth_token: wrong types and unknown fields, at any depth → 400 naming each', async () => {
    const errors = await refused('POST', '/client_auth_token', {
      body: {
        participant_code: customer.code,
        permissions: ['fwc'],
        otp_verified: 'fax',
        email: 'not-an-email',
        deposit_details: {
          account_label: 'general',
          deposit_amount: 250,
          denominated_currency: 'EUR',
          tip: 1,
        },
        client_device_info: { ip_address: '81.2.69.142' },
        payment_details: { purchase_amount: 'lots', denominated_currency: 'USD' },
        custom_fees_and_spreads: { crypto_swap: {} },
        nickname: 'x',
      },
    });
    const fields = [...new Set(errors.map((e) => e.split(':')[0]))].sort();
    assert.deepEqual(fields, [
      'client_device_info.location',
      'custom_fees_and_spreads.crypto_swap',
      'deposit_details.denominated_currency',
      'deposit_details.deposit_amount',
      'deposit_details.tip',
      'email',
      'nickname',
      'otp_verified',
      'payment_details.purchase_amount',
    ]);
    assert.ok(errors.includes('nickname: is not allowed'), errors.join('\n'));
  });

  test('POST /fund/rfq and GET /fund/transactions with every documented field → success', async () => {
    const body = {
      participant_code: customer.code,
      fund_asset: 'USDC.ETH',
      account_label: 'general',
      client_fund_id: 'vendor-fullest',
    };
    assertVendorSchema(body, 'PostFundRfqBody');
    const quote = await ok<FundQuote>('POST', '/fund/rfq', { body }, 200);
    const intent = await ok<{ deposit_intent_id?: string }>(
      'POST',
      '/client_auth_token',
      { body: { participant_code: customer.code, permissions: ['fwc'], reference_id: 'vendor-fullest' } },
      201,
    );
    const deposit = await svc.admin.post<FundEvent>('/deposits', {
      deposit_address: quote.deposit_address,
      quantity: '25',
      transaction_id: `0x${'ab'.repeat(32)}`,
    });
    const listed = await ok<FundEvent[]>(
      'GET',
      '/fund/transactions',
      {
        query: {
          participant_code: customer.code,
          fund_asset: 'USDC.ETH',
          deposit_address: quote.deposit_address,
          fund_id: deposit.fund_id,
          page: '1',
          page_size: '50',
          success: 'true',
          deposit_timestamp_gte: deposit.deposit_timestamp,
          deposit_timestamp_gt: deposit.deposit_timestamp - 1,
          deposit_timestamp_lt: deposit.deposit_timestamp + 1,
          deposit_timestamp_lte: deposit.deposit_timestamp,
          deposit_intent_id: intent.deposit_intent_id,
          reference_id: 'vendor-fullest',
        },
      },
      200,
    );
    assert.deepEqual(
      listed.map((e) => e.fund_id),
      [deposit.fund_id],
    );
  });
});

describe('liquidity quotes', () => {
  const base = { side: 'buy', underlying: 'BTC', quoted_currency: 'USD' };

  test('GET /liquidity/rfq with every documented parameter → 200; quote_expiry is honoured', async () => {
    for (const [extra, window] of [
      [{ spread: '50' }, 5_000],
      [{}, 900_000],
    ] as const) {
      const query = {
        ...base,
        quantity: '0.01',
        participant_code: customer.code,
        account_label: 'general',
        quote_expiry: window === 5_000 ? '5s' : '15m',
        ...extra,
      };
      const quote = await ok<LiquidityQuote>('GET', '/liquidity/rfq', { query }, 200);
      assert.equal(quote.expire_ts, clock.now() + window);
      assert.equal(quote.participant_code, customer.code);
    }
    const byTotal = await ok<LiquidityQuote>(
      'GET',
      '/liquidity/rfq',
      { query: { ...base, total: '100', quote_expiry: '1m' } },
      200,
    );
    assert.equal(byTotal.expire_ts, clock.now() + 60_000);
  });

  test('POST /liquidity/rfq with the full documented body → 201, and POST /liquidity/execute with every field → 200', async () => {
    const body = {
      ...base,
      participant_code: customer.code,
      account_label: 'general',
      quantity: '0.001',
      fees: [],
      payment_processor: { name: 'checkout.com', id: '593dd810-f051-40a9-9f26-d45280efe8f3' },
      quote_expiry: '30s',
      settlement_type: 'STANDARD',
    };
    assertVendorSchema(body, 'PostRequestForQuoteBody');
    const quote = await ok<LiquidityQuote>('POST', '/liquidity/rfq', { body }, 201);
    assert.equal(quote.price, '65000.25');
    assert.equal(quote.expire_ts, clock.now() + 30_000);

    const execute = {
      quote_id: quote.quote_id,
      withdrawal_request_id: 'a81bc81b-dead-4e5d-abff-90865d1e13b1',
      always_allocate: false,
      funding_details: { inbound_reference_id: 'ach-inbound-1' },
    };
    assertVendorSchema(execute, 'PostExecuteQuoteBody');
    const execution = await ok<LiquidityExecution>('POST', '/liquidity/execute', { body: execute }, 200);
    assert.equal(execution.quote.quote_id, quote.quote_id);

    const again = await ok<LiquidityQuote>(
      'POST',
      '/liquidity/rfq',
      { body: { ...body, spread: '10' } },
      201,
    );
    const other = {
      quote_id: again.quote_id,
      always_allocate: true,
      funding_details: { external_account_id: 'ext-1', description: 'ACH pull', bank_fee: '0.25' },
    };
    assertVendorSchema(other, 'PostExecuteQuoteBody');
    await ok('POST', '/liquidity/execute', { body: other }, 200);
  });

  test('always_allocate does not revive an expired quote (wire-contract §7: 404)', async () => {
    const quote = await ok<LiquidityQuote>(
      'POST',
      '/liquidity/rfq',
      { body: { ...base, quantity: '0.001', quote_expiry: '5s' } },
      201,
    );
    clock.advance(5_000);
    const res = await client.send('POST', '/liquidity/execute', {
      body: { quote_id: quote.quote_id, always_allocate: true },
    });
    assert.equal(res.status, 404, JSON.stringify(res.body));
  });

  test('commission and custom fees, money no platform here charges, are refused by name, not ignored', async () => {
    for (const extra of [
      { commission: '25' },
      { fees: [{ name: 'platform_fee', amount: '1.95', type: 'notional' }] },
    ]) {
      const [field] = Object.keys(extra);
      assertVendorSchema({ ...base, quantity: '0.001', ...extra }, 'PostRequestForQuoteBody');
      const errors = await refused('POST', '/liquidity/rfq', {
        body: { ...base, quantity: '0.001', ...extra },
      });
      assert.deepEqual(errors, [
        `${field}: ${field === 'fees' ? 'not available on this service (quotes carry no custom fees)' : 'not available on this service (quotes carry a spread only)'}`,
      ]);
    }
    const query = await refused('GET', '/liquidity/rfq', {
      query: { ...base, quantity: '1', commission: '25' },
    });
    assert.deepEqual(query, ['commission: not available on this service (quotes carry a spread only)']);
  });

  test('wrong types and unknown fields → 400 naming each', async () => {
    const query = await refused('GET', '/liquidity/rfq', {
      query: { ...base, quantity: '1', quote_expiry: '2m', commission: 'much', colour: 'red' },
    });
    assert.deepEqual([...new Set(query.map((e) => e.split(':')[0]))].sort(), [
      'colour',
      'commission',
      'quote_expiry',
    ]);
    const body = await refused('POST', '/liquidity/rfq', {
      body: {
        ...base,
        quantity: '1',
        settlement_type: 'NEXT_DAY',
        fees: [{ name: 'x' }],
        payment_processor: { name: 'psp', card: '4111' },
      },
    });
    assert.deepEqual([...new Set(body.map((e) => e.split(':')[0]))].sort(), [
      'fees[0].amount',
      'payment_processor.card',
      'settlement_type',
    ]);
    const execute = await refused('POST', '/liquidity/execute', {
      body: { quote_id: 'q', always_allocate: 'yes', allocate_now: true },
    });
    assert.deepEqual([...new Set(execute.map((e) => e.split(':')[0]))].sort(), [
      'allocate_now',
      'always_allocate',
    ]);
  });
});

describe('convert and withdraw', () => {
  const base = {
    side: 'buy',
    underlying: 'USDC.ETH',
    quoted_currency: 'USD',
    withdrawal_address: EVM_ADDRESS,
  };
  const beneficiary = {
    beneficiary_participant_code: 'CUST02',
    beneficiary_first_name: 'John',
    beneficiary_last_name: 'Doe',
  };

  test('GET /convert_withdraw/rfq with every documented parameter → 200; fee_inclusive keeps total_notional at the total', async () => {
    const quote = await ok<ConvertWithdrawQuote>(
      'GET',
      '/convert_withdraw/rfq',
      {
        query: {
          ...base,
          ...beneficiary,
          total: '100',
          participant_code: customer.code,
          account_label: 'general',
          fee_inclusive: true,
          spread: '10',
          destination_tag: '123456789',
          no_destination_tag: false,
        },
      },
      200,
    );
    assert.equal(quote.total_notional, '100');
    const business = await ok<ConvertWithdrawQuote>(
      'GET',
      '/convert_withdraw/rfq',
      { query: { ...base, quantity: '1', beneficiary_business_name: 'ACME Inc.' } },
      200,
    );
    assert.equal(business.withdrawal_address, EVM_ADDRESS);
    // Query-string booleans as vendor clients print them (Python's requests sends False): any letter case.
    for (const [fee, tag] of [
      ['True', 'False'],
      ['FALSE', 'false'],
    ]) {
      await ok(
        'GET',
        '/convert_withdraw/rfq',
        {
          query: { ...base, total: '100', fee_inclusive: fee, no_destination_tag: tag },
        },
        200,
      );
    }
    const notBoolean = await client.send('GET', '/convert_withdraw/rfq', {
      query: { ...base, quantity: '1', no_destination_tag: 'yes' },
    });
    assert.equal(notBoolean.status, 400);
    assert.deepEqual(notBoolean.body, { errors: ['no_destination_tag: must be boolean'] });
  });

  test('POST /convert_withdraw/rfq with every documented field → 201, and POST /convert_withdraw/execute with every field → 200', async () => {
    const body = {
      ...base,
      ...beneficiary,
      participant_code: customer.code,
      account_label: 'general',
      quantity: '10',
      fee_inclusive: false,
      spread: '10',
      destination_tag: '123456789',
      no_destination_tag: false,
      fees: [],
      payment_processor: { name: 'checkout.com', id: '593dd810-f051-40a9-9f26-d45280efe8f3' },
      contract_execution: {
        contract_id: 'contract-1',
        contract_address: EVM_ADDRESS,
        payload: { method: 'deposit', args: [1, 'two'] },
      },
    };
    assertVendorSchema(body, 'PostCWRequestForQuoteBody');
    const quote = await ok<ConvertWithdrawQuote>('POST', '/convert_withdraw/rfq', { body }, 201);
    const execute = {
      quote_id: quote.quote_id,
      withdrawal_request_id: '640ee134-1e55-411d-ad2d-c924c5ccf9aa',
      funding_details: { inbound_reference_id: 'ach-inbound-2' },
    };
    assertVendorSchema(execute, 'PostCWExecuteQuoteBody');
    const execution = await ok<ConvertWithdrawExecution>(
      'POST',
      '/convert_withdraw/execute',
      { body: execute },
      200,
    );
    assert.equal(execution.quote.quote_id, quote.quote_id);
    assert.ok(execution.withdrawal_request_id);
  });

  test('convert and withdraw has no always_allocate (vendor) and refuses unknown fields', async () => {
    const errors = await refused('POST', '/convert_withdraw/execute', {
      body: { quote_id: 'q', always_allocate: true },
    });
    assert.deepEqual(errors, ['always_allocate: is not allowed']);
    const rfq = await refused('POST', '/convert_withdraw/rfq', {
      body: { ...base, quantity: '1', fees: new Array(6).fill({ name: 'f', amount: '1' }), memo: 'x' },
    });
    assert.deepEqual([...new Set(rfq.map((e) => e.split(':')[0]))].sort(), ['fees', 'memo']);
  });
});
