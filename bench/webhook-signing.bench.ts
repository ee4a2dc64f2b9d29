/**
 * The CPU of one delivery's headers (src/contract/webhook-signature.ts `webhookDeliveryHeaders`: the three
 * signatures of wire-contract §5 and the headers around them), against the three bare HMAC-SHA256 computations
 * they cannot do without, in the same process, alternately, BENCH_ROUNDS (5) rounds; prints the median ratio
 * (1.0 = nothing but the HMACs). Every delivery attempt pays this in the worker's single thread.
 *
 *   node --import tsx bench/webhook-signing.bench.ts
 *
 * Building the headers by spreading signWebhook's result into another object, as before, measured 2.1 here.
 */
import { createHmac } from 'node:crypto';
import { BENCH_TRADE_PAYLOAD, median } from './bench-support.ts';
import { webhookDeliveryHeaders } from '../src/contract/webhook-signature.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CALLS = 100_000;
const SECRET = 'bench-webhook-secret';
const NOTIFICATION_ID = '9b2d6f0e-8d5a-4c1e-9f3b-2a7c1d4e5f60';
const RAW_BODY = JSON.stringify(BENCH_TRADE_PAYLOAD);

/** The floor: the three MACs of wire-contract §5 over the same bytes, nothing else. */
function bareHmacs(timestampMs: number): number {
  const seconds = Math.floor(timestampMs / 1000);
  const a = createHmac('sha256', SECRET).update(RAW_BODY).update(String(timestampMs)).digest('hex');
  const b = createHmac('sha256', SECRET).update(RAW_BODY).digest('hex');
  const c = createHmac('sha256', SECRET)
    .update(`${NOTIFICATION_ID}.${seconds}.`)
    .update(RAW_BODY)
    .digest('base64');
  return a.length + b.length + c.length;
}

function headers(timestampMs: number): number {
  return Object.keys(
    webhookDeliveryHeaders({
      payloadType: 'trade_status_changed',
      notificationId: NOTIFICATION_ID,
      timestampMs,
      rawBody: RAW_BODY,
      secret: SECRET,
    }),
  ).length;
}

/** CPU µs per call of `f` over CALLS calls (after as many to warm up, the first time). */
function cpuPerCall(f: (timestampMs: number) => number): number {
  let sink = 0;
  const before = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) sink += f(1_700_000_000_000 + i);
  const used = process.cpuUsage(before);
  if (sink === 0) throw new Error('unreachable: keeps the calls from being optimised away');
  return (used.user + used.system) / CALLS;
}

cpuPerCall(bareHmacs);
cpuPerCall(headers);
const ratios: number[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  const bare = cpuPerCall(bareHmacs);
  const full = cpuPerCall(headers);
  ratios.push(full / bare);
  console.log(
    `round ${round}: bare HMACs ${bare.toFixed(2)} µs, webhookDeliveryHeaders ${full.toFixed(2)} µs, ratio ${(full / bare).toFixed(2)}`,
  );
}
console.log(
  `webhook delivery headers vs bare HMACs: median ratio ${median(ratios).toFixed(2)} (1.0 = the HMACs alone)`,
);
