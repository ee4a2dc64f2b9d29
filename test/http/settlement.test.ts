import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, describe, test } from 'node:test';
import { parseArgs } from 'node:util';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS, UsageError } from '../../src/cli/operator-commands.ts';
import { AdminApiError } from '../../src/cli/admin-client.ts';
import type { AdminTrade } from '../../src/contract/trades.schemas.ts';
import type { SvcClient } from '../../src/sdk/client.ts';
import { createTradesService } from '../../src/domain/trades/trades.service.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  balanceOf,
  executeLiquidity,
  fund,
  getTrade,
  liquidityQuote,
  notificationsOf,
  setPrices,
} from '../helpers/trades-fixtures.ts';

/**
 * Issue 7 points 6 and 7 driven by the operator: `POST /admin/trades/{id}/advance` does the next settlement
 * step at once, `POST /admin/trades` books a trade directly. The worker does not run here (SVC_ROLE=api)
 * and the configured delays are an hour, so every state change in these tests is the operator's.
 */
let svc: TestService;
let platformCode: string;
let client: SvcClient;

before(async () => {
  svc = await startTestService({
    env: { SVC_SETTLEMENT_ACTIVE_AFTER_MS: '3600000', SVC_SETTLEMENT_TERMINATE_AFTER_MS: '3600000' },
  });
  await setPrices(svc, { 'BTC/USD': '50000', 'ETH/USD': '2500' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  client = fixture.client;
});
after(() => svc?.close());

const advance = (tradeId: string) => svc.admin.post<AdminTrade>(`/trades/${tradeId}/advance`);

async function adminError(call: Promise<unknown>): Promise<AdminApiError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof AdminApiError) return error;
    throw error;
  }
  return assert.fail('expected the operator API to refuse');
}

async function buyTrade(participantCode: string, quantity: string, underlying = 'BTC'): Promise<string> {
  const quote = await liquidityQuote(client, {
    side: 'buy',
    underlying,
    quoted_currency: 'USD',
    quantity,
    participant_code: participantCode,
  });
  return (await executeLiquidity(client, quote.quote_id)).trade_id;
}

/** The trades `GET /trades` finds by a client_trade_id, by id. */
async function tradeIdsByClientTradeId(clientTradeId: string): Promise<string[]> {
  const found = await client.send<{ message: Array<{ trade_id: string }> }>('GET', '/trades', {
    query: { client_trade_id: clientTradeId },
  });
  return found.body.message.map((t) => t.trade_id);
}

/** An operator's booking of a 0.01 ETH buy for `holder` at `price`. */
function ethBuyBooking(holder: string, price: string) {
  return {
    platform_code: platformCode,
    participant_code: holder,
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '0.01',
    price,
  };
}

