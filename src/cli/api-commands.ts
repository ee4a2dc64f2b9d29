import { readFileSync } from 'node:fs';
import type { ListAccountsQuery } from '../contract/accounts.schemas.ts';
import type { FundTransactionsQuery } from '../contract/funding.schemas.ts';
import type { ListParticipantsQuery, PostCustomerBody } from '../contract/participants.schemas.ts';
import type { LiquidityQuoteRequest } from '../contract/quotes.schemas.ts';
import type { ListTradesQuery } from '../contract/trades.schemas.ts';
import type { ClientOptions } from '../sdk/client.ts';
import { SvcNotFoundError } from '../sdk/errors.ts';
import { createClient, type SvcPlatform } from '../sdk/platform.ts';
import { ExplainedFailure } from './error-report.ts';
import {
  choice,
  list,
  oneOf,
  optionalInteger,
  optionalString,
  positional,
  required,
  UsageError,
  type Options,
} from './command-args.ts';
import {
  ACCOUNT_TIERS,
  ACCOUNT_TYPES,
  BALANCE_ACCOUNT_TYPES,
  CLIENT_TOKEN_PERMISSIONS,
  FUNDING_PERMISSION,
  QUOTE_EXPIRY_WINDOWS_MS,
  type QuoteExpiryWindow,
  PARTICIPANT_STATUS_FILTERS,
  REGIONS,
  SIDES,
  TRADE_STATES,
} from '../contract/wire-values.ts';

/**
 * `svc api …`: the common platform calls, signed with a platform API key through the SDK (so the retry
 * rules of spec 7.1–7.3 apply exactly as in code: execute and customer creation run their idempotence
 * checks). One entry per call, keyed by what follows `svc api`.
 */
export interface ApiCommand {
  usage: string;
  summary: string;
  /** Calls only routes that take no credentials (wire-contract §1: GET /time, the JWKS): none are asked for. */
  unauthenticated?: true;
  run(client: SvcPlatform, positionals: string[], options: Options): Promise<unknown>;
}

/** Where the platform calls go and who signs them; the entry point resolves flags and environment. */
export interface ApiConnection {
  baseUrl: string;
  apiKey?: string;
  apiSecret?: string;
  passphrase?: string;
  /** false: send each request once (`--no-retry`). */
  retry?: boolean;
  /** Gives up on one attempt after this many ms (the SDK's default when undefined). */
  timeoutMs?: number;
}

export function apiClient(
  connection: ApiConnection,
  extra: Partial<ClientOptions> = {},
  credentials: 'required' | 'unused' = 'required',
): SvcPlatform {
  const missing = (
    [
      ['apiKey', '--api-key or SVC_API_KEY'],
      ['apiSecret', '--api-secret or SVC_API_SECRET'],
      ['passphrase', '--passphrase or SVC_PASSPHRASE'],
    ] as const
  ).filter(([field]) => !connection[field]);
  // A command whose calls send no credentials (authenticate: false) needs none; the SDK's client still holds some.
  if (credentials === 'required' && missing.length > 0) {
    throw new UsageError(`platform credentials missing: ${missing.map(([, how]) => how).join(', ')}`);
  }
  return createClient({
    baseUrl: connection.baseUrl,
    apiKey: connection.apiKey ?? '',
    apiSecret: connection.apiSecret ?? '',
    passphrase: connection.passphrase ?? '',
    ...(connection.retry === false ? { retry: false } : {}),
    timeoutMs: connection.timeoutMs,
    ...extra,
  });
}

function requiredOneOf<T extends string>(options: Options, name: string, values: readonly T[]): T {
  required(options, name);
  return oneOf(options, name, values)!;
}

function pageOptions(options: Options): { page?: number; page_size?: number } {
  return { page: optionalInteger(options, 'page'), page_size: optionalInteger(options, 'page-size') };
}

/** `--file body.json` (or `--file -` for standard input): a JSON object. */
function readJsonFile(options: Options): object {
  const file = required(options, 'file');
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (error) {
    throw new UsageError(`--file ${file}: ${(error as Error).message}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--file ${file}: not JSON (${(error as Error).message})`);
  }
  // `null` crashed the SDK, and a JSON string was sent as the raw body (then "not valid JSON").
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new UsageError(
      `--file ${file}: must hold a JSON object, not ${body === null ? 'null' : Array.isArray(body) ? 'an array' : typeof body}`,
    );
  return body;
}

