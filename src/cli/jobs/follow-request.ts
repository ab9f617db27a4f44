import type { OpenedHistory } from '../../db/open-history.js';
import { getRequest, transitionsOf } from '../../db/requests.js';
import type { JobRequestRow } from '../../db/schema.js';
import { sleep } from '../../lib/sleep.js';
import { isTerminalRequest } from '../../requests/request-state.js';
import { print } from '../terminal.js';

/**
 * Follows a request through the history (`--wait`), printing each transition, until it ends.
 * The history is read, never written: the daemon does the work.
 */
export async function followRequest(history: OpenedHistory, requestId: string, json: boolean): Promise<JobRequestRow> {
  let printed = 0;
  // Why a request does not move (its profile cannot work, the scheduler does not answer): the
  // error the daemon keeps on it while it waits, said once each time it changes, never silence.
  let said: string | null = null;
  for (;;) {
    const row = await getRequest(history.store, requestId);
    const transitions = row ? await transitionsOf(history.store, requestId) : [];
    for (const t of transitions.slice(printed)) {
      const line = json
        ? JSON.stringify({
            at: new Date(t.at).toISOString(),
            from: t.fromState,
            to: t.toState,
            source: t.source,
            reason: t.reason,
            detail: t.detail,
          })
        : `${new Date(t.at).toLocaleTimeString()}  ${t.fromState ?? '-'} → ${t.toState}  (${t.source}${t.reason ? `, ${t.reason}` : ''}${t.stale ? ', stale' : ''})${t.detail ? `  ${t.detail}` : ''}`;
      print(`${line}\n`);
    }
    printed = transitions.length;
    if (row && isTerminalRequest(row.state)) return row;
    const waitingOn = row && row.jobId === null ? row.errorMessage : null;
    if (waitingOn && waitingOn !== said) {
      print(
        json
          ? `${JSON.stringify({ at: new Date().toISOString(), state: row?.state, waiting: waitingOn, code: row?.errorCode })}\n`
          : `${new Date().toLocaleTimeString()}  still ${row?.state}, not submitted: ${waitingOn}\n`,
      );
    }
    said = waitingOn ?? said;
    await sleep(500);
  }
}