describe('the settlement timer', () => {
  /** The trade's settlement job, as graphile-worker holds it (its view leaves the payload out). */
  const settleJob = (tradeId: string) =>
    svc.runtime.store.db
      .withSchema('graphile_worker')
      .selectFrom('_private_jobs' as never)
      .select(['run_at' as never, 'payload' as never])
      .where('key' as never, '=', `trade-settle:${tradeId}` as never)
      .executeTakeFirstOrThrow() as Promise<{ run_at: Date; payload: { from: string } }>;

  test('a step run before it is due (the queue goes by the database’s clock) waits for its time, moving nothing', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '2500');
    const tradeId = await buyTrade(buyer, '1', 'ETH');
    const trade = await getTrade(client, tradeId);
    const due = trade.settlement_timestamp!;
    assert.equal(due, trade.accepted_timestamp! + 3_600_000);
    assert.equal((await settleJob(tradeId)).run_at.getTime(), due);

    // What the worker does when the job comes up an hour early.
    assert.equal(await svc.runtime.services.trades.settleStep({ trade_id: tradeId, from: 'accepted' }), null);
    assert.equal((await getTrade(client, tradeId)).trade_state, 'accepted');
    assert.deepEqual(
      (await notificationsOf(svc, `trade:${tradeId}`)).map((n) => n.payload.trade_state),
      ['accepted'],
    );
    // Waiting again for its time (give or take the milliseconds between the clock's two reads).
    const again = await settleJob(tradeId);
    assert.equal(again.payload.from, 'accepted');
    assert.ok(Math.abs(again.run_at.getTime() - due) < 1_000, `${again.run_at.toISOString()} for ${due}`);

    // The operator still moves it at once, and its next step is due a delay after that.
    const active = await advance(tradeId);
    assert.equal(active.trade_state, 'active');
    assert.equal(await svc.runtime.services.trades.settleStep({ trade_id: tradeId, from: 'active' }), null);
    assert.equal((await getTrade(client, tradeId)).trade_state, 'active');
    assert.equal(await balanceOf(svc, buyer, 'ETH'), '0');
  });

  test('an accepted trade moves at the settlement_timestamp it was booked with, whatever the delay is now', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '2500');
    const tradeId = await buyTrade(buyer, '1', 'ETH');
    const due = (await getTrade(client, tradeId)).settlement_timestamp!;
    // An instance started since with a longer delay (review: it waited for the booking time plus its own delay).
    const clock = new ManualClock(due - 1);
    const deps = svc.domainDeps({ db: svc.runtime.store.db, clock });
    const later = createTradesService({
      ...deps,
      config: { ...deps.config, settlement: { ...deps.config.settlement, activeAfterMs: 7_200_000 } },
    });
    assert.equal(await later.settleStep({ trade_id: tradeId, from: 'accepted' }), null, '1 ms early: waits');
    clock.set(due);
    assert.equal(await later.settleStep({ trade_id: tradeId, from: 'accepted' }), 'active');
  });

  test('the stalled-settlement sweep revives an accepted trade by its own time, not by the delay configured now', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '2500');
    const tradeId = await buyTrade(buyer, '1', 'ETH');
    const { accepted_timestamp: accepted, settlement_timestamp: due } = await getTrade(client, tradeId);
    const stalledAfter = 600_000;
    const clock = new ManualClock(accepted! + stalledAfter + 60_000);
    const deps = svc.domainDeps({ db: svc.runtime.store.db, clock });
    // An instance started since with a delay of 5 s: 11 minutes after acceptance, nothing here is due for 49 more
    // (review: each sweep added a job due now, which settleStep put back to its time).
    const shorter = createTradesService({
      ...deps,
      config: { ...deps.config, settlement: { ...deps.config.settlement, activeAfterMs: 5_000 } },
    });
    assert.equal(await shorter.reviveStalledSettlements(stalledAfter), 0);
    assert.equal((await settleJob(tradeId)).run_at.getTime(), due);
    // Past its own time and the stall's margin, it is revived: its job is due now.
    clock.set(due! + stalledAfter + 60_000);
    assert.ok((await shorter.reviveStalledSettlements(stalledAfter)) >= 1);
    assert.ok((await settleJob(tradeId)).run_at.getTime() < due!, 'the job is due at once');
  });
});

