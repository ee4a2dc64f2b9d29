import type { ColumnType } from 'kysely';

export interface WorkerHeartbeatsTable {
  worker_id: string;
  hostname: string;
  pid: number;
  seen_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface JobsTables {
  worker_heartbeats: WorkerHeartbeatsTable;
}