function quoteRequest(options: Options): LiquidityQuoteRequest {
  const quantity = optionalString(options, 'quantity');
  const total = optionalString(options, 'total');
  if ((quantity === undefined) === (total === undefined)) {
    throw new UsageError('give exactly one of --quantity and --total');
  }
  return {
    side: requiredOneOf(options, 'side', SIDES),
    underlying: required(options, 'underlying'),
    quoted_currency: required(options, 'quoted-currency'),
    quantity,
    total,
    participant_code: optionalString(options, 'participant'),
    account_label: optionalString(options, 'label'),
    spread: optionalString(options, 'spread'),
  };
}

export const API_COMMANDS: Record<string, ApiCommand> = {
  time: {
    usage: 'svc api time',
    summary: "the server's clock (GET /time); signed requests must be within 60 s of it",
    unauthenticated: true,
    run: (c) => c.time(),
  },
  jwks: {
    usage: 'svc api jwks',
    summary: 'the public keys that verify SDK tokens (GET /.well-known/jwks.json)',
    unauthenticated: true,
    run: (c) => c.funding.signingKeys(),
  },
  accounts: {
    usage:
      'svc api accounts [--owner CODE] [--label L] [--asset A] [--type available|…] [--group G] [--page N] [--page-size N]',
    summary: 'balance accounts (GET /accounts)',
    run: (c, _p, o) => {
      const query: ListAccountsQuery = {
        account_owner: optionalString(o, 'owner'),
        account_label: optionalString(o, 'label'),
        asset: optionalString(o, 'asset'),
        account_type: oneOf(o, 'type', BALANCE_ACCOUNT_TYPES),
        account_group: optionalString(o, 'group'),
        ...pageOptions(o),
      };
      return c.accounts.list(query);
    },
  },
  'create-account': {
    usage:
      'svc api create-account --participant CODE --label L --account-type individual|… --tier lite|… [--tenant CODE]... [--region us]',
    summary: 'ask for a customer account (POST /accounts, 202; created in the background)',
    run: (c, _p, o) =>
      c.accounts.create({
        participant_code: required(o, 'participant'),
        account_label: required(o, 'label'),
        type: requiredOneOf(o, 'account-type', ACCOUNT_TYPES),
        tier: requiredOneOf(o, 'tier', ACCOUNT_TIERS),
        tenants: list(o, 'tenant'),
        region: oneOf(o, 'region', REGIONS),
      }),
  },
  details: {
    usage: 'svc api details ZRN [--participant CODE]',
    summary: 'a customer account with its tenants and pending tenant changes (GET /accounts/{zrn}/details)',
    run: (c, p, o) =>
      c.accounts.details(positional(p, 0, 'ZRN'), { participantCode: optionalString(o, 'participant') }),
  },
  'add-tenant': {
    usage: 'svc api add-tenant ZRN CODE',
    summary: 'ask to add a tenant (POST /accounts/{zrn}/tenants, 202; applied in the background)',
    run: (c, p) => c.accounts.addTenant(positional(p, 0, 'ZRN'), positional(p, 1, 'CODE')),
  },
  'remove-tenant': {
    usage: 'svc api remove-tenant ZRN CODE',
    summary: 'ask to remove a tenant (DELETE /accounts/{zrn}/tenants/{tenant}, 202)',
    run: (c, p) => c.accounts.removeTenant(positional(p, 0, 'ZRN'), positional(p, 1, 'CODE')),
  },
  token: {
    usage: 'svc api token PARTICIPANT [--permission fwc]... [--reference REF] [--label L]',
    summary: 'a JWT for the Account Funding SDK (POST /client_auth_token; default permission fwc)',
    run: (c, p, o) => {
      const permissions = (list(o, 'permission') ?? [FUNDING_PERMISSION]).map((value) =>
        choice(value, '--permission', CLIENT_TOKEN_PERMISSIONS),
      );
      const label = optionalString(o, 'label');
      return c.funding.createClientToken({
        participant_code: positional(p, 0, 'PARTICIPANT'),
        permissions,
        reference_id: optionalString(o, 'reference'),
        ...(label === undefined ? {} : { deposit_details: { account_label: label } }),
      });
    },
  },
  'revoke-token': {
    usage: 'svc api revoke-token TOKEN',
    summary: 'revoke an SDK token (POST /revoke_auth_token)',
    run: async (c, p) => {
      await c.funding.revokeClientToken(positional(p, 0, 'TOKEN'));
      return { revoked: true };
    },
  },
  'fund-quote': {
    usage: 'svc api fund-quote PARTICIPANT FUND_ASSET [--reference CLIENT_FUND_ID] [--label L]',
    summary: 'rate, fees and the deposit address for a deposit (POST /fund/rfq)',
    run: (c, p, o) =>
      c.funding.requestQuote({
        participant_code: positional(p, 0, 'PARTICIPANT'),
        fund_asset: positional(p, 1, 'FUND_ASSET'),
        client_fund_id: optionalString(o, 'reference'),
        account_label: optionalString(o, 'label'),
      }),
  },
  'fund-transactions': {
    usage:
      'svc api fund-transactions [--participant CODE] [--reference REF] [--fund-asset A] [--address ADDR] [--fund-id ID] [--success true|false] [--page N] [--page-size N]',
    summary: 'fund events, newest first (GET /fund/transactions)',
    run: (c, _p, o) => {
      const success = oneOf(o, 'success', ['true', 'false'] as const);
      const query: FundTransactionsQuery = {
        participant_code: optionalString(o, 'participant'),
        reference_id: optionalString(o, 'reference'),
        fund_asset: optionalString(o, 'fund-asset'),
        deposit_address: optionalString(o, 'address'),
        fund_id: optionalString(o, 'fund-id'),
        success: success === undefined ? undefined : success === 'true',
        ...pageOptions(o),
      };
      return c.funding.listTransactions(query);
    },
  },
  quote: {
    usage:
      'svc api quote --side buy|sell --underlying BTC --quoted-currency USD (--quantity Q | --total T) [--participant CODE] [--label L] [--spread BPS] [--quote-expiry 5s|30s|1m|5m|10m|15m] [--withdrawal-address ADDR]',
    summary:
      'a liquidity quote (GET /liquidity/rfq), or with --withdrawal-address a convert-and-withdraw quote',
    run: (c, _p, o) => {
      const request = quoteRequest(o);
      const address = optionalString(o, 'withdrawal-address');
      // The vendor's window, for a liquidity quote (review: the CLI could not send it, to see a platform's refusal).
      const window = oneOf(o, 'quote-expiry', Object.keys(QUOTE_EXPIRY_WINDOWS_MS) as QuoteExpiryWindow[]);
      if (window !== undefined && address !== undefined)
        throw new UsageError('--quote-expiry is for a liquidity quote, not one with --withdrawal-address');
      return address === undefined
        ? c.quotes.getLiquidityQuote({ ...request, quote_expiry: window })
        : c.quotes.getConvertWithdrawQuote({ ...request, withdrawal_address: address });
    },
  },
  execute: {
    usage: 'svc api execute QUOTE_ID [--convert-withdraw]',
    summary:
      'execute a quote (POST /liquidity/execute or /convert_withdraw/execute) with spec 7.2: a lost answer is looked up, not resent',
    run: (c, p, o) => {
      const convertWithdraw = o['convert-withdraw'] === true;
      return (
        convertWithdraw
          ? c.quotes.executeConvertWithdrawQuote(positional(p, 0, 'QUOTE_ID'))
          : c.quotes.executeLiquidityQuote(positional(p, 0, 'QUOTE_ID'))
      ).catch((error: unknown) => {
        // spec 7.2: the SDK looked the trade up and found none, so the quote expired (or is not this platform's):
        // said, rather than a bare "404: Not Found" (probe). A quote of the other kind is unknown to this execute
        // too (probe: a convert-and-withdraw quote executed without --convert-withdraw was said to have expired).
        if (error instanceof SvcNotFoundError && !error.outcomeUnknown)
          throw new ExplainedFailure(
            error,
            `no trade was made from this quote: it expired or is unknown as a ${
              convertWithdraw
                ? 'convert-and-withdraw quote (a liquidity quote executes without --convert-withdraw)'
                : 'liquidity quote (a convert-and-withdraw quote, asked with --withdrawal-address, executes with --convert-withdraw)'
            }; else request a new quote (svc api quote)`,
          );
        throw error;
      });
    },
  },
  trades: {
    usage:
      'svc api trades [--client-trade-id QUOTE_ID] [--state accepted|active|terminated] [--label L] [--party CODE] [--page N] [--page-size N]',
    summary: 'trades, newest first (GET /trades)',
    run: (c, _p, o) => {
      const query: ListTradesQuery = {
        client_trade_id: optionalString(o, 'client-trade-id'),
        trade_state: oneOf(o, 'state', TRADE_STATES),
        account_label: optionalString(o, 'label'),
        party_code: optionalString(o, 'party'),
        ...pageOptions(o),
      };
      return c.trades.listPage(query);
    },
  },
  trade: {
    usage: 'svc api trade TRADE_ID',
    summary: 'one trade (GET /trades/{trade_id})',
    run: (c, p) => c.trades.get(positional(p, 0, 'TRADE_ID')),
  },
  'customers create': {
    usage: 'svc api customers create --file BODY.json|- [--request-id ID]',
    summary:
      'onboard a customer (POST /participants/customers/new) with spec 7.3: an existing customer is returned as `exists`',
    run: (c, _p, o) =>
      c.participants.createCustomer(readJsonFile(o) as PostCustomerBody, {
        requestId: optionalString(o, 'request-id'),
      }),
  },
  participants: {
    usage: 'svc api participants [--status S] [--participant CODE] [--email E] [--page N] [--page-size N]',
    summary: "the platform's customers (GET /participants)",
    run: (c, _p, o) => {
      const query: ListParticipantsQuery = {
        status: oneOf(o, 'status', PARTICIPANT_STATUS_FILTERS),
        participant_code: optionalString(o, 'participant'),
        email: optionalString(o, 'email'),
        ...pageOptions(o),
      };
      return c.participants.list(query);
    },
  },
  participant: {
    usage: 'svc api participant EMAIL',
    summary: 'the participant with this email (GET /participants/{email})',
    run: (c, p) => c.participants.getByEmail(positional(p, 0, 'EMAIL')),
  },
};