describe('operator advance', () => {
  test('accepted → active → terminated at once; balances move only at terminated', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '100000');
    const tradeId = await buyTrade(buyer, '1');
    assert.equal(settlementDelayed(await getTrade(client, tradeId)), true);

    const active = await advance(tradeId);
    assert.equal(active.trade_state, 'active');
    assert.deepEqual(
      active.parties.map((p) => p.settlement_state),
      ['obligations_outstanding', 'obligations_outstanding'],
    );
    assert.equal(await balanceOf(svc, buyer, 'USD'), '100000');

    const done = await advance(tradeId);
    assert.equal(done.trade_state, 'terminated');
    assert.equal(typeof done.settled_timestamp, 'number');
    assert.equal(await balanceOf(svc, buyer, 'USD'), '50000');
    assert.equal(await balanceOf(svc, buyer, 'BTC'), '1');
    assert.equal((await getTrade(client, tradeId)).trade_state, 'terminated');
  });

  test('after terminated: 409, and no notification or balance change follows', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '2500');
    const tradeId = await buyTrade(buyer, '1', 'ETH');
    await advance(tradeId);
    await advance(tradeId);
    const before = await notificationsOf(svc, `trade:${tradeId}`);
    assert.deepEqual(
      before.map((n) => n.payload.trade_state),
      ['accepted', 'active', 'terminated'],
    );
    const refused = await adminError(advance(tradeId));
    assert.equal(refused.status, 409);
    assert.deepEqual(await notificationsOf(svc, `trade:${tradeId}`), before);
    assert.equal(await balanceOf(svc, buyer, 'ETH'), '1');
    assert.equal(await balanceOf(svc, buyer, 'USD'), '0');
  });

  test('with `from`, a repeated advance (its first answer lost) makes no second step: 409 naming from', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '2500');
    const tradeId = await buyTrade(buyer, '1', 'ETH');
    const twice = await Promise.allSettled([
      svc.admin.post<AdminTrade>(`/trades/${tradeId}/advance`, { from: 'accepted' }),
      svc.admin.post<AdminTrade>(`/trades/${tradeId}/advance`, { from: 'accepted' }),
    ]);
    const done = twice.filter((r) => r.status === 'fulfilled');
    assert.equal(done.length, 1, 'one of the two made the step');
    assert.equal(done[0]!.value.trade_state, 'active');
    const refused = await adminError(
      Promise.reject((twice.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason),
    );
    assert.equal(refused.status, 409);
    assert.match(JSON.stringify(refused.body), /from: trade .* is active, not accepted/);
    assert.deepEqual(
      (await notificationsOf(svc, `trade:${tradeId}`)).map((n) => n.payload.trade_state),
      ['accepted', 'active'],
    );
    assert.equal((await getTrade(client, tradeId)).trade_state, 'active');
    // `from` names only a state a trade advances from; an empty body advances as before.
    assert.equal(
      (await adminError(svc.admin.post(`/trades/${tradeId}/advance`, { from: 'terminated' }))).status,
      400,
    );
    assert.equal(
      (await svc.admin.post<AdminTrade>(`/trades/${tradeId}/advance`, {})).trade_state,
      'terminated',
    );
  });

  test('the database itself refuses any change to a terminated trade, and backward moves', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '2500');
    const tradeId = await buyTrade(buyer, '1', 'ETH');
    const db = svc.runtime.store.db;
    await advance(tradeId);
    await assert.rejects(
      db.updateTable('trades').set({ trade_state: 'accepted' }).where('trade_id', '=', tradeId).execute(),
      /active → accepted is not a transition/,
    );
    await advance(tradeId);
    await assert.rejects(
      db.updateTable('trades').set({ updated_at: new Date() }).where('trade_id', '=', tradeId).execute(),
      /is terminated: no further change is allowed/,
    );
    await assert.rejects(
      db.updateTable('trades').set({ trade_state: 'active' }).where('trade_id', '=', tradeId).execute(),
      /is terminated/,
    );
    await assert.rejects(
      db.deleteFrom('trades').where('trade_id', '=', tradeId).execute(),
      /cannot be deleted/,
    );
    assert.equal((await getTrade(client, tradeId)).trade_state, 'terminated');
  });

  test('a settlement that cannot complete changes nothing: balances, state and notifications are one transaction', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '50000');
    const tradeId = await buyTrade(buyer, '1');
    await advance(tradeId);
    // The balance falls short of what the trade promised: not through the operator API, which refuses to take
    // promised funds, but as a correction made in the database would.
    const shortBy = (delta: string) =>
      sql`update balance_accounts set balance = balance + ${delta}::numeric
          where participant_code = ${buyer} and asset = 'USD' and account_type = 'available'`.execute(
        svc.runtime.store.db,
      );
    await shortBy('-1');
    const refused = await adminError(advance(tradeId));
    assert.equal(refused.status, 400);
    assert.match(JSON.stringify(refused.body), /insufficient balance/);
    // The BTC credit comes first (movements are applied in asset order) and was rolled back with the rest.
    assert.equal(await balanceOf(svc, buyer, 'BTC'), '0');
    assert.equal(await balanceOf(svc, buyer, 'USD'), '49999');
    assert.equal((await getTrade(client, tradeId)).trade_state, 'active');
    assert.deepEqual(
      (await notificationsOf(svc, `trade:${tradeId}`)).map((n) => n.payload.trade_state),
      ['accepted', 'active'],
    );
    await shortBy('1');
    assert.equal((await advance(tradeId)).trade_state, 'terminated');
    assert.equal(await balanceOf(svc, buyer, 'BTC'), '1');
  });

  test('no balance goes below zero, even by a correction made in the database (0029)', async () => {
    const holder = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, holder, 'USD', '10');
    const set = (delta: string) =>
      sql`update balance_accounts set balance = balance + ${delta}::numeric
          where participant_code = ${holder} and asset = 'USD'`.execute(svc.runtime.store.db);
    await assert.rejects(set('-10.000000001'), /balance_accounts_not_negative/);
    await set('-10');
    assert.equal(await balanceOf(svc, holder, 'USD'), '0');
  });

  test('a POST with no body at all advances as `{}` does (the body is optional), and an unknown trade is a 404', async () => {
    const buyer = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, buyer, 'USD', '100000');
    const tradeId = await buyTrade(buyer, '1');
    const bare = await svc.operatorCall('POST', `/trades/${tradeId}/advance`);
    assert.equal(bare.status, 200, bare.text);
    assert.equal((bare.json as { message: AdminTrade }).message.trade_state, 'active');
    const unknown = await svc.operatorCall('POST', '/trades/7f0c1d2e-3333-4333-8333-333333333333/advance');
    assert.equal(unknown.status, 404, unknown.text);
  });

  test('unknown trade → 404 naming it', async () => {
    for (const id of ['7f0c1d2e-3333-4333-8333-333333333333', 'nope']) {
      const error = await adminError(advance(id));
      assert.equal(error.status, 404);
      assert.deepEqual(error.body, { error: 'Not Found', message: `trade ${id} not found` });
    }
  });
});

