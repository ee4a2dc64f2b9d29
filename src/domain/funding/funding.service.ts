import { REVIVE_BATCH } from '../../jobs/cron.ts';
import { randomBytes } from 'node:crypto';
import type {
  AdminFundEvent,
  ClientAuthToken,
  DepositAddressOwner,
  FindDepositsQuery,
  ClientAuthTokenBody,
  FundEvent,
  FundQuote,
  FundRfqBody,
  FundTransactionsQuery,
  Jwks,
  RecordDepositBody,
} from '../../contract/funding.schemas.ts';
import { AMOUNT_DECIMALS } from '../../contract/quotes.schemas.ts';
import { MAX_EPOCH_MS } from '../../contract/responses.ts';
import type { DepositFundComplete } from '../../contract/webhook-payloads.ts';
import { Dec, Exact, toDecimalString } from '../../lib/decimal.ts';
import { splitDecimal, wholeBound, type RangeOp } from '../../lib/range-bound.ts';
import { newUuid } from '../../lib/ids.ts';
import { inOneSnapshot, type Executor, type Trx } from '../../store/database.ts';
import { enqueueJob, type EnqueueOptions } from '../../jobs/enqueue.ts';
import {
  requireApprovedCustomer,
  resolveAccountHolder,
  resolveDepositHolder,
  type AccountHolder,
} from '../accounts/account-holder.ts';
import { applyMovements } from '../balances/balances.service.ts';
import type { DomainDeps } from '../deps.ts';
import {
  conflict,
  DomainError,
  faultsBeforeRefusal,
  forbidden,
  invalid,
  notFound,
  pgErrorCode,
  PG_UNIQUE_VIOLATION,
  unauthenticated,
} from '../errors.ts';
import { findParticipant } from '../participants/participants.repository.ts';
import { findPlatform } from '../platforms/platforms.repository.ts';
import { findPrice } from '../prices/prices.service.ts';
import { recordNotification } from '../webhooks/outbox.ts';
import {
  createClientTokenSigner,
  signingAlgorithm,
  TOKEN_ISSUER,
  type ClientTokenClaims,
  type ClientTokenSigner,
} from './client-token-signer.ts';
import {
  canonicalDepositAddress,
  canonicalTransactionId,
  depositAddressKey,
  deriveDepositAddress,
  transactionIdForms,
} from './deposit-addresses.ts';
import {
  FUND_ASSETS,
  FUND_NETWORKS,
  parseFundAsset,
  QUOTED_CURRENCY,
  type ParsedFundAsset,
} from './fund-assets.ts';
import * as repo from './funding.repository.ts';
import { pageFields, pageOf } from '../paging.ts';
import { ACCOUNTLESS_TOKEN_PERMISSIONS, FUNDING_PERMISSION } from '../../contract/wire-values.ts';

/**
 * Account funding (issue 6): SDK tokens (spec 4.3, wire-contract §6), fund quotes with deposit addresses
 * (spec 4.4), deposits recorded as fund events (spec 2.2) with their balance credit and webhook, the funding
 * reference (spec 2.3) and the expiry of funding sessions without a deposit (wire-contract §5).
 */
export const EXPIRE_SESSION_TASK = 'funding.expire_session';
/** The recurring sweep that gives stalled session expiries their job again (funding.jobs.ts). */
export const REVIVE_EXPIRIES_TASK = 'funding.revive_stalled_expiries';
/** wire-contract §6: tokens live one hour. */
export const CLIENT_TOKEN_LIFETIME_MS = 60 * 60_000;
/** The hourly job that purges SDK tokens a day past their expiry (migration 0041). */
export const PURGE_TOKENS_TASK = 'funding.purge_expired_tokens';
/** How long an expired SDK token's row is kept (its revocation no longer matters once it has expired). */
export const CLIENT_TOKEN_RETENTION_MS = 24 * 60 * 60_000;
const PURGE_BATCH = 5_000;
/** wire-contract §5: the reason an expired funding session is reported with. */
export const SESSION_EXPIRED_REASON = 'deposit session has expired.';
const DEFAULT_ACCOUNT_LABEL = 'general';
const BPS = 10_000;

const emptyIfNull = (value: string | null) => (value === null ? '' : toDecimalString(value));

export function fundEventView(row: repo.FundEventRow): FundEvent {
  return {
    participant_code: row.participant_code,
    fund_asset: row.fund_asset,
    rate: toDecimalString(row.rate),
    quoted_currency: row.quoted_currency,
    source_address: row.source_address,
    deposit_address: row.deposit_address ?? '',
    quantity: toDecimalString(row.quantity),
    notional: toDecimalString(row.notional),
    success: row.success,
    status_reason: row.status_reason,
    fund_timestamp: row.fund_timestamp.getTime(),
    deposit_timestamp: row.deposit_timestamp.getTime(),
    transaction_id: row.transaction_id ?? '',
    account_label: row.account_label,
    fund_id: row.fund_id,
    is_first_deposit: row.is_first_deposit,
    raw_fee_bps: emptyIfNull(row.raw_fee_bps),
    deposit_fee_bps: emptyIfNull(row.deposit_fee_bps),
    raw_fee_notional: emptyIfNull(row.raw_fee_notional),
    deposit_fee_notional: emptyIfNull(row.deposit_fee_notional),
    deposited_asset: row.deposited_asset,
    reference_id: row.reference_id,
  };
}

