import { request as httpRequest } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { Registry } from 'prom-client';
import { Type, type Static } from 'typebox';
import { buildApp } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import { ZRN_PATTERN, TenantCode } from '../../src/contract/identifiers.ts';
import { AUTH_HEADERS, signRequest, signingMessage } from '../../src/contract/request-signature.ts';
import { forbidden, notFound } from '../../src/domain/errors.ts';
import { callerOf } from '../../src/http/request-context.ts';
import { DECIMAL_PATTERN } from '../../src/lib/decimal.ts';
import type { Runtime } from '../../src/main/runtime.ts';
import type { Db } from '../../src/store/database.ts';
import { SvcClient } from '../../src/sdk/client.ts';

/**
 * The real public stack (firewall, rate limit when wired, authentication, allow-list, body checks, schema
 * validation, error handler) with a few probe routes of the tests' own in the authenticated scope, built
 * from the same dependencies as a running service. Foundation tests use it to exercise the signature and
 * network layers before (and independently of) the product's own routes.
 */
export interface ProbeApp {
  app: FastifyInstance;
  url: string;
  /** An SDK client for this app with a platform's key. */
  client(key: { api_key: string; api_secret: string; passphrase: string }, now?: () => number): SvcClient;
  close(): Promise<void>;
}

const ProbeBody = Type.Object(
  {
    amount: Type.String({ pattern: DECIMAL_PATTERN, maxLength: 40 }),
    note: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);
const AccountParams = Type.Object({ zrn: Type.String({ pattern: ZRN_PATTERN }) });
const TenantParams = Type.Object({
  zrn: Type.String({ pattern: ZRN_PATTERN }),
  tenant: TenantCode,
});

/** The account, read scoped to the calling platform in SQL; another platform's account → 403, none → 404. */
async function ownedAccount(db: Db, platformCode: string, zrn: string) {
  const own = await db
    .selectFrom('customer_accounts')
    .select(['zrn', 'participant_code', 'account_label', 'status'])
    .where('platform_code', '=', platformCode)
    .where('zrn', '=', zrn)
    .executeTakeFirst();
  if (own) return own;
  const exists = await db
    .selectFrom('customer_accounts')
    .select('zrn')
    .where('zrn', '=', zrn)
    .executeTakeFirst();
  if (exists) throw forbidden(`account ${zrn} belongs to another platform`);
  throw notFound();
}

export const PROBE_THROW_MESSAGE = 'probe internals: password=hunter2 at /srv/secret/path.ts:42';

export function probeRoutes(db: Db) {
  return async (app: FastifyInstance) => {
    app.get('/probe/whoami', async (request) => ({
      message: {
        platform_code: callerOf(request).platformCode,
        ip: request.ip,
        route: request.raw.url,
        query: request.query,
      },
    }));

    app.post<{ Body: Static<typeof ProbeBody> }>(
      '/probe/echo',
      { schema: { body: ProbeBody } },
      async (request) => ({ message: { platform_code: callerOf(request).platformCode, body: request.body } }),
    );

    app.get<{ Params: Static<typeof AccountParams> }>(
      '/probe/accounts/:zrn',
      { schema: { params: AccountParams } },
      async (request) => ({
        message: await ownedAccount(db, callerOf(request).platformCode, request.params.zrn),
      }),
    );

    app.delete<{ Params: Static<typeof TenantParams> }>(
      '/probe/accounts/:zrn/tenants/:tenant',
      { schema: { params: TenantParams } },
      async (request, reply) => {
        await ownedAccount(db, callerOf(request).platformCode, request.params.zrn);
        return reply.code(202).send({});
      },
    );

    // A route that forgets the ownership rule: the ownership helper must catch it.
    app.get<{ Params: Static<typeof AccountParams> }>(
      '/probe/leaky/accounts/:zrn',
      { schema: { params: AccountParams } },
      async (request) => {
        const row = await db
          .selectFrom('customer_accounts')
          .select(['zrn', 'participant_code'])
          .where('zrn', '=', request.params.zrn)
          .executeTakeFirst();
        if (!row) throw notFound();
        return { message: row };
      },
    );

    app.get('/probe/throw', async () => {
      throw new Error(PROBE_THROW_MESSAGE);
    });

    // Waits at most 100 ms for a row lock held elsewhere: PostgreSQL's lock_not_available is transient (503).
    app.post<{ Params: { code: string } }>('/probe/lock/:code', async (request) => {
      await db.transaction().execute(async (trx) => {
        await sql`set local lock_timeout = '100ms'`.execute(trx);
        await trx
          .selectFrom('participants')
          .select('participant_code')
          .where('platform_code', '=', callerOf(request).platformCode)
          .where('participant_code', '=', request.params.code)
          .forUpdate()
          .execute();
      });
      return { message: {} };
    });
    // PostgreSQL failing a write for want of resources (53100 disk_full, 53200 out_of_memory), or in a read-only
    // transaction (25006), raised for real.
    app.post<{ Params: { sqlstate: string } }>('/probe/resources/:sqlstate', async (request) => {
      if (!/^(53[0-9]00|25006)$/.test(request.params.sqlstate))
        throw new Error('a class 53 SQLSTATE or 25006 only');
      await sql`do $$ begin raise exception 'probe' using errcode = ${sql.lit(request.params.sqlstate)}; end $$`.execute(
        db,
      );
      return { message: {} };
    });
  };
}

/** `config` replaces the runtime's (e.g. another SVC_TRUST_PROXY); everything else is the runtime's own. */
export async function startProbeApp(
  runtime: Runtime,
  options: { config?: Readonly<Config> } = {},
): Promise<ProbeApp> {
  if (!runtime.appDeps) throw new Error('the runtime serves no HTTP');
  const app = await buildApp(
    {
      ...runtime.appDeps,
      config: options.config ?? runtime.appDeps.config,
      metrics: new Registry(),
      extraPublicRoutes: probeRoutes(runtime.store.db),
    },
    { public: true, admin: false },
  );
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    app,
    url,
    client: (key, now) =>
      new SvcClient({
        baseUrl: url,
        apiKey: key.api_key,
        apiSecret: key.api_secret,
        passphrase: key.passphrase,
        now: now ?? (() => runtime.appDeps!.clock.now()),
        retry: false,
      }),
    close: () => app.close(),
  };
}