describe('operator booking', () => {
  test('a net settlement trade settles and moves balances, but never emits trade_status_changed', async () => {
    const holder = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, holder, 'BTC', '2');
    const booked = await svc.admin.post<AdminTrade>('/trades', {
      platform_code: platformCode,
      participant_code: holder,
      side: 'sell',
      underlying: 'BTC',
      quoted_currency: 'USD',
      quantity: '0.5',
      price: '48000.5',
      net_settlement: true,
      client_trade_id: 'alloc-1',
    });
    assert.equal(booked.net_settlement, true);
    assert.equal(booked.trade_state, 'accepted');
    assert.equal(booked.total_notional, '24000.25');
    assert.equal(booked.origin, null);
    await advance(booked.trade_id);
    assert.equal((await advance(booked.trade_id)).trade_state, 'terminated');
    assert.deepEqual(await notificationsOf(svc, `trade:${booked.trade_id}`), []);
    assert.equal(await balanceOf(svc, holder, 'BTC'), '1.5');
    assert.equal(await balanceOf(svc, holder, 'USD'), '24000.25');
    assert.deepEqual(await tradeIdsByClientTradeId('alloc-1'), [booked.trade_id]);
    // A booked trade's client_trade_id matches exactly, even a UUID: only a quote's trade is also found by
    // its quote_id in any letter case (spec 7.2).
    const uuidId = crypto.randomUUID();
    const second = await svc.admin.post<AdminTrade>('/trades', {
      platform_code: platformCode,
      participant_code: holder,
      side: 'sell',
      underlying: 'BTC',
      quoted_currency: 'USD',
      quantity: '0.1',
      price: '48000.5',
      net_settlement: true,
      client_trade_id: uuidId,
    });
    assert.deepEqual(await tradeIdsByClientTradeId(uuidId), [second.trade_id]);
    assert.deepEqual(await tradeIdsByClientTradeId(uuidId.toUpperCase()), []);
  });

  test('a regular booked trade does notify; a duplicate client_trade_id → 409; bad fields → 400', async () => {
    const holder = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, holder, 'USD', '100');
    const body = { ...ethBuyBooking(holder, '2500'), client_trade_id: 'booked-1' };
    const booked = await svc.admin.post<AdminTrade>('/trades', body);
    assert.deepEqual(
      (await notificationsOf(svc, `trade:${booked.trade_id}`)).map((n) => n.payload.trade_state),
      ['accepted'],
    );
    assert.equal((await adminError(svc.admin.post('/trades', body))).status, 409);
    const bad = await adminError(
      svc.admin.post('/trades', { ...body, side: 'hold', price: '0', quantity: '1e3', platform_code: 'x' }),
    );
    assert.equal(bad.status, 400);
    const fields = (bad.body as { errors: string[] }).errors.map((e) => e.split(':')[0]).sort();
    assert.deepEqual(fields, ['platform_code', 'quantity', 'side']);
    const zero = await adminError(
      svc.admin.post('/trades', { ...body, price: '0', client_trade_id: 'booked-2' }),
    );
    assert.deepEqual(zero.body, { errors: ['price: must be greater than 0'] });
    const poor = await adminError(
      svc.admin.post('/trades', { ...body, quantity: '1', client_trade_id: 'booked-3' }),
    );
    assert.equal(poor.status, 400);
    assert.match(JSON.stringify(poor.body), /quantity: insufficient balance/);
    // The platform reads both in its trades: no control or bidirectional characters (review: a BEL and a
    // right-to-left override were booked); a comment keeps its line breaks.
    for (const [fields, field] of [
      [{ client_trade_id: 'ct\u00071' }, 'client_trade_id'],
      [{ client_trade_id: 'ct\u202e1' }, 'client_trade_id'],
      [{ client_trade_id: ' booked-4' }, 'client_trade_id'],
      [{ comment: 'line\u0007' }, 'comment'],
      [{ comment: 'evil\u202e' }, 'comment'],
      [{ comment: '   ' }, 'comment'],
    ] as const) {
      const refused = await adminError(
        svc.admin.post('/trades', {
          ...body,
          client_trade_id: 'booked-5',
          ...(fields as Record<string, string>),
        }),
      );
      assert.equal(refused.status, 400, JSON.stringify(fields));
      const errors = (refused.body as { errors: string[] }).errors;
      assert.ok(
        errors.length === 1 && errors[0]!.startsWith(`${field}: is not in the expected form`),
        JSON.stringify(errors),
      );
    }
    const noted = await svc.admin.post<AdminTrade>('/trades', {
      ...ethBuyBooking(holder, '2500'),
      quantity: '0.001',
      client_trade_id: 'booked-6',
      comment: 'first line\nsecond\tline',
    });
    assert.equal(noted.comment, 'first line\nsecond\tline');
  });

  test("a quote's id is no booked trade's client_trade_id: 409, and the quote still executes (probe)", async () => {
    const holder = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, holder, 'USD', '100');
    const quote = await liquidityQuote(client, {
      side: 'buy',
      underlying: 'ETH',
      quoted_currency: 'USD',
      quantity: '0.01',
      participant_code: holder,
    });
    const body = ethBuyBooking(holder, '1');
    for (const id of [quote.quote_id, quote.quote_id.toUpperCase()]) {
      const refused = await adminError(svc.admin.post('/trades', { ...body, client_trade_id: id }));
      assert.equal(refused.status, 409);
      assert.deepEqual(refused.body, {
        errors: [
          `client_trade_id: ${id} is the id of a quote of platform ${platformCode}: only that quote's trade carries it`,
        ],
      });
    }
    const executed = await executeLiquidity(client, quote.quote_id);
    assert.deepEqual(await tradeIdsByClientTradeId(quote.quote_id), [executed.trade_id]);
  });
});

