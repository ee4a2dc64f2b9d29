/**
 * The CPU of one webhook attempt's HTTP exchange (src/domain/webhooks/webhook-sender.ts `send`: the deadline
 * bookkeeping, the early answer on a 2xx status line, the result), against a bare undici dispatch of the same
 * signed request to the same receiver with the same concurrency: the part of a delivery that the worker's own
 * code adds to the HTTP it cannot do without. Both sign their headers the same way. Measured in this process,
 * alternately, BENCH_ROUNDS (40) short rounds of BENCH_REQUESTS (5,000) each; prints the median of each
 * round's ratio (1.0 = nothing but the bare dispatch). The receiver is a child process, so this process's CPU
 * time is the sender's alone.
 *
 *   node --import tsx bench/webhook-sender.bench.ts
 *
 * Measured when it was written: 1.63 before (the dispatch options spread from a cached target; the undici
 * controller kept until the attempt object was dropped), 1.13 after.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Agent } from 'undici';
import { webhookDeliveryHeaders } from '../src/contract/webhook-signature.ts';
import { createWebhookSender } from '../src/domain/webhooks/webhook-sender.ts';
import { BENCH_TRADE_PAYLOAD, bareDispatch, median } from './bench-support.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
const TIMEOUT_MS = 10_000;
const SECRET = 'bench-webhook-secret';
const NOTIFICATION_ID = '9b2d6f0e-8d5a-4c1e-9f3b-2a7c1d4e5f60';

async function receiver(): Promise<void> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  process.send!((server.address() as AddressInfo).port);
  // Ends with the bench: its channel closes.
  process.on('disconnect', () => process.exit(0));
}

/** The request a delivery makes: a fresh body and signatures each time, as the worker's `attempt` does. */
function signedRequest(): { rawBody: string; headers: Record<string, string> } {
  const rawBody = JSON.stringify(BENCH_TRADE_PAYLOAD);
  const headers = webhookDeliveryHeaders({
    payloadType: 'trade_status_changed',
    notificationId: NOTIFICATION_ID,
    timestampMs: Date.now(),
    rawBody,
    secret: SECRET,
  });
  return { rawBody, headers };
}

async function main(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['receiver'], { execArgv: ['--import', 'tsx'] });
  const [port] = (await once(child, 'message')) as [number];
  const origin = `http://127.0.0.1:${port}`;
  const url = `${origin}/hooks`;

  const sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
  // The baseline: undici's dispatch with a handler that keeps nothing, on an agent with the same timeouts.
  const agent = new Agent({ headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS, keepAliveTimeout: 4_000 });
  const bare = () => {
    const { rawBody, headers } = signedRequest();
    return bareDispatch(agent, { origin, path: '/hooks', body: rawBody, headers });
  };
  const viaSender = async () => {
    const { rawBody, headers } = signedRequest();
    const result = await sender.send({ url, rawBody, headers });
    if (result.outcome !== 'delivered') throw new Error(`sender: ${result.outcome} ${result.error}`);
    return result.statusCode;
  };

  /** CPU µs of this process per request, for REQUESTS requests CONCURRENCY at a time. */
  async function cpuPerRequest(send: () => Promise<unknown>): Promise<number> {
    let left = REQUESTS;
    const started = process.cpuUsage();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) await send();
      }),
    );
    const used = process.cpuUsage(started);
    return (used.user + used.system) / REQUESTS;
  }

  // Warm-up: both paths compiled and their connections open before anything is counted.
  await cpuPerRequest(bare);
  await cpuPerRequest(viaSender);
  const senderUs: number[] = [];
  const bareUs: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // The order alternates, so that a machine speeding up or slowing down through a pair favours neither.
    const pair = round % 2 === 0 ? [viaSender, bare] : [bare, viaSender];
    const [first, second] = [await cpuPerRequest(pair[0]!), await cpuPerRequest(pair[1]!)];
    const [s, b] = round % 2 === 0 ? [first, second] : [second, first];
    senderUs.push(s);
    bareUs.push(b);
    ratios.push(s / b);
  }
  console.log(
    `webhook sender: ${ROUNDS} rounds of ${REQUESTS} requests, concurrency ${CONCURRENCY}\n` +
      `  sender.send          ${median(senderUs).toFixed(1)} µs CPU per request (median)\n` +
      `  bare undici dispatch ${median(bareUs).toFixed(1)} µs CPU per request (median)\n` +
      `  ratio ${median(ratios).toFixed(2)} (median of the rounds' ratios; 1.0 = the bare dispatch)`,
  );
  await sender.close();
  await agent.close();
  child.disconnect();
}

await (process.argv[2] === 'receiver' ? receiver() : main());
