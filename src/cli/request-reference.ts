import { tasksOf } from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import { getRequest, requestsByAnyJobId, requestsByIdPrefix } from '../db/requests.js';
import type { ArrayTaskRow, JobRequestRow } from '../db/schema.js';
import { ConfigError } from '../errors.js';

/**
 * How a person names a job request on the command line: its id, the start of it (ids are
 * abbreviated as git's are: `schedflow jobs show 3f2a9c`), or the Slurm job id the scheduler
 * gave it (`123`, or `123_4` for task 4 of array job 123). Anything that matches more than one
 * request is refused with the candidates, so a command never acts on a guess.
 */

/** A request named on the command line, and the array task when one was named (`123_4`). */
export interface NamedRequest {
  row: JobRequestRow;
  task?: { taskId: number; row: ArrayTaskRow | undefined };
}

/** Candidates listed when a name matches several requests. */
const CANDIDATES_SHOWN = 10;

/** What may start a request id: ids are UUIDs, so nothing else can, and no character is special to SQL. */
const ID_PREFIX = /^[0-9a-f-]+$/;
/** A Slurm job id, or an array task's `<array job id>_<task id>`. */
const SLURM_JOB_ID = /^(\d+)(?:_(\d+))?$/;

/**
 * The one request `given` names. `allowTask`: whether the command acts on one task of an array
 * (`jobs show` and `jobs output` do); the others act on the whole request, so `123_4` is refused there, naming
 * the request.
 */
export async function findRequest(
  h: History,
  given: string,
  options: { allowTask?: boolean } = {},
): Promise<NamedRequest> {
  const exact = await getRequest(h, given);
  if (exact) return { row: exact };
  const slurm = SLURM_JOB_ID.exec(given);
  if (slurm?.[2] !== undefined) return arrayTask(h, given, Number(slurm[1]), Number(slurm[2]), options);
  const candidates = new Map<string, JobRequestRow>();
  const lower = given.toLowerCase();
  if (ID_PREFIX.test(lower)) {
    for (const row of await requestsByIdPrefix(h, lower, CANDIDATES_SHOWN + 1)) candidates.set(row.id, row);
  }
  if (slurm && Number.isSafeInteger(Number(slurm[1]))) {
    for (const row of await requestsByAnyJobId(h, Number(slurm[1]))) candidates.set(row.id, row);
  }
  const rows = [...candidates.values()];
  const [only] = rows;
  if (only && rows.length === 1) return { row: only };
  if (rows.length > 1) throw ambiguous(given, rows);
  throw new ConfigError(notFoundMessage(given, slurm !== null));
}

async function arrayTask(
  h: History,
  given: string,
  arrayJobId: number,
  taskId: number,
  options: { allowTask?: boolean },
): Promise<NamedRequest> {
  const arrays = (await requestsByAnyJobId(h, arrayJobId)).filter(
    (row) => row.jobId === arrayJobId && row.arrayTaskCount !== null,
  );
  const [only] = arrays;
  if (!only) {
    throw new ConfigError(
      `no array job request has Slurm job ${arrayJobId} (from ${given}, task ${taskId} of array job ${arrayJobId}); ${LOOK_ELSEWHERE(arrayJobId)}`,
    );
  }
  if (arrays.length > 1) throw ambiguous(given, arrays);
  if (!options.allowTask) {
    throw new ConfigError(
      `${given} is task ${taskId} of the array job of request ${only.id}; this command acts on the whole request: name it by ${only.id} (schedflow jobs show ${given} shows the task, schedflow jobs output ${given} its output)`,
    );
  }
  const task = (await tasksOf(h, only.id)).find((t) => t.taskId === taskId);
  return { row: only, task: { taskId, row: task } };
}

const LOOK_ELSEWHERE = (jobId: number) =>
  `a job schedflow did not submit is in schedflow jobs history, or ask the scheduler: schedflow sched job ${jobId}`;

function notFoundMessage(given: string, numeric: boolean): string {
  if (numeric) {
    return `no job request has the id ${given}, one starting with it, or Slurm job ${given}; ${LOOK_ELSEWHERE(Number(given))}`;
  }
  const hint = ID_PREFIX.test(given.toLowerCase())
    ? // A whole id no request has is most often one `schedflow sched submit` printed.
      "an id printed by schedflow sched submit is that command's marker for the scheduler, not a request of the daemon (only jobs queued with schedflow jobs submit, the API or a pipeline are); schedflow jobs list shows the requests"
    : 'name a request by its id, the start of it, or its Slurm job id (123, or 123_4 for an array task); schedflow jobs list shows them';
  return `no job request ${given} in the history: ${hint}`;
}

function ambiguous(given: string, rows: JobRequestRow[]): ConfigError {
  const shown = rows
    .slice(0, CANDIDATES_SHOWN)
    .map(
      (row) =>
        `  ${row.id}  ${row.name}  ${row.state}  ${row.jobId === null ? 'no job yet' : `job ${row.jobId}`} (profile ${row.profile})`,
    );
  const more = rows.length > CANDIDATES_SHOWN ? ['  … and more'] : [];
  return new ConfigError(
    [`${given} names more than one job request; give more of the id:`, ...shown, ...more].join('\n'),
  );
}