async function recordFundNotification(trx: Executor, row: repo.FundEventRow) {
  const event = fundEventView(row);
  const payload: DepositFundComplete = row.success ? event : { ...event, reason: row.status_reason };
  await recordNotification(trx, {
    platformCode: row.platform_code,
    payloadType: 'deposit_fund_complete',
    resourceKey: `fund:${row.fund_id}`,
    payload,
  });
}

/**
 * How far back the sweep looks: sessions with a deposit are never marked, so an unbounded look would read every
 * one of them at each run. A week is far beyond the expiry job's own retries (10 attempts, hours).
 */
const REVIVE_WINDOW_MS = 7 * 24 * 3_600_000;

/** A session's expiry job, keyed by the session: added again, it replaces the one still waiting. */
function enqueueExpiry(
  db: Executor,
  sessionId: string,
  when: Pick<EnqueueOptions, 'runAt' | 'delayMs'>,
): Promise<void> {
  return enqueueJob(
    db,
    EXPIRE_SESSION_TASK,
    { session_id: sessionId },
    { ...when, jobKey: `funding-expiry:${sessionId}`, maxAttempts: 10 },
  );
}

function supportedAssetOrProblem(fundAsset: string, field = 'fund_asset'): ParsedFundAsset | string {
  return (
    parseFundAsset(fundAsset) ??
    `${field}: ${fundAsset} is not supported (supported: ${FUND_ASSETS.join(', ')})`
  );
}

