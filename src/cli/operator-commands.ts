import type { IssuedApiKey, Participant, Platform } from '../contract/admin.schemas.ts';
import type { CustomerAccountDetails } from '../contract/accounts.schemas.ts';
import type { FundEvent } from '../contract/funding.schemas.ts';
import type { RateLimitState } from '../contract/rate-limits.schemas.ts';
import type { AdminTrade, AdvanceTradeBody, BookTradeBody } from '../contract/trades.schemas.ts';
import { AdminApiError, type AdminClient } from './admin-client.ts';
import { ExplainedFailure } from './error-report.ts';
import { SvcConnectionError } from '../sdk/errors.ts';
import {
  choice,
  entriesOf,
  list,
  listingQuery,
  onOff,
  oneOf,
  optionalDecimal,
  optionalInteger,
  optionalString,
  pathArgument,
  positional,
  required,
  UsageError,
  type Options,
} from './command-args.ts';
import type {
  RedeliverSinceBody,
  RedeliverSinceResult,
  WebhookEndpoint,
  WebhookNotification,
} from '../contract/webhooks.schemas.ts';
import {
  ADVANCE_FROM_STATES,
  BALANCE_ACCOUNT_TYPES,
  NOTIFICATION_STATUS_VALUES,
  PARTICIPANT_STATUS_VALUES,
  REGIONS,
  TRADE_STATES,
} from '../contract/wire-values.ts';
import { timeOption } from './time-option.ts';

/**
 * The operator commands of `svc`: one entry per operator API call, each with its usage line.
 * Options arrive parsed by node's util.parseArgs (string values, repeated ones as arrays).
 */
export { UsageError, type Options };

export interface Command {
  usage: string;
  summary: string;
  /** A write's: the read that shows whether it was carried out, told when its outcome is unknown (no answer). */
  seenWith?: string;
  run(client: AdminClient, positionals: string[], options: Options): Promise<unknown>;
}

/**
 * The secret of a webhook command's body (`--secret S`; `--no-secret`: null; neither: left out, so kept), once the
 * options that exclude each other (the secret's, and the types') are refused.
 */
function webhookSecret(o: Options): { secret?: string | null } {
  if (o.secret !== undefined && o['no-secret'] === true)
    throw new UsageError('--secret and --no-secret exclude each other');
  if (o['all-types'] === true && o.types !== undefined)
    throw new UsageError('--types and --all-types exclude each other');
  return o['no-secret'] === true
    ? { secret: null }
    : o.secret !== undefined
      ? { secret: required(o, 'secret') }
      : {};
}

