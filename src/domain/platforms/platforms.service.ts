import { randomBytes } from 'node:crypto';
import { sql, type Updateable } from 'kysely';
import { cidrKey, everyAddressIn } from '../../lib/cidr.ts';
import { Dec, isDecimalString, toDecimalString } from '../../lib/decimal.ts';
import { newParticipantCode, newPassphrase } from '../../lib/ids.ts';
import { hashPassphrase } from '../../lib/passphrase-hash.ts';
import { encryptSecret } from '../../lib/secret-box.ts';
import type { Trx } from '../../store/database.ts';
import type { PlatformsTable } from '../../store/tables/foundation.tables.ts';
import type { DomainDeps } from '../deps.ts';
import { invalid, notFound, pgErrorCode, PG_UNIQUE_VIOLATION } from '../errors.ts';
import * as repo from './platforms.repository.ts';

/** A deposit fee is at most the whole deposit. */
const MAX_BPS = 10_000;
/** Decimal places a deposit fee may have: a fund quote's JSON number holds them exactly (a ten-thousandth of a bp). */
const FEE_BPS_DECIMALS = 4;

export interface PlatformView {
  platform_code: string;
  name: string;
  ip_allowlist: string[];
  quote_expiry_ms: number;
  quote_expiry_default: boolean;
  quote_expiry_requests: boolean;
  deposit_fee_bps: string;
  created_at: number;
}

export interface CreatePlatformInput {
  name: string;
  ip_allowlist?: string[];
  quote_expiry_ms?: number;
  quote_expiry_requests?: boolean;
  deposit_fee_bps?: string;
}

export interface UpdatePlatformInput {
  name?: string;
  /** null: back to SVC_QUOTE_EXPIRY_MS. */
  quote_expiry_ms?: number | null;
  quote_expiry_requests?: boolean;
  deposit_fee_bps?: string;
}

export interface IssuedApiKey {
  api_key: string;
  api_secret: string;
  passphrase: string;
  platform_code: string;
  created_at: number;
}

