import type { Executor } from '../../store/database.ts';

export function findCustomerAccount(db: Executor, zrn: string) {
  return db.selectFrom('customer_accounts').selectAll().where('zrn', '=', zrn).executeTakeFirst();
}

export type CustomerAccountRow = NonNullable<Awaited<ReturnType<typeof findCustomerAccount>>>;