export const OPERATOR_COMMANDS: Record<string, Command> = {
  'platforms create': {
    usage:
      'svc platforms create --name NAME [--allow CIDR]... [--quote-expiry-ms N] [--quote-expiry-requests on|off] [--deposit-fee-bps D]',
    summary: 'create a platform',
    seenWith: 'svc platforms list',
    run: (c, _p, o) =>
      c.post<Platform>('/platforms', {
        name: required(o, 'name'),
        ip_allowlist: list(o, 'allow'),
        quote_expiry_ms: optionalInteger(o, 'quote-expiry-ms'),
        quote_expiry_requests: onOff(o, 'quote-expiry-requests'),
        deposit_fee_bps: optionalDecimal(o, 'deposit-fee-bps'),
      }),
  },
  'platforms list': {
    usage: 'svc platforms list',
    summary: 'list platforms',
    run: (c) => c.get<Platform[]>('/platforms'),
  },
  'platforms show': {
    usage: 'svc platforms show CODE',
    summary: 'show one platform',
    run: (c, p) => c.get<Platform>(`/platforms/${pathArgument(p, 0, 'CODE')}`),
  },
  'platforms update': {
    usage:
      'svc platforms update CODE [--name NAME] [--quote-expiry-ms N|default] [--quote-expiry-requests on|off] [--deposit-fee-bps D]',
    summary:
      "change a platform's name, quote expiry (default: SVC_QUOTE_EXPIRY_MS), whether RFQs may ask for their own (quote_expiry), or deposit fee",
    seenWith: 'svc platforms show CODE',
    run: (c, p, o) => {
      const expiry = optionalString(o, 'quote-expiry-ms');
      // Said here, as `webhooks update` says it: the server's 400 for it was an exit 1, not a usage error (review).
      const requests = onOff(o, 'quote-expiry-requests');
      if (
        o.name === undefined &&
        expiry === undefined &&
        requests === undefined &&
        o['deposit-fee-bps'] === undefined
      )
        throw new UsageError(
          'give what changes: --name, --quote-expiry-ms, --quote-expiry-requests or --deposit-fee-bps',
        );
      return c.patch<Platform>(`/platforms/${pathArgument(p, 0, 'CODE')}`, {
        // Given, not empty (as `platforms create` says it, before a round trip for the server's 400).
        name: o.name === undefined ? undefined : required(o, 'name'),
        quote_expiry_ms: expiry === 'default' ? null : optionalInteger(o, 'quote-expiry-ms'),
        quote_expiry_requests: requests,
        deposit_fee_bps: optionalDecimal(o, 'deposit-fee-bps'),
      });
    },
  },
  'allowlist set': {
    usage: 'svc allowlist set PLATFORM [CIDR[,CIDR]...]',
    summary: "replace a platform's IP allow-list (empty allows all, cert only)",
    // Comma-separated as --allow is (audit: `10.0.0.0/8,192.0.2.1` went to the server as one entry, a 400).
    seenWith: 'svc platforms show PLATFORM',
    run: async (c, p) => {
      const platform = pathArgument(p, 0, 'PLATFORM');
      const cidrs = entriesOf(p.slice(1), '<CIDR>');
      const set = await c.put<Platform>(`/platforms/${platform}/ip_allowlist`, { cidrs });
      // Said, not only done: `svc allowlist set P $IPS` with IPS unset opened the platform to every address, exit 0
      // and nothing on the terminal (review).
      if (cidrs.length === 0)
        process.stderr.write(
          `warning: the allow-list of ${platform} is empty: every IP address may call it\n`,
        );
      return set;
    },
  },
  'keys create': {
    usage: 'svc keys create PLATFORM',
    summary: 'issue an API key (the secret and passphrase are shown once)',
    seenWith: 'svc keys list PLATFORM',
    run: (c, p) => c.post<IssuedApiKey>(`/platforms/${pathArgument(p, 0, 'PLATFORM')}/api_keys`),
  },
  'keys list': {
    usage: 'svc keys list PLATFORM',
    summary: "list a platform's API keys",
    run: (c, p) => c.get(`/platforms/${pathArgument(p, 0, 'PLATFORM')}/api_keys`),
  },
  'keys revoke': {
    usage: 'svc keys revoke API_KEY',
    summary: 'revoke an API key on every instance',
    seenWith: 'svc keys list PLATFORM',
    run: (c, p) => c.delete(`/api_keys/${pathArgument(p, 0, 'API_KEY')}`),
  },
  'participants create': {
    usage: 'svc participants create --platform CODE --email EMAIL --first-name F --last-name L [--status S]',
    summary: 'onboard a participant directly',
    seenWith: 'svc participants find --email EMAIL',
    run: (c, _p, o) =>
      c.post<Participant>('/participants', {
        platform_code: required(o, 'platform'),
        email: required(o, 'email'),
        first_name: required(o, 'first-name'),
        last_name: required(o, 'last-name'),
        status: oneOf(o, 'status', PARTICIPANT_STATUS_VALUES),
      }),
  },
  'participants find': {
    usage: 'svc participants find --email EMAIL',
    summary: 'the participants of every platform with this email',
    run: (c, _p, o) =>
      c.get<Participant[]>(`/participants?${new URLSearchParams({ email: required(o, 'email') })}`),
  },
  'participants show': {
    usage: 'svc participants show CODE',
    summary: 'show a participant',
    run: (c, p) => c.get<Participant>(`/participants/${pathArgument(p, 0, 'CODE')}`),
  },
  'participants set-status': {
    usage: 'svc participants set-status CODE STATUS [--reason REASON_CODE | --no-reason]',
    summary:
      "change a participant's status (sends participant_status_changed); without --reason the reason stays while the status does",
    seenWith: 'svc participants show CODE',
    run: (c, p, o) => {
      if (o.reason !== undefined && o['no-reason'] === true)
        throw new UsageError('--reason and --no-reason exclude each other');
      const target = `/participants/${pathArgument(p, 0, 'CODE')}`;
      const status = choice(positional(p, 1, 'STATUS'), 'STATUS', PARTICIPANT_STATUS_VALUES);
      return c.patch<Participant>(target, {
        status,
        reason_code: o['no-reason'] === true ? null : optionalString(o, 'reason'),
      });
    },
  },
  'accounts create': {
    usage: 'svc accounts create --platform CODE --participant CODE [--region us] [--label general]',
    summary: 'create a customer account synchronously',
    // A new customer account holds no balance yet, so no list shows it (review: the accounts list was named).
    seenWith:
      'svc api details ZRN, or by running it again: a create carried out answers 409 naming its zrn, and makes none',
    run: (c, _p, o) =>
      c.post<CustomerAccountDetails>('/customer_accounts', {
        platform_code: required(o, 'platform'),
        participant_code: required(o, 'participant'),
        region: oneOf(o, 'region', REGIONS),
        account_label: optionalString(o, 'label'),
      }),
  },
  'prices set': {
    usage: 'svc prices set PAIR=PRICE... (e.g. BTC/USD=65000.25)',
    summary: 'set prices used by quotes and fund rates',
    seenWith: 'svc prices list',
    run: (c, p) => {
      if (p.length === 0) throw new UsageError('at least one PAIR=PRICE is required');
      const pairs: Record<string, string> = {};
      for (const item of p) {
        // Exactly one "=": "BTC/USD=1=2" is a typo, not the price 1.
        const match = /^([^=\s]+)=([^=\s]+)$/.exec(item);
        if (!match) throw new UsageError(`"${item}" is not PAIR=PRICE (e.g. BTC/USD=65000.25)`);
        if (match[1]! in pairs) throw new UsageError(`${match[1]} is given twice`);
        pairs[match[1]!] = match[2]!;
      }
      return c.post('/prices', { pairs });
    },
  },
  'prices list': { usage: 'svc prices list', summary: 'list prices', run: (c) => c.get('/prices') },
  'balances show': {
    usage: 'svc balances show PARTICIPANT [--label LABEL] [--asset ASSET]',
    summary: "a participant's balances, each with what its unsettled trades have promised of it",
    run: (c, p, o) => {
      const query = new URLSearchParams({ participant_code: positional(p, 0, 'PARTICIPANT') });
      const label = optionalString(o, 'label');
      const asset = optionalString(o, 'asset');
      if (label !== undefined) query.set('account_label', label);
      if (asset !== undefined) query.set('asset', asset);
      return c.get(`/balances?${query}`);
    },
  },
  'balances adjust': {
    usage:
      'svc balances adjust --participant CODE --label LABEL --asset ASSET --amount DECIMAL [--type available]',
    summary: 'credit (positive) or debit (negative) a balance',
    seenWith: 'svc balances show PARTICIPANT',
    run: (c, _p, o) =>
      c.post('/balances', {
        participant_code: required(o, 'participant'),
        account_label: required(o, 'label'),
        asset: required(o, 'asset'),
        amount: required(o, 'amount'),
        account_type: oneOf(o, 'type', BALANCE_ACCOUNT_TYPES),
      }),
  },
  'deposits find': {
    usage: 'svc deposits find [--tx TRANSACTION_ID] [--address ADDRESS] [--participant CODE] [--page N]',
    summary: 'fund events of every platform by transaction id, deposit address or participant, newest first',
    run: (c, _p, o) => {
      if (!['tx', 'address', 'participant'].some((option) => o[option] !== undefined))
        throw new UsageError('give --tx, --address or --participant (or more than one)');
      const query = listingQuery(o, [
        ['tx', 'transaction_id'],
        ['address', 'deposit_address'],
        ['participant', 'participant_code'],
      ]);
      return c.getPage<FundEvent>(`/deposits?${query}`, 'deposits');
    },
  },
  'deposits address': {
    usage: 'svc deposits address ADDRESS',
    summary: 'whose deposit address it is (platform, participant, account label, network)',
    run: (c, p) => c.get(`/deposit_addresses/${pathArgument(p, 0, 'ADDRESS')}`),
  },
  'deposits record': {
    usage:
      'svc deposits record ADDRESS QUANTITY [--tx TRANSACTION_ID] [--source ADDRESS] [--fund-asset USDC.ETH] [--deposit-timestamp MS] [--failed --reason TEXT]',
    summary: 'record an on-chain deposit to a deposit address (fund event, credit and webhook)',
    seenWith: 'svc deposits find --address ADDRESS',
    run: (c, p, o) => {
      const at = optionalString(o, 'deposit-timestamp');
      if (at !== undefined && !/^\d+$/.test(at)) throw new UsageError('--deposit-timestamp must be epoch ms');
      if (o.failed === true && !optionalString(o, 'reason')) throw new UsageError('--failed needs --reason');
      // A reason is a failed deposit's: given alone, it was dropped and a successful deposit recorded (review).
      if (o.failed !== true && optionalString(o, 'reason') !== undefined)
        throw new UsageError('--reason goes with --failed (the reason a deposit failed)');
      return c.post<FundEvent>('/deposits', {
        deposit_address: positional(p, 0, 'ADDRESS'),
        quantity: positional(p, 1, 'QUANTITY'),
        transaction_id: optionalString(o, 'tx'),
        source_address: optionalString(o, 'source'),
        fund_asset: optionalString(o, 'fund-asset'),
        deposit_timestamp: at === undefined ? undefined : Number(at),
        ...(o.failed === true ? { success: false, reason: optionalString(o, 'reason') } : {}),
      });
    },
  },
  'rate-limits show': {
    usage: 'svc rate-limits show IP',
    summary: "an IP's accepted requests in the current window and its block, if any",
    run: (c, p) => c.get<RateLimitState>(`/rate_limits/${pathArgument(p, 0, 'IP')}`),
  },
  'rate-limits unblock': {
    usage: 'svc rate-limits unblock IP',
    summary: "lift an IP's rate-limit block on every instance and clear its count",
    seenWith: 'svc rate-limits show IP',
    run: (c, p) => c.delete<RateLimitState>(`/rate_limits/${pathArgument(p, 0, 'IP')}`),
  },
  'webhooks set': {
    usage:
      'svc webhooks set PLATFORM URL [--secret S | --no-secret] [--types T1,T2 | --all-types] [--disabled]',
    summary:
      "configure a platform's webhook, replacing its configuration: every type unless --types, enabled unless --disabled; only the secret is kept when neither --secret nor --no-secret is given",
    seenWith: 'svc webhooks show PLATFORM',
    run: (c, p, o) =>
      c.put<WebhookEndpoint>(`/platforms/${pathArgument(p, 0, 'PLATFORM')}/webhook`, {
        url: positional(p, 1, 'URL'),
        ...webhookSecret(o),
        payload_types: o['all-types'] === true ? null : list(o, 'types'),
        enabled: o.disabled !== true,
      }),
  },
  'webhooks update': {
    usage:
      'svc webhooks update PLATFORM [URL] [--secret S | --no-secret] [--types T1,T2 | --all-types] [--enabled | --disabled]',
    summary:
      "change some of a platform's webhook configuration (rotate the secret, pause, resubscribe); the rest stays",
    seenWith: 'svc webhooks show PLATFORM',
    run: (c, p, o) => {
      if (o.enabled === true && o.disabled === true)
        throw new UsageError('--enabled and --disabled exclude each other');
      const body = {
        ...(p[1] !== undefined ? { url: positional(p, 1, 'URL') } : {}),
        ...webhookSecret(o),
        ...(o['all-types'] === true
          ? { payload_types: null }
          : o.types !== undefined
            ? { payload_types: list(o, 'types') }
            : {}),
        ...(o.enabled === true ? { enabled: true } : o.disabled === true ? { enabled: false } : {}),
      };
      if (Object.keys(body).length === 0)
        throw new UsageError(
          'give what changes: URL, --secret, --no-secret, --types, --all-types, --enabled or --disabled',
        );
      return c.patch<WebhookEndpoint>(`/platforms/${pathArgument(p, 0, 'PLATFORM')}/webhook`, body);
    },
  },
  'webhooks show': {
    usage: 'svc webhooks show PLATFORM',
    summary: "show a platform's webhook configuration",
    run: (c, p) => c.get<WebhookEndpoint>(`/platforms/${pathArgument(p, 0, 'PLATFORM')}/webhook`),
  },
  'webhooks notifications': {
    usage:
      'svc webhooks notifications PLATFORM [--status pending|retrying|delivered|dead|skipped] [--type PAYLOAD_TYPE] [--resource KEY] [--page N] [--page-size N]',
    summary:
      "list a platform's notifications with every delivery attempt, newest first (dead letters: --status dead)",
    run: (c, p, o) => {
      oneOf(o, 'status', NOTIFICATION_STATUS_VALUES);
      const query = listingQuery(
        o,
        [
          ['status', 'status'],
          ['type', 'payload_type'],
          ['resource', 'resource_key'],
        ],
        [
          ['page', 'page'],
          ['page-size', 'page_size'],
        ],
      );
      const suffix = query.size ? `?${query}` : '';
      // With the page it is, and how many there are: whether more (dead letters) lie beyond it.
      return c.getPage<WebhookNotification>(
        `/platforms/${pathArgument(p, 0, 'PLATFORM')}/notifications${suffix}`,
        'notifications',
      );
    },
  },
  'webhooks notification': {
    usage: 'svc webhooks notification NOTIFICATION_ID',
    summary: 'show one notification with every delivery attempt',
    run: (c, p) => c.get<WebhookNotification>(`/notifications/${pathArgument(p, 0, 'NOTIFICATION_ID')}`),
  },
  'webhooks redeliver': {
    usage: 'svc webhooks redeliver NOTIFICATION_ID',
    summary: 'deliver a notification again (same notification id)',
    seenWith: 'svc webhooks notification NOTIFICATION_ID',
    run: (c, p) =>
      c.post<WebhookNotification>(`/notifications/${pathArgument(p, 0, 'NOTIFICATION_ID')}/redeliver`),
  },
  'webhooks redeliver-since': {
    usage:
      'svc webhooks redeliver-since PLATFORM --since EPOCH_MS|ISO_8601 [--until EPOCH_MS|ISO_8601] (UTC unless zoned) [--status dead,skipped] [--resume POINT]',
    summary: 'deliver again every notification of a platform recorded since a time (and before --until)',
    seenWith: 'svc webhooks notifications PLATFORM',
    run: async (c, p, o) => {
      const until = optionalString(o, 'until');
      const body: RedeliverSinceBody = {
        since: timeOption(required(o, 'since')),
        until: until === undefined ? undefined : timeOption(until, '--until'),
        status: list(o, 'status')?.map((status) =>
          choice(status, '--status: each', NOTIFICATION_STATUS_VALUES),
        ),
      };
      const path = `/platforms/${pathArgument(p, 0, 'PLATFORM')}/redeliver`;
      // A big range takes several calls (each answers after about 10 s with where to resume): one command. A call
      // that fails after others went through says where to go on: run again from the start, the command would send
      // again what they redelivered (review).
      // With --json, stderr holds one JSON object, the error's, if any (review: these lines came before it, and the
      // resume point was in them only): the progress is not told, and where to go on is in the error's fields.
      let redelivered = 0;
      const resumedFrom = optionalString(o, 'resume');
      let resume = resumedFrom;
      for (let calls = 0; ; calls += 1) {
        let step: RedeliverSinceResult;
        try {
          step = await c.post<RedeliverSinceResult>(path, { ...body, resume });
          // "Not complete" with nowhere to go on is no answer of the operator API's: reported as one (a stack, before).
          if (step.complete === false && step.resume === undefined) throw new AdminApiError(200, step);
        } catch (error) {
          if (calls === 0 || !(error instanceof AdminApiError || error instanceof SvcConnectionError))
            throw error;
          const instead = resumedFrom === undefined ? '' : ' in place of the one it has';
          throw new ExplainedFailure(
            error,
            `redelivered ${redelivered} before this failure; to go on where it stopped, run the same command with --resume ${resume}${instead}`,
            { redelivered, resume },
          );
        }
        redelivered += step.redelivered;
        // Without `complete`, a server from before redeliveries went in calls: it did the whole range in this one.
        if (step.complete !== false) return { redelivered };
        resume = step.resume!;
        const why = step.interrupted ? ` (the last call stopped early: ${step.interrupted})` : '';
        if (o.json !== true) process.stderr.write(`redelivered ${redelivered} so far, going on${why}\n`);
      }
    },
  },
  'trades book': {
    usage:
      'svc trades book --platform CODE --participant CODE --side buy|sell --underlying BTC --quoted-currency USD ' +
      '--quantity Q --price P [--label general] [--client-trade-id ID] [--net-settlement] [--comment TEXT]',
    summary:
      'book a trade directly (--net-settlement: an allocation trade: no trade_status_changed, its balance moves still notify)',
    seenWith: 'svc trades list --platform CODE',
    run: (c, _p, o) => {
      const side = required(o, 'side');
      if (side !== 'buy' && side !== 'sell') throw new UsageError('--side must be buy or sell');
      const body: BookTradeBody = {
        platform_code: required(o, 'platform'),
        participant_code: required(o, 'participant'),
        account_label: optionalString(o, 'label'),
        side,
        underlying: required(o, 'underlying'),
        quoted_currency: required(o, 'quoted-currency'),
        quantity: required(o, 'quantity'),
        price: required(o, 'price'),
        client_trade_id: optionalString(o, 'client-trade-id'),
        net_settlement: o['net-settlement'] === true,
        comment: optionalString(o, 'comment'),
      };
      return c.post<AdminTrade>('/trades', body);
    },
  },
  'trades list': {
    usage:
      'svc trades list --platform CODE [--participant CODE] [--state accepted|active|terminated] [--client-trade-id ID] [--page N]',
    summary: "a platform's trades, newest first (--client-trade-id: the platform's id, or a quote id)",
    run: (c, _p, o) => {
      required(o, 'platform'); // said first, missing or empty
      const state = optionalString(o, 'state');
      if (state !== undefined && !(TRADE_STATES as readonly string[]).includes(state))
        throw new UsageError(`--state must be ${TRADE_STATES.join(', ')}`);
      const query = listingQuery(o, [
        ['platform', 'platform_code'],
        ['participant', 'participant_code'],
        ['state', 'trade_state'],
        ['client-trade-id', 'client_trade_id'],
      ]);
      return c.getPage<AdminTrade>(`/trades?${query}`, 'trades');
    },
  },
  'trades show': {
    usage: 'svc trades show TRADE_ID',
    summary: "show any platform's trade",
    run: (c, p) => c.get<AdminTrade>(`/trades/${pathArgument(p, 0, 'TRADE_ID')}`),
  },
  'trades advance': {
    usage: 'svc trades advance TRADE_ID [--from accepted|active]',
    summary:
      'move a trade to its next settlement state now (accepted → active → terminated); --from: only from that ' +
      'state (409 once the trade has left it), so that repeating a call whose outcome is unknown is safe',
    seenWith: 'svc trades show TRADE_ID',
    run: (c, p, o) => {
      const from = optionalString(o, 'from');
      if (from !== undefined && !(ADVANCE_FROM_STATES as readonly string[]).includes(from))
        throw new UsageError(`--from must be ${ADVANCE_FROM_STATES.join(' or ')}`);
      const body = (from === undefined ? {} : { from }) as AdvanceTradeBody;
      return c.post<AdminTrade>(`/trades/${pathArgument(p, 0, 'TRADE_ID')}/advance`, body);
    },
  },
};