/** The command named by the words after `svc api` (two-word names first), and its own positionals. */
export function findApiCommand(words: string[]): { command: ApiCommand; positionals: string[] } {
  const two = API_COMMANDS[`${words[0]} ${words[1]}`];
  if (two) return { command: two, positionals: words.slice(2) };
  const one = words[0] === undefined ? undefined : API_COMMANDS[words[0]];
  if (one) return { command: one, positionals: words.slice(1) };
  if (words.length === 0)
    throw new UsageError(`svc api needs a command: ${Object.keys(API_COMMANDS).join(', ')}; see svc --help`);
  throw new UsageError(`unknown command "svc api ${words.join(' ')}"; see svc --help`);
}

/** Options of the `svc api` commands, for util.parseArgs (merged with the operator commands' own). */
export const API_OPTIONS = {
  'quote-expiry': { type: 'string' },
  'api-key': { type: 'string' },
  'api-secret': { type: 'string' },
  passphrase: { type: 'string' },
  'no-retry': { type: 'boolean' },
  owner: { type: 'string' },
  group: { type: 'string' },
  'account-type': { type: 'string' },
  tier: { type: 'string' },
  tenant: { type: 'string', multiple: true },
  permission: { type: 'string', multiple: true },
  reference: { type: 'string' },
  address: { type: 'string' },
  'fund-id': { type: 'string' },
  success: { type: 'string' },
  total: { type: 'string' },
  spread: { type: 'string' },
  'withdrawal-address': { type: 'string' },
  'convert-withdraw': { type: 'boolean' },
  state: { type: 'string' },
  party: { type: 'string' },
  'page-size': { type: 'string' },
  file: { type: 'string' },
  'request-id': { type: 'string' },
} as const;