export function createPlatformsService(deps: DomainDeps) {
  const { db, config } = deps;

  function view(row: NonNullable<Awaited<ReturnType<typeof repo.findPlatform>>>): PlatformView {
    return {
      platform_code: row.platform_code,
      name: row.name,
      ip_allowlist: row.ip_allowlist,
      quote_expiry_ms: row.quote_expiry_ms ?? config.quoteExpiryMs,
      // Which platforms a change of SVC_QUOTE_EXPIRY_MS moves (review: the two looked alike).
      quote_expiry_default: row.quote_expiry_ms === null,
      quote_expiry_requests: row.quote_expiry_requests,
      deposit_fee_bps: toDecimalString(row.deposit_fee_bps),
      created_at: row.created_at.getTime(),
    };
  }

  /** wire-contract §2.2: an empty allow-list means allow all, which only cert permits. */
  function checkAllowlist(cidrs: string[], field: string): string[] {
    // A range listed twice, however written, is a mistake to name, as payload types listed twice are (probe: both
    // were stored).
    const ranges = cidrs.map(cidrKey);
    const errors = cidrs.flatMap((c, i) =>
      ranges[i] === null
        ? [`${field}[${i}]: "${c}" is not an IP address or CIDR`]
        : ranges.indexOf(ranges[i]!) !== i
          ? [`${field}[${i}]: "${c.trim()}" is listed twice`]
          : [],
    );
    if (errors.length) throw invalid(...errors);
    if (cidrs.length === 0 && config.env === 'prod') {
      throw invalid(`${field}: must not be empty when SVC_ENV=prod (an empty allow-list allows every IP)`);
    }
    // The same allow-all written as a range; and the firewall lets in the union of every platform's list,
    // so it would open the service to every IP, not only this platform (review).
    if (config.env === 'prod') {
      const { alone, together } = everyAddressIn(cidrs);
      if (alone.length > 0)
        throw invalid(
          ...alone.map(
            (i) => `${field}[${i}]: "${cidrs[i]!.trim()}" allows every IP, which only SVC_ENV=cert permits`,
          ),
        );
      // Or in pieces (0.0.0.0/1 and 128.0.0.0/1).
      if (together)
        throw invalid(`${field}: together allows every ${together} address, which only SVC_ENV=cert permits`);
    }
    return cidrs.map((c) => c.trim());
  }

  function checkFeeBps(bps: string): void {
    if (!isDecimalString(bps)) throw invalid('deposit_fee_bps: must be a decimal string');
    // A fee above the whole deposit (10,000 bps) is a typo, not a fee.
    if (new Dec(bps).gt(MAX_BPS))
      throw invalid(`deposit_fee_bps: must be at most ${MAX_BPS} (100 % of the deposit)`);
    // A fund quote states the fee as a JSON number (the vendor's type): a finer fee was quoted rounded and charged
    // exact, so a deposit paid more than its quote said (review).
    if (new Dec(bps).decimalPlaces() > FEE_BPS_DECIMALS)
      throw invalid(`deposit_fee_bps: must have at most ${FEE_BPS_DECIMALS} decimal places`);
  }

  /**
   * Changes the platform's row (`also`: what goes with it, in the same transaction) and tells every instance, whose
   * caches hold it (network rules); 404 when there is no such platform.
   */
  async function changed(
    platformCode: string,
    set: Updateable<PlatformsTable>,
    also: (trx: Trx) => Promise<void> = async () => {},
  ): Promise<PlatformView> {
    const row = await db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('platforms')
        .set(set)
        .where('platform_code', '=', platformCode)
        .returningAll()
        .executeTakeFirst();
      if (!updated) throw notFound(`platform ${platformCode} not found`);
      await also(trx);
      await deps.cache.publish(trx, { type: 'platform_changed', platform_code: platformCode });
      return updated;
    });
    deps.cache.applyLocally({ type: 'platform_changed', platform_code: platformCode });
    return view(row);
  }

  async function requirePlatform(platformCode: string) {
    const row = await repo.findPlatform(db, platformCode);
    if (!row) throw notFound(`platform ${platformCode} not found`);
    return row;
  }

  return {
    view,

    async create(input: CreatePlatformInput): Promise<PlatformView> {
      const allowlist = checkAllowlist(input.ip_allowlist ?? [], 'ip_allowlist');
      if (input.deposit_fee_bps !== undefined) checkFeeBps(input.deposit_fee_bps);
      // Codes are random; a collision (with a platform or a participant) is retried with a new code.
      for (let attempt = 0; ; attempt++) {
        const code = newParticipantCode();
        try {
          const row = await db.transaction().execute(async (trx) => {
            const created = await trx
              .insertInto('platforms')
              .values({
                platform_code: code,
                name: input.name,
                ip_allowlist: allowlist,
                quote_expiry_ms: input.quote_expiry_ms ?? null,
                quote_expiry_requests: input.quote_expiry_requests ?? true,
                deposit_fee_bps: input.deposit_fee_bps ?? '0',
              })
              .returningAll()
              .executeTakeFirstOrThrow();
            // DESIGN §3: a platform is itself a participant, with the same 6-char code.
            await trx
              .insertInto('participants')
              .values({
                participant_code: code,
                platform_code: code,
                kind: 'platform',
                first_name: input.name,
                status: 'approved',
              })
              .execute();
            await deps.cache.publish(trx, { type: 'platform_changed', platform_code: code });
            return created;
          });
          deps.cache.applyLocally({ type: 'platform_changed', platform_code: code });
          return view(row);
        } catch (error) {
          if (pgErrorCode(error) === PG_UNIQUE_VIOLATION && attempt < 5) continue;
          throw error;
        }
      }
    },

    async get(platformCode: string): Promise<PlatformView> {
      return view(await requirePlatform(platformCode));
    },

    async list(): Promise<PlatformView[]> {
      return (await repo.listPlatforms(db)).map(view);
    },

    /**
     * `PATCH /admin/platforms/{code}`: changes the name, quote expiry (and whether RFQs may ask for their own window) or
     * deposit fee, for what comes next: a quote
     * given keeps its expiry, and a fund quote its fee (README Operator API). The platform's participant is named
     * as the platform is.
     */
    async update(platformCode: string, input: UpdatePlatformInput): Promise<PlatformView> {
      if (
        input.name === undefined &&
        input.quote_expiry_ms === undefined &&
        input.quote_expiry_requests === undefined &&
        input.deposit_fee_bps === undefined
      )
        throw invalid(
          'body: give at least one of name, quote_expiry_ms, quote_expiry_requests, deposit_fee_bps',
        );
      if (input.deposit_fee_bps !== undefined) checkFeeBps(input.deposit_fee_bps);
      return changed(
        platformCode,
        {
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.quote_expiry_ms !== undefined ? { quote_expiry_ms: input.quote_expiry_ms } : {}),
          ...(input.quote_expiry_requests !== undefined
            ? { quote_expiry_requests: input.quote_expiry_requests }
            : {}),
          ...(input.deposit_fee_bps !== undefined ? { deposit_fee_bps: input.deposit_fee_bps } : {}),
        },
        async (trx) => {
          if (input.name === undefined) return;
          await trx
            .updateTable('participants')
            .set({ first_name: input.name, updated_at: new Date(deps.clock.now()) })
            .where('participant_code', '=', platformCode)
            .where('kind', '=', 'platform')
            .execute();
        },
      );
    },

    async setAllowlist(platformCode: string, cidrs: string[]): Promise<PlatformView> {
      return changed(platformCode, { ip_allowlist: checkAllowlist(cidrs, 'cidrs') });
    },

    /** The secret and passphrase are returned once and stored only encrypted (secret) and hashed (passphrase). */
    async createApiKey(platformCode: string): Promise<IssuedApiKey> {
      await requirePlatform(platformCode);
      const apiKey = randomBytes(16).toString('hex');
      const apiSecret = randomBytes(32).toString('base64');
      const passphrase = newPassphrase();
      const row = await db
        .insertInto('api_keys')
        .values({
          api_key: apiKey,
          platform_code: platformCode,
          secret_ciphertext: encryptSecret(deps.secretKey, apiSecret),
          passphrase_hash: await hashPassphrase(passphrase),
        })
        .returning(['created_at'])
        .executeTakeFirstOrThrow();
      return {
        api_key: apiKey,
        api_secret: apiSecret,
        passphrase,
        platform_code: platformCode,
        created_at: row.created_at.getTime(),
      };
    },

    async listApiKeys(platformCode: string) {
      await requirePlatform(platformCode);
      return (await repo.listApiKeys(db, platformCode)).map((k) => ({
        api_key: k.api_key,
        platform_code: k.platform_code,
        created_at: k.created_at.getTime(),
        revoked_at: k.revoked_at ? k.revoked_at.getTime() : null,
        last_used_at: k.last_used_at ? k.last_used_at.getTime() : null,
      }));
    },

    /** Revocation takes effect on every instance: the cached key is dropped through the invalidation bus. */
    async revokeApiKey(apiKey: string) {
      const row = await db.transaction().execute(async (trx) => {
        const updated = await trx
          .updateTable('api_keys')
          .set({ revoked_at: sql<Date>`coalesce(revoked_at, now())` })
          .where('api_key', '=', apiKey)
          .returning(['api_key', 'platform_code', 'revoked_at'])
          .executeTakeFirst();
        if (!updated) throw notFound(`api key ${apiKey} not found`);
        await deps.cache.publish(trx, { type: 'api_key_revoked', api_key: apiKey });
        return updated;
      });
      deps.cache.applyLocally({ type: 'api_key_revoked', api_key: apiKey });
      return {
        api_key: row.api_key,
        platform_code: row.platform_code,
        revoked_at: row.revoked_at!.getTime(),
      };
    },
  };
}

export type PlatformsService = ReturnType<typeof createPlatformsService>;
