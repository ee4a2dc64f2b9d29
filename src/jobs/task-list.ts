import type { TaskList } from 'graphile-worker';
import type { Services } from '../domain/services.ts';

/** Every background task, by name. Add an area's tasks here (`<area>.jobs.ts` exports a TaskList). */
export function buildTaskList(_services: Services): TaskList {
  return {};
}