describe('operator CLI', () => {
  /** `svc trades …` as the CLI runs it: argv parsed with the CLI's options, then the command. */
  async function svcCli(argv: string[]): Promise<AdminTrade> {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: OPERATOR_OPTIONS,
    });
    const command = OPERATOR_COMMANDS[`${positionals[0]} ${positionals[1]}`];
    assert.ok(command, `no command ${positionals.slice(0, 2).join(' ')}`);
    return command.run(svc.admin, positionals.slice(2), values) as Promise<AdminTrade>;
  }

  test('svc trades book (a net settlement trade) and svc trades advance', async () => {
    const holder = (await svc.newParticipant(platformCode)).participant_code;
    await fund(svc, holder, 'USD', '10');
    const booked = await svcCli([
      'trades',
      'book',
      '--platform',
      platformCode,
      '--participant',
      holder,
      '--side',
      'buy',
      '--underlying',
      'ETH',
      '--quoted-currency',
      'USD',
      '--quantity',
      '0.002',
      '--price',
      '2500',
      '--net-settlement',
      '--comment',
      'allocation',
    ]);
    assert.equal(booked.net_settlement, true);
    assert.equal(booked.comment, 'allocation');
    assert.equal(booked.total_notional, '5');
    assert.equal((await svcCli(['trades', 'advance', booked.trade_id])).trade_state, 'active');
    await assert.rejects(
      svcCli(['trades', 'advance', booked.trade_id, '--from', 'accepted']),
      /409|is active/,
    );
    await assert.rejects(svcCli(['trades', 'advance', booked.trade_id, '--from', 'done']), UsageError);
    assert.equal(
      (await svcCli(['trades', 'advance', booked.trade_id, '--from', 'active'])).trade_state,
      'terminated',
    );
    assert.equal(await balanceOf(svc, holder, 'USD'), '5');
    await assert.rejects(
      svcCli(['trades', 'book', '--platform', platformCode, '--side', 'hold']),
      UsageError,
    );
    await assert.rejects(svcCli(['trades', 'advance']), UsageError);
  });
});

/** With an hour's delay configured, settlement is first attempted an hour after acceptance. */
function settlementDelayed(trade: { accepted_timestamp: number; settlement_timestamp: number | null }) {
  return trade.settlement_timestamp === trade.accepted_timestamp + 3_600_000;
}
