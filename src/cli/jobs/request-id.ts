import { openCliHistory } from '../cli-history.js';
import { findRequest } from '../request-reference.js';

/** The full id of the request `given` names (an id, a unique start of one, a Slurm job id), read from the history. */
export async function requestIdOf(dataDir: string, given: string): Promise<string> {
  const history = await openCliHistory(dataDir, { write: false });
  try {
    return (await findRequest(history.store, given)).row.id;
  } finally {
    await history.close();
  }
}
