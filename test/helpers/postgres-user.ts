import { spawnSync } from 'node:child_process';

/** Whether the tests run as root, where PostgreSQL's programs and PgBouncer refuse to run and use `postgres`. */
export const asRoot = process.getuid?.() === 0;

/** The `postgres` user's ids, or null where there is no such user. */
export function postgresUserIds(): { uid: number; gid: number } | null {
  const id = (flag: string) => {
    const found = spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
    return found.status === 0 ? Number(found.stdout.trim()) : NaN;
  };
  const [uid, gid] = [id('-u'), id('-g')];
  return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : null;
}