/** The four wire-contract §1 headers for a request, signed at `timestampS` (default: now). */
export function signedHeaders(
  key: { api_key: string; api_secret: string; passphrase: string },
  method: string,
  target: string,
  body?: string | Buffer,
  timestampS = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const timestamp = String(timestampS);
  return {
    [AUTH_HEADERS.apiKey]: key.api_key,
    [AUTH_HEADERS.signed]: signRequest(key.api_secret, signingMessage(timestamp, method, target, body)),
    [AUTH_HEADERS.timestamp]: timestamp,
    [AUTH_HEADERS.passphrase]: key.passphrase,
  };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed body when it is JSON, else undefined. */
  json: unknown;
}

/**
 * One HTTP request with node:http, exactly as given: the target is not re-encoded and a GET may carry a
 * body (fetch allows neither), which is what the signature tests need.
 */
export function rawRequest(
  baseUrl: string,
  method: string,
  target: string,
  /** A header given as a list is sent as that many lines. */
  options: { headers?: Record<string, string | string[]>; body?: string | Buffer } = {},
): Promise<RawResponse> {
  const base = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: base.hostname,
        port: base.port,
        method,
        path: target,
        headers: {
          ...(options.body !== undefined
            ? { 'content-length': String(Buffer.byteLength(options.body)) }
            : {}),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          if ((res.headers['content-type'] ?? '').includes('json')) {
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
          }
          resolve({ status: res.statusCode!, headers: res.headers, text, json });
        });
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}