/** Options every operator command understands, for util.parseArgs. */
export const OPERATOR_OPTIONS = {
  name: { type: 'string' },
  allow: { type: 'string', multiple: true },
  'quote-expiry-ms': { type: 'string' },
  'quote-expiry-requests': { type: 'string' },
  'deposit-fee-bps': { type: 'string' },
  platform: { type: 'string' },
  participant: { type: 'string' },
  email: { type: 'string' },
  'first-name': { type: 'string' },
  'last-name': { type: 'string' },
  status: { type: 'string' },
  reason: { type: 'string' },
  region: { type: 'string' },
  label: { type: 'string' },
  asset: { type: 'string' },
  amount: { type: 'string' },
  type: { type: 'string' },
  tx: { type: 'string' },
  address: { type: 'string' },
  state: { type: 'string' },
  source: { type: 'string' },
  'fund-asset': { type: 'string' },
  'deposit-timestamp': { type: 'string' },
  failed: { type: 'boolean' },
  'no-reason': { type: 'boolean' },
  // webhooks (also `svc webhooks listen --port N --secret S`)
  secret: { type: 'string' },
  'no-secret': { type: 'boolean' },
  types: { type: 'string', multiple: true },
  'all-types': { type: 'boolean' },
  disabled: { type: 'boolean' },
  enabled: { type: 'boolean' },
  resource: { type: 'string' },
  until: { type: 'string' },
  resume: { type: 'string' },
  page: { type: 'string' },
  'page-size': { type: 'string' },
  since: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  // trades
  side: { type: 'string' },
  underlying: { type: 'string' },
  'quoted-currency': { type: 'string' },
  quantity: { type: 'string' },
  price: { type: 'string' },
  'client-trade-id': { type: 'string' },
  'net-settlement': { type: 'boolean' },
  comment: { type: 'string' },
  from: { type: 'string' },
} as const;
