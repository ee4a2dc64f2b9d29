import type {
  CreateCustomerAccountRequest,
  CustomerAccountDetailsWithPending,
  ListAccountsQuery,
  ListAccountsResponse,
} from '../../contract/accounts.schemas.ts';
import { lookupOptions, type QueryValue, type CallOptions, type SvcClient } from '../client.ts';

export type {
  BalanceAccount,
  CreateCustomerAccountRequest,
  CustomerAccountDetails,
  CustomerAccountDetailsWithPending,
  ListAccountsQuery,
  ListAccountsResponse,
  PendingTenantChange,
} from '../../contract/accounts.schemas.ts';
import { pathSegment } from '../path-segment.ts';

/** The body of a 202: the request was accepted, the change is applied later (spec 3.2). */
export type AcceptedResponse = Record<string, never>;

/** A zrn in a path: `:` is sent as `%3A`, which the service accepts and signs as sent (wire-contract §1). */
function accountPath(zrn: string, rest: string): string {
  return `/accounts/${pathSegment(zrn, 'zrn')}${rest}`;
}

/** The account's tenants once its pending changes have taken effect, in the order they were accepted. */
function tenantsOnceApplied(details: CustomerAccountDetailsWithPending): Set<string> {
  const tenants = new Set(details.tenants);
  // `?? []`: a server that does not give them (one before `include`) leaves the tenants as they are.
  for (const { participant_code, change } of details.pending_tenant_changes ?? []) {
    if (change === 'add') tenants.add(participant_code);
    else tenants.delete(participant_code);
  }
  return tenants;
}

/**
 * Balance accounts, customer accounts and tenants (spec 2.1, 3.2, 4.1, 4.2). One method per endpoint; each
 * applies the retry rules of spec 7 through `SvcClient.request` and throws the status family's `SvcError`.
 *
 * @example
 * const client = createClient({ baseUrl, apiKey, apiSecret, passphrase }); // client.accounts is this resource
 * await client.accounts.addTenant('zrn:svc:us:account:customer:6a1c…', 'PAR002');
 */
export class AccountsResource {
  constructor(private readonly client: SvcClient) {}

  /**
   * `GET /accounts`: the platform's balance accounts, with the vendor's filters and pagination. Naming a
   * tenant as `account_owner` together with `account_label` lists the holder's balances there.
   *
   * @example
   * const { message, total_pages } = await client.accounts.list({ account_owner: 'PAR001', asset: 'USD', page: 1 });
   */
  list(query: ListAccountsQuery = {}, options: CallOptions = {}): Promise<ListAccountsResponse> {
    return this.client.request<ListAccountsResponse>('GET', '/accounts', {
      ...options,
      query: query as Record<string, QueryValue>,
    });
  }

  /**
   * `POST /accounts`: asks for a customer account; 202 `{}`. The account is created in the background and
   * announced by a `customer_account_status_changed` webhook carrying its zrn. The pair (participant_code,
   * account_label) is the idempotence check, as the vendor's: a second submission of a pair gets 409
   * (`SvcConflictError`) naming the pair and the account's zrn, so after a 502/504 that 409 means the first
   * submission was accepted.
   *
   * @example
   * await client.accounts.create({ participant_code: 'PAR001', account_label: 'joint', type: 'jtic', tier: 'pro', tenants: ['PAR002'] });
   */
  create(body: CreateCustomerAccountRequest, options: CallOptions = {}): Promise<AcceptedResponse> {
    return this.client.request<AcceptedResponse>('POST', '/accounts', { ...options, body });
  }

  /**
   * `GET /accounts/{zrn}/details`: the customer account with its tenants in effect and, in
   * `pending_tenant_changes` (asked for with `include=pending_tenant_changes`, which the vendor's API does
   * not have), the accepted changes not in effect yet. With `participantCode`, reads the account as that
   * participant: its holder and tenants are served, a former tenant gets 403.
   *
   * @example
   * const details = await client.accounts.details(zrn);
   * if (details.tenants.includes('PAR002')) console.log('PAR002 is a tenant now');
   */
  async details(
    zrn: string,
    options: CallOptions & { participantCode?: string } = {},
  ): Promise<CustomerAccountDetailsWithPending> {
    const { participantCode, ...call } = options;
    const body = await this.client.request<{ message: CustomerAccountDetailsWithPending }>(
      'GET',
      accountPath(zrn, '/details'),
      // The contract's INCLUDE_PENDING_TENANT_CHANGES, written out: its module loads typebox, which the SDK does not.
      { ...call, query: { participant_code: participantCode, include: 'pending_tenant_changes' } },
    );
    return body.message;
  }

  /**
   * `POST /accounts/{zrn}/tenants`: asks to add a tenant; 202 `{}` means accepted, not in effect (spec 3.2).
   * The details are read first: after a 502/504 or no answer, the idempotence check (spec 7.1) reads them again,
   * and the tenant now among the tenants or pending adds, when it was not before, means the call was accepted;
   * so was a resend refused as "already a tenant" by then. A participant that was a tenant already gets the 409.
   *
   * @example
   * await client.accounts.addTenant(zrn, 'PAR002');
   */
  addTenant(zrn: string, participantCode: string, options: CallOptions = {}): Promise<AcceptedResponse> {
    return this.changeTenant(zrn, participantCode, 'add', options, (idempotenceCheck) =>
      this.client.request<AcceptedResponse>(
        'POST',
        accountPath(zrn, '/tenants'),
        { ...options, body: { participant_code: participantCode } },
        { idempotenceCheck },
      ),
    );
  }

  /**
   * `DELETE /accounts/{zrn}/tenants/{tenant}`: asks to remove a tenant (exactly 6 characters); 202 `{}`. The
   * details are read first: after a 502/504 or no answer, the tenant gone (or its removal pending) when it was
   * a tenant before means the call was accepted; so was a resend refused as "not a tenant" by then. A
   * participant that was no tenant gets the 404.
   *
   * @example
   * await client.accounts.removeTenant(zrn, 'PAR002');
   */
  removeTenant(zrn: string, tenant: string, options: CallOptions = {}): Promise<AcceptedResponse> {
    const path = accountPath(zrn, `/tenants/${pathSegment(tenant, 'tenant')}`);
    return this.changeTenant(zrn, tenant, 'remove', options, (idempotenceCheck) =>
      this.client.request<AcceptedResponse>('DELETE', path, options, { idempotenceCheck }),
    );
  }

  /**
   * A tenant change with an idempotence check that tells "this call's change was accepted" from "it was so
   * already": whether the participant is a tenant once the pending changes apply, read before the call and again
   * at the check. Judged by the state after the call alone, a 502 before any work made a change the server would
   * refuse (a participant that was never a tenant, removed) look accepted (review).
   */
  private async changeTenant(
    zrn: string,
    participantCode: string,
    change: 'add' | 'remove',
    options: CallOptions,
    send: (
      idempotenceCheck: (startedAt: number) => Promise<AcceptedResponse | undefined>,
    ) => Promise<AcceptedResponse>,
  ): Promise<AcceptedResponse> {
    // The read before the change has a budget of its own; the check, the change's (`startedAt`).
    const tenantOnceApplied = async (startedAt?: number) =>
      tenantsOnceApplied(await this.details(zrn, lookupOptions(options, startedAt))).has(participantCode);
    const wanted = change === 'add';
    if ((await tenantOnceApplied()) === wanted) {
      // Already so: the server refuses the change (409 or 404), and no check can call it accepted.
      return send(async () => undefined);
    }
    return send(async (startedAt) => ((await tenantOnceApplied(startedAt)) === wanted ? {} : undefined));
  }
}
