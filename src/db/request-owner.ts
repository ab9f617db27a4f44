import { eq, sql } from 'drizzle-orm';
import type { History } from './history.js';
import type { JobRequestRow } from './schema.js';

/**
 * A request's state and owner, without reading its spec: what queueing its submit job needs
 * (the fair share between owners orders submit jobs by owner, src/queue/fair-share.ts).
 */
export async function requestStateAndOwnerOf(
  h: History,
  id: string,
): Promise<Pick<JobRequestRow, 'state' | 'owner'> | undefined> {
  const t = h.t.jobRequests;
  const rows = await h.prepared(
    'requests.stateAndOwnerById',
    () =>
      h.db
        .select({ state: t.state, owner: t.owner })
        .from(t)
        .where(eq(t.id, sql.placeholder('id'))),
    { id },
  );
  return rows[0];
}
