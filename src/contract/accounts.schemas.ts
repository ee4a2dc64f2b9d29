import { Type, type Static } from 'typebox';

/** The vendor's CustomerAccountResponse.message (GET /accounts/{zrn}/details). */
export const CustomerAccountDetails = Type.Object({
  zrn: Type.String(),
  participant_code: Type.String(),
  platform_code: Type.String(),
  prefunded: Type.Boolean(),
  account_label: Type.String(),
  account_group: Type.String(),
  type: Type.String(),
  tier: Type.Optional(Type.String()),
  status: Type.String(),
  tenants: Type.Array(Type.String()),
  financial_advisors: Type.Array(Type.String()),
});
export type CustomerAccountDetails = Static<typeof CustomerAccountDetails>;