export function createFundingService(deps: DomainDeps) {
  const { db, clock, config } = deps;
  const addressKey = depositAddressKey(deps.secretKey);
  // Fail at start on a key that cannot sign our tokens, not on the first token request.
  signingAlgorithm(deps.jwtPrivateKeyPem);
  // The key is parsed once, on first use (createServices is synchronous; importing a key is not).
  let signer: Promise<ClientTokenSigner> | null = null;
  const tokenSigner = () =>
    (signer ??= createClientTokenSigner(deps.jwtPrivateKeyPem, deps.jwtPreviousKeyPem));

  /** wire-contract §6: stable per (participant, label, network), unique across the service. */
  async function depositAddressFor(
    trx: Trx,
    platformCode: string,
    participantCode: string,
    accountLabel: string,
    asset: ParsedFundAsset,
  ): Promise<string> {
    const { network, format } = asset.network;
    for (let nonce = 0; nonce < 8; nonce++) {
      const existing = await repo.findAddressFor(trx, platformCode, participantCode, accountLabel, network);
      if (existing) return existing.address;
      const address = deriveDepositAddress(addressKey, format, {
        network,
        participantCode,
        accountLabel,
        nonce,
      });
      await repo.insertAddressIfAbsent(trx, {
        address,
        platform_code: platformCode,
        participant_code: participantCode,
        account_label: accountLabel,
        network,
      });
      // Read back: a concurrent request may have claimed the slot, or (never expected) the address belongs to
      // another slot, in which case the next nonce derives another.
    }
    throw new Error(`could not allocate a ${network} deposit address for ${participantCode}`);
  }

  async function openSession(
    trx: Trx,
    input: {
      platformCode: string;
      participantCode: string;
      accountLabel: string;
      source: 'client_auth_token' | 'fund_rfq';
      referenceId: string;
      fundAsset?: string;
      tokenJti?: string;
      /** A fund quote's rate, deposit fee and expiry (epoch ms): honoured for the deposits it funds until then. */
      quote?: { rate: string; feeBps: string; expiresAt: number };
    },
  ) {
    // Deposits take the participant's funding lock too, and look for the most recent session opened at or
    // before them (wire-contract §6): holding it from before the opening time is read until the commit,
    // a session is either seen by a deposit, or opened after it. Without it, a deposit recorded while the
    // session's transaction was still open missed a session opened before it.
    await repo.lockParticipantFunding(trx, input.participantCode);
    const openedAt = clock.now();
    const sessionId = newUuid();
    // wire-contract §5, §6: every funding session, from either entry point, expires when no deposit arrives.
    const expiresAt = openedAt + config.fundingSessionExpiryMs;
    await repo.insertSession(trx, {
      session_id: sessionId,
      platform_code: input.platformCode,
      participant_code: input.participantCode,
      account_label: input.accountLabel,
      source: input.source,
      reference_id: input.referenceId,
      fund_asset: input.fundAsset ?? null,
      token_jti: input.tokenJti ?? null,
      opened_at: new Date(openedAt),
      expires_at: new Date(expiresAt),
      quoted_rate: input.quote?.rate ?? null,
      quoted_fee_bps: input.quote?.feeBps ?? null,
      quote_expires_at: input.quote ? new Date(input.quote.expiresAt) : null,
    });
    // wire-contract §5: a session with no deposit in the expiry time is reported expired; the job commits
    // with the session.
    await enqueueExpiry(trx, sessionId, { runAt: new Date(expiresAt) });
    return sessionId;
  }

  /**
   * Reports the session expired (wire-contract §5) unless it was already, has no expiry, or had a deposit by its
   * expiry: a failed fund event with reason `deposit session has expired.` and the session's reference, its
   * notification, and the session marked, in `trx`, which holds its row lock. Null when there is nothing to report.
   */
  async function reportExpiry(
    trx: Trx,
    session: repo.FundingSessionRow,
    /** The event's fund_timestamp: a deposit that reports it passes its own, so the expiry is not the later. */
    now = clock.now(),
  ): Promise<repo.FundEventRow | null> {
    const expiresAt = session.expires_at;
    if (!expiresAt || session.expired_at) return null;
    if (await repo.sessionHasDepositBy(trx, session.session_id, expiresAt)) return null;
    // A fund quote session showed the end customer its deposit address (spec 4.4): the expiry names it.
    // A token session has no asset, hence no address.
    const asset = session.fund_asset ? parseFundAsset(session.fund_asset) : null;
    const address = asset
      ? await repo.findAddressFor(
          trx,
          session.platform_code,
          session.participant_code,
          session.account_label,
          asset.network.network,
        )
      : undefined;
    const row = await repo.insertFundEvent(trx, {
      fund_id: newUuid(),
      platform_code: session.platform_code,
      kind: 'session_expired',
      participant_code: session.participant_code,
      owner_participant_code: null,
      account_label: session.account_label,
      fund_asset: session.fund_asset ?? '',
      deposited_asset: '',
      // The rate a fund quote showed, for the platform's reconciliation (nothing deposited: notional 0).
      rate: session.quoted_rate ?? '0',
      quoted_currency: QUOTED_CURRENCY,
      source_address: '',
      deposit_address: address?.address ?? null,
      quantity: '0',
      notional: '0',
      success: false,
      status_reason: SESSION_EXPIRED_REASON,
      fund_timestamp: new Date(now),
      deposit_timestamp: expiresAt,
      transaction_id: null,
      is_first_deposit: false,
      reference_id: session.reference_id,
      session_id: session.session_id,
    });
    await repo.markSessionExpired(trx, session.session_id, new Date(now));
    await recordFundNotification(trx, row);
    return row;
  }

  async function platformFeeBps(executor: Executor, platformCode: string): Promise<Dec> {
    const platform = await findPlatform(executor, platformCode);
    return new Dec(platform?.deposit_fee_bps ?? '0');
  }

  return {
    /** GET /.well-known/jwks.json: the public keys that verify SDK tokens (the signing one, and a previous one). */
    async jwks(): Promise<Jwks> {
      return (await tokenSigner()).jwks as Jwks;
    },

    /**
     * POST /client_auth_token (spec 4.3): a JWT for the participant (approved, of the calling platform, or a
     * tenant of the account); with `fwc` it opens a funding session carrying `reference_id` (spec 2.3).
     */
    async issueClientToken(platformCode: string, body: ClientAuthTokenBody): Promise<ClientAuthToken> {
      const accountLabel = body.deposit_details?.account_label ?? DEFAULT_ACCOUNT_LABEL;
      const issuedAt = clock.now();
      const jti = newUuid();
      const claims: ClientTokenClaims = {
        participant_code: body.participant_code,
        platform_code: platformCode,
        permissions: body.permissions,
        jti,
        iat: Math.floor(issuedAt / 1000),
        exp: Math.floor((issuedAt + CLIENT_TOKEN_LIFETIME_MS) / 1000),
        iss: TOKEN_ISSUER,
      };
      const funding = body.permissions.includes(FUNDING_PERMISSION);
      const sessionId = await db.transaction().execute(async (trx) => {
        // A token for experiences that act on an account is checked as any request naming it: the participant must
        // act for it (a former tenant 403, a locked holder's tenant 400). One for experiences that act on none is
        // checked for the participant alone (review: a former tenant was refused a profile token with a 403 about
        // the account it had left).
        if (body.permissions.every((permission) => ACCOUNTLESS_TOKEN_PERMISSIONS.has(permission))) {
          await requireApprovedCustomer(trx, platformCode, body.participant_code);
        } else {
          // The account the deposits fund or the trades move (deposit_details' label, else the default) and the one
          // a withdrawal is taken from: naming another label for the withdrawal did not leave the default's
          // unchecked for buying or selling (review).
          const labels = new Set([accountLabel]);
          const withdrawnFrom = body.withdrawal_details?.account_label;
          if (withdrawnFrom !== undefined) labels.add(withdrawnFrom);
          for (const label of labels)
            await resolveAccountHolder(trx, platformCode, body.participant_code, label);
        }
        await repo.insertClientToken(trx, {
          jti,
          platform_code: platformCode,
          participant_code: body.participant_code,
          permissions: body.permissions,
          issued_at: new Date(issuedAt),
          expires_at: new Date(claims.exp * 1000),
        });
        if (!funding) return null;
        return openSession(trx, {
          platformCode,
          participantCode: body.participant_code,
          accountLabel,
          source: 'client_auth_token',
          referenceId: body.reference_id ?? '',
          tokenJti: jti,
        });
      });
      const token = await (await tokenSigner()).sign(claims);
      return sessionId ? { token, deposit_intent_id: sessionId } : { token };
    },

    /**
     * POST /revoke_auth_token: idempotent. A token that is not this service's, or is another platform's, is
     * unknown (400): wire-contract §9 treats what the body names and is not the caller's as unknown, which
     * also tells the caller nothing about another platform's tokens.
     */
    async revokeClientToken(platformCode: string, token: string): Promise<void> {
      const claims = await (await tokenSigner()).verifySignature(token);
      const row = claims ? await repo.findClientToken(db, claims.jti) : undefined;
      // A token of ours whose row was purged (a day past its expiry) is revoked already, as far as anyone can
      // tell: it opens nothing. Revoked again, it answers as the revocation of any expired token does.
      if (claims && !row && claims.platform_code === platformCode && claims.exp * 1000 <= clock.now()) return;
      if (!claims || !row || row.platform_code !== platformCode)
        throw invalid('token: is not a token issued by this service');
      await repo.revokeClientToken(db, platformCode, row.jti, new Date(clock.now()));
    },

    /**
     * What an SDK-facing endpoint checks before honouring a token: our signature and key id, the claims,
     * not expired, issued by us and not on the revocation list.
     */
    async verifyClientToken(token: string): Promise<ClientTokenClaims> {
      const claims = await (await tokenSigner()).verifySignature(token);
      if (!claims) throw unauthenticated('token: invalid signature or claims');
      if (claims.exp * 1000 <= clock.now()) throw unauthenticated('token: expired');
      const row = await repo.findClientToken(db, claims.jti);
      if (!row || row.platform_code !== claims.platform_code) throw unauthenticated('token: unknown');
      if (row.revoked_at) throw unauthenticated('token: revoked');
      return claims;
    },

    /**
     * POST /fund/rfq (spec 4.4): the rate, fee terms and the deposit address to show the end customer; opens
     * a funding session whose reference is `client_fund_id` (spec 2.3 rule 2).
     */
    async requestFundQuote(platformCode: string, body: FundRfqBody): Promise<FundQuote> {
      const accountLabel = body.account_label ?? DEFAULT_ACCOUNT_LABEL;
      const asset = supportedAssetOrProblem(body.fund_asset);
      // wire-contract §9: the input's faults (400) before a refusal of who acts (a former tenant's 403).
      const holder = await faultsBeforeRefusal(
        resolveAccountHolder(db, platformCode, body.participant_code, accountLabel),
      );
      const problems = [...holder.problems];
      let rate: string | null = null;
      if (typeof asset === 'string') problems.push(asset);
      else {
        rate = await findPrice(db, asset.asset, QUOTED_CURRENCY);
        // The price source is the operator's (DESIGN §1). Without a price there is no rate to quote: a 400
        // naming the field, as /liquidity/rfq answers, not a 503 that has SDKs retry a configuration gap.
        if (rate === null) problems.push(`fund_asset: no ${asset.asset}/${QUOTED_CURRENCY} price`);
      }
      if (problems.length > 0 || typeof asset === 'string' || rate === null) throw invalid(...problems);
      if (holder.refusal) throw holder.refusal;
      const platform = await findPlatform(db, platformCode);
      const expiryTimestamp = clock.now() + (platform?.quote_expiry_ms ?? config.quoteExpiryMs);
      const feeBps = toDecimalString(platform?.deposit_fee_bps ?? '0');
      const referenceId = body.client_fund_id ?? '';
      const { address, sessionId } = await db.transaction().execute(async (trx) => {
        const address = await depositAddressFor(
          trx,
          platformCode,
          body.participant_code,
          accountLabel,
          asset,
        );
        await repo.setLastFundAsset(trx, address, asset.fundAsset);
        const sessionId = await openSession(trx, {
          platformCode,
          participantCode: body.participant_code,
          accountLabel,
          source: 'fund_rfq',
          referenceId,
          fundAsset: asset.fundAsset,
          quote: { rate: toDecimalString(rate), feeBps, expiresAt: expiryTimestamp },
        });
        return { address, sessionId };
      });
      return {
        request_id: sessionId,
        participant_code: body.participant_code,
        fund_asset: asset.fundAsset,
        rate: toDecimalString(rate),
        quoted_currency: QUOTED_CURRENCY,
        expiry_timestamp: expiryTimestamp,
        deposit_address: address,
        ...(body.account_label !== undefined ? { account_label: body.account_label } : {}),
        // The vendor's type for this one is a number; the fee terms of a fund event are decimal strings.
        deposit_fee_bps: Number(feeBps),
        deposit_fee_type: 'flat',
        first_deposit_fee_floor: '0',
        subsequent_deposit_fee_floor: '0',
        reference_id: referenceId,
      };
    },

    /**
     * POST /admin/deposits: an on-chain deposit to one of our addresses becomes a fund event (spec 2.2), in
     * one transaction with its balance credit and the deposit_fund_complete notification. The same
     * transaction to the same address is recorded once: a replay returns the first event (`created: false`).
     */
    async recordDeposit(input: RecordDepositBody): Promise<{ event: FundEvent; created: boolean }> {
      const arrivedAt = clock.now();
      const success = input.success ?? true;
      const problems: string[] = [];
      if (new Dec(input.quantity).lte(0)) problems.push('quantity: must be greater than zero');
      if (!success && input.reason === undefined) problems.push('reason: is required when success is false');
      if (success && input.reason !== undefined)
        problems.push('reason: is only allowed when success is false');
      if (input.deposit_timestamp !== undefined && input.deposit_timestamp > arrivedAt)
        problems.push('deposit_timestamp: must not be in the future');
      const address = await repo.findAddress(db, canonicalDepositAddress(input.deposit_address));
      let asset: ParsedFundAsset | undefined;
      if (address) {
        const network = FUND_NETWORKS[address.network]!;
        const named = input.fund_asset ?? address.last_fund_asset ?? network.nativeAsset;
        const parsed = supportedAssetOrProblem(named);
        if (typeof parsed === 'string') problems.push(parsed);
        else if (parsed.network.network !== address.network)
          problems.push(`fund_asset: ${named} is not on the ${address.network} network of deposit_address`);
        else asset = parsed;
      }
      if (problems.length > 0) throw invalid(...problems);
      if (!address || !asset) throw notFound('deposit_address: not a deposit address of this service');

      // A generated id is written as the network writes a hash too, so that a report of it again (with the
      // id this answer gives) finds the deposit.
      const transactionId = canonicalTransactionId(
        address.network,
        input.transaction_id ?? randomBytes(32).toString('hex'),
      );
      const replay = async (executor: Executor) => {
        const existing = await repo.findDepositByTransaction(executor, address.address, transactionId);
        if (!existing) return null;
        // The same report again (an indexer retrying) replays; other data under the same id is a conflict.
        // (An asset the report did not name was inferred, and the inference may have moved on since.)
        // A report of success after one of failure (or the reverse) is not a replay either (migration 0018;
        // not known for deposits recorded before it).
        if (existing.reported_success !== null && existing.reported_success !== success)
          throw conflict(
            `transaction_id: ${transactionId} is already recorded for this address as ${existing.reported_success ? 'successful' : `failed (${existing.status_reason})`}`,
          );
        // What the report did not name cannot differ; a source address is compared as an address (an EVM
        // or bech32 one in any letter case is one address).
        // Each that differs named with what is recorded (review: "other data" sent support to the database).
        const differing = [
          !new Dec(existing.quantity).equals(input.quantity) &&
            `quantity ${toDecimalString(existing.quantity)}`,
          input.fund_asset !== undefined &&
            existing.fund_asset !== input.fund_asset &&
            `fund_asset ${existing.fund_asset}`,
          input.source_address !== undefined &&
            canonicalDepositAddress(existing.source_address) !==
              canonicalDepositAddress(input.source_address) &&
            `source_address ${JSON.stringify(existing.source_address)}`,
          input.deposit_timestamp !== undefined &&
            existing.deposit_timestamp.getTime() !== input.deposit_timestamp &&
            `deposit_timestamp ${existing.deposit_timestamp.getTime()}`,
          input.reason !== undefined &&
            existing.status_reason !== input.reason &&
            `reason ${JSON.stringify(existing.status_reason)}`,
        ].filter((field) => field !== false);
        if (differing.length > 0)
          throw conflict(
            `transaction_id: ${transactionId} is already recorded for this address with other data (recorded: ${differing.join(', ')}; svc deposits find --tx shows it)`,
          );
        return { event: fundEventView(existing), created: false };
      };

      try {
        return await db.transaction().execute(async (trx) => {
          await repo.lockParticipantFunding(trx, address.participant_code);
          const replayed = await replay(trx);
          if (replayed) return replayed;
          // Stamped at its arrival, unless an expiry of the participant's was reported while it waited for the
          // lock (the job took it first): that report said no deposit had come by then, so the deposit is stamped
          // at it, not within the session it reported expired (review: credited inside it, after "expired").
          // Waiting behind anything else (another deposit, a session being opened) moves nothing: a deposit that
          // came before a fund quote's expiry keeps its rate.
          const reportedMeanwhile = await repo.latestExpiryReportedSince(
            trx,
            address.platform_code,
            address.participant_code,
            {
              at: new Date(arrivedAt),
              openedAfter: new Date(arrivedAt - REVIVE_WINDOW_MS - config.fundingSessionExpiryMs),
            },
          );
          // A ms after the report: a job run at the expiry's very ms reports it then, and a deposit at that ms
          // counts as within the session (review).
          const now = Math.max(arrivedAt, (reportedMeanwhile?.getTime() ?? -Infinity) + 1);
          const depositTimestamp = input.deposit_timestamp ?? now;

          // Whose balance the deposit funds: the holder, or the primary holder when a tenant funded it
          // (issue 5). When the participant may no longer act for the account (not approved, a former tenant)
          // the deposit is recorded as failed and credits nothing, for the operator to resolve.
          let holder: AccountHolder | null = null;
          let statusReason = success ? '' : input.reason!;
          if (success) {
            try {
              holder = await resolveDepositHolder(
                trx,
                address.platform_code,
                address.participant_code,
                address.account_label,
                new Date(depositTimestamp),
              );
            } catch (error) {
              if (!(error instanceof DomainError) || error.code === 'unavailable') throw error;
              statusReason = error.messages.join('; ').replace(/^participant_code: /, '');
            }
          }
          const credited = holder !== null;

          // wire-contract §6: the reference of the most recent session at or before the deposit.
          const latest = await repo.findLatestSession(
            trx,
            address.platform_code,
            address.participant_code,
            new Date(depositTimestamp),
          );
          // Taken with the row lock the expiry job takes: a deposit recorded before the session's expiry is
          // reported stops that report. One recorded later still carries the session's reference (spec 2.3.3:
          // "even if the user did not complete a deposit during the session"), even when its deposit_timestamp
          // falls within the session: the expiry event already said no deposit had been reported by then.
          const session = latest ? await repo.lockSession(trx, latest.session_id) : undefined;
          // Sessions of the participant that expired before this deposit and that the expiry job has not reported
          // yet are reported now, first, oldest first, as the job would have (those with no deposit by their
          // expiry), at this deposit's time: so that a reference's events come in the order they happened, expired
          // and then this deposit with its reference (review: the credit came first, and a platform that follows
          // the reference saw "expired" last, of a deposit that was credited; and so for an older session of the
          // same reference, a quote made again for the same order).
          const unreported = await repo.lockUnreportedExpiries(
            trx,
            address.platform_code,
            address.participant_code,
            { since: new Date(depositTimestamp - REVIVE_WINDOW_MS), before: new Date(depositTimestamp) },
          );
          for (const expired of unreported) await reportExpiry(trx, expired, now);
          // The rate and fee a fund quote promised for a deposit in its asset and label by its expiry, even if
          // other sessions were opened since (a quote for another asset, an SDK token); otherwise the price
          // source's rate and the platform's fee now.
          const quote = await repo.findHonouredFundQuote(
            trx,
            address.platform_code,
            address.participant_code,
            address.account_label,
            asset.fundAsset,
            new Date(depositTimestamp),
          );
          const rate = quote?.quoted_rate ?? (await findPrice(trx, asset.asset, QUOTED_CURRENCY));
          if (rate === null)
            throw conflict(
              `no ${asset.asset}/${QUOTED_CURRENCY} price in the price source: set one and retry`,
            );

          // Exact: notional = quantity × rate to the last digit (wire-contract §9), which Dec's 60 significant
          // digits do not hold for an 18-decimal quantity at an 18-decimal rate.
          const quantity = new Exact(input.quantity);
          const notional = quantity.times(rate);
          const feeBps =
            quote?.quoted_fee_bps != null
              ? new Dec(quote.quoted_fee_bps)
              : await platformFeeBps(trx, address.platform_code);
          const charged = credited && feeBps.gt(0);
          // The fee rounds up and the credit down to AMOUNT_DECIMALS, in the house's favour as every other
          // amount (README "Amounts"): exact, they carried up to 40 decimals into a balance, which no quote or
          // trade could then move to the last digit (review).
          const up = (value: InstanceType<typeof Exact>) =>
            value.toDecimalPlaces(AMOUNT_DECIMALS, Exact.ROUND_CEIL);
          // At most the whole notional (10,000 bps), itself rounded up, so the fee has 18 decimals at most.
          const feeNotional = charged
            ? Exact.min(up(notional.times(feeBps).dividedBy(BPS)), up(notional))
            : null;
          const isFirstDeposit =
            credited &&
            !(await repo.hasSuccessfulDeposit(trx, address.platform_code, address.participant_code));
          const fundId = newUuid();
          const row = await repo.insertFundEvent(trx, {
            fund_id: fundId,
            platform_code: address.platform_code,
            kind: 'deposit',
            participant_code: address.participant_code,
            owner_participant_code: holder?.ownerParticipantCode ?? null,
            account_label: address.account_label,
            fund_asset: asset.fundAsset,
            deposited_asset: asset.asset,
            rate: new Dec(rate).toFixed(),
            quoted_currency: QUOTED_CURRENCY,
            source_address: input.source_address ?? '',
            deposit_address: address.address,
            quantity: quantity.toFixed(),
            notional: notional.toFixed(),
            success: credited,
            reported_success: success,
            status_reason: statusReason,
            fund_timestamp: new Date(now),
            deposit_timestamp: new Date(depositTimestamp),
            transaction_id: transactionId,
            is_first_deposit: isFirstDeposit,
            raw_fee_bps: charged ? feeBps.toFixed() : null,
            deposit_fee_bps: charged ? feeBps.toFixed() : null,
            raw_fee_notional: feeNotional?.toFixed() ?? null,
            deposit_fee_notional: feeNotional?.toFixed() ?? null,
            reference_id: session?.reference_id ?? '',
            session_id: session?.session_id ?? null,
          });
          if (holder) {
            // The deposit is converted at `rate` into the quoted currency (spec 2.2 fund_timestamp) and the
            // account is credited the notional less the deposit fee; applyMovements records
            // account_balance.changed in this transaction.
            const credit = notional
              .minus(feeNotional ?? 0)
              .toDecimalPlaces(AMOUNT_DECIMALS, Exact.ROUND_FLOOR);
            if (credit.gt(0)) {
              await applyMovements(trx, { runId: fundId, runType: 'deposit', timestamp: now }, [
                {
                  platformCode: address.platform_code,
                  participantCode: holder.ownerParticipantCode,
                  accountLabel: holder.accountLabel,
                  asset: QUOTED_CURRENCY,
                  change: credit.toFixed(),
                  movementType: 'deposit',
                },
              ]);
            }
          }
          await recordFundNotification(trx, row);
          return { event: fundEventView(row), created: true };
        });
      } catch (error) {
        // A concurrent report of the same transaction won the unique constraint: answer with its event.
        if (pgErrorCode(error) === PG_UNIQUE_VIOLATION) {
          const replayed = await replay(db);
          if (replayed) return replayed;
        }
        throw error;
      }
    },

    /**
     * Deletes the SDK tokens that expired more than CLIENT_TOKEN_RETENTION_MS ago, in batches; returns how many.
     * Every POST /client_auth_token writes one, so without it the table only grows (soak probe). The funding
     * sessions they opened stay, their token id cleared (migration 0041). Tokens held by another transaction then
     * are left for the next run.
     */
    async purgeExpiredTokens(): Promise<number> {
      const before = new Date(clock.now() - CLIENT_TOKEN_RETENTION_MS);
      let purged = 0;
      let after: repo.TokenPurgePlace | null = null;
      for (;;) {
        const step = await db
          .transaction()
          .execute((trx) => repo.purgeClientTokensStep(trx, before, after, PURGE_BATCH));
        purged += step.deleted;
        if (step.read < PURGE_BATCH) return purged;
        after = step.last;
      }
    },

    /**
     * The recurring sweep (funding.jobs.ts): a session whose expiry passed more than `stalledAfterMs` ago (within
     * REVIVE_WINDOW_MS) without being reported, and without a deposit, has its expiry job added again, due now
     * with its attempts afresh: a job that used up its attempts left it unreported for good (review). Keyed, the
     * job replaces one still waiting. Returns how many were revived.
     */
    async reviveStalledExpiries(stalledAfterMs: number): Promise<number> {
      const now = clock.now();
      const stalled = await db
        .selectFrom('funding_sessions as s')
        .select('s.session_id')
        .where('s.expired_at', 'is', null)
        .where('s.expires_at', '<', new Date(now - stalledAfterMs))
        .where('s.expires_at', '>', new Date(now - REVIVE_WINDOW_MS))
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('fund_events as e')
                .select('e.fund_id')
                .whereRef('e.session_id', '=', 's.session_id')
                .where('e.kind', '=', 'deposit')
                .whereRef('e.deposit_timestamp', '<=', 's.expires_at'),
            ),
          ),
        )
        .orderBy('s.expires_at')
        .limit(REVIVE_BATCH)
        .execute();
      for (const { session_id } of stalled) await enqueueExpiry(db, session_id, { delayMs: 0 });
      return stalled.length;
    },

    /**
     * The job of wire-contract §5: a funding session (SDK token with `fwc`, or fund quote) with no deposit by
     * its expiry becomes a failed fund event with reason `deposit session has expired.` and the session's
     * reference (`reference_id`, resp. `client_fund_id`). Runs at most once per session.
     */
    async expireSession(sessionId: string): Promise<FundEvent | null> {
      const found = await repo.findSession(db, sessionId);
      // A fund quote session opened before fund quote sessions expired has no expiry time: never reported.
      if (!found || found.expired_at || !found.expires_at) return null;
      // The queue runs the job by the database's clock, the expiry is by the service's: a job run early (a clock
      // behind the database's) waits for the expiry rather than report a session that still runs (review).
      const early = found.expires_at.getTime() - clock.now();
      if (early > 0) {
        await enqueueExpiry(db, sessionId, { delayMs: early });
        return null;
      }
      return db.transaction().execute(async (trx) => {
        await repo.lockParticipantFunding(trx, found.participant_code);
        const session = await repo.lockSession(trx, sessionId);
        const row = session ? await reportExpiry(trx, session) : null;
        return row && fundEventView(row);
      });
    },

    /**
     * GET /fund/transactions (spec 4.5): the platform's fund events, newest first. A filter naming another
     * platform's participant, fund event, address or session → 403 (wire-contract §9, as for a path).
     */
    async listFundTransactions(platformCode: string, query: FundTransactionsQuery) {
      if (query.deposit_address !== undefined)
        query = { ...query, deposit_address: canonicalDepositAddress(query.deposit_address) };
      // The input's faults (400) before the filters' owners (403), as wire-contract §9 orders them (review).
      const bounds = {
        deposit_timestamp_gte: depositTimestampBound(query, 'gte'),
        deposit_timestamp_gt: depositTimestampBound(query, 'gt'),
        deposit_timestamp_lt: depositTimestampBound(query, 'lt'),
        deposit_timestamp_lte: depositTimestampBound(query, 'lte'),
      };
      const owners = await Promise.all([
        query.participant_code
          ? findParticipant(db, query.participant_code).then((p) => p?.platform_code)
          : undefined,
        query.fund_id ? repo.platformOfFundEvent(db, query.fund_id) : undefined,
        query.deposit_address ? repo.platformOfAddress(db, query.deposit_address) : undefined,
        query.deposit_intent_id
          ? repo.findSession(db, query.deposit_intent_id).then((session) => session?.platform_code)
          : undefined,
      ]);
      if (owners.some((owner) => owner !== undefined && owner !== platformCode)) {
        throw forbidden('the named resource belongs to another platform');
      }
      const page = pageOf(query);
      const { page: _p, page_size: _s, ...given } = query;
      const filters: repo.FundEventFilters = { ...given, ...bounds };
      const { rows, count } = await inOneSnapshot(db, (trx) =>
        repo.listFundEvents(trx, platformCode, filters, page),
      );
      // The vendor's GetFundTransactionsResponse has no `count` (wire-contract §3).
      const { count: _count, ...paging } = pageFields(page, count);
      return { message: rows.map(fundEventView), ...paging };
    },

    /**
     * `GET /admin/deposits`: the fund events a support case starts from, by transaction id (as a deposit's is taken
     * on any network: a hash with or without `0x`, in any letter case), deposit address or participant.
     */
    async findForOperator(query: FindDepositsQuery) {
      const { transaction_id: transactionId, deposit_address: address, participant_code: code } = query;
      if (transactionId === undefined && address === undefined && code === undefined)
        throw invalid('query: give at least one of transaction_id, deposit_address, participant_code');
      const participant = code === undefined ? undefined : await findParticipant(db, code);
      if (code !== undefined && !participant) throw notFound(`participant ${code} not found`);
      const page = pageOf(query);
      const { rows, count } = await inOneSnapshot(db, (trx) =>
        repo.findFundEvents(
          trx,
          {
            transactionIds: transactionId === undefined ? undefined : transactionIdForms(transactionId),
            depositAddress: address === undefined ? undefined : canonicalDepositAddress(address),
            participant: participant && {
              platformCode: participant.platform_code,
              participantCode: participant.participant_code,
            },
          },
          page,
        ),
      );
      const items = rows.map((row): AdminFundEvent => ({
        ...fundEventView(row),
        platform_code: row.platform_code,
        kind: row.kind,
      }));
      return { items, ...pageFields(page, count) };
    },

    /** `GET /admin/deposit_addresses/{address}`: whose deposit address it is (404 when it is none of ours). */
    async depositAddressOwner(address: string): Promise<DepositAddressOwner> {
      const row = await repo.findAddress(db, canonicalDepositAddress(address));
      if (!row) throw notFound(`deposit address ${address} not found`);
      return {
        address: row.address,
        platform_code: row.platform_code,
        participant_code: row.participant_code,
        account_label: row.account_label,
        network: row.network,
        last_fund_asset: row.last_fund_asset,
        created_at: row.created_at.getTime(),
      };
    },
  };
}

/** A `deposit_timestamp_*` filter (digits, a fraction allowed) as a bound on whole epoch ms, exactly (lib/range-bound.ts). */
function depositTimestampBound(query: FundTransactionsQuery, op: RangeOp): number | undefined {
  const field = `deposit_timestamp_${op}` as const;
  const value = query[field];
  if (value === undefined) return undefined;
  const { integer, fractional } = splitDecimal(value);
  // As for every epoch-ms parameter (the schema reads this one as text, so checks it here).
  if (integer > BigInt(MAX_EPOCH_MS)) throw invalid(`${field}: must be at most ${MAX_EPOCH_MS}`);
  return Number(wholeBound(integer, !fractional, op));
}

export type FundingService = ReturnType<typeof createFundingService>;
