import { upstreamActor } from '../access/principal.js';
import type { History } from '../db/history.js';
import { getRun, markRunFollowed, runsToFollow, stepRequests } from '../db/runs.js';
import type { PipelineRunRow } from '../db/schema.js';
import { ConfigError, SchedflowError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import { runOutputsView } from '../views/views.js';
import type { LoadedPipeline, RunEnd } from './pipeline-file.js';
import { createRun, type RunEngineDeps } from './run-engine.js';
import type { UpstreamRun } from './run-plan.js';
import { upstreamsOf } from './upstream-links.js';

/**
 * Runs that start runs: when a run ends, each pipeline whose `on:` names it for that end gets a
 * run, with the ended run's values as `${upstream.…}`. The end is followed from the history, not
 * from the moment it happens: an ended run is marked followed only after its downstream runs are
 * made, so an end the daemon did not get to (killed, restarted) is followed by the next pipeline
 * tick, and the unique (pipeline, upstream run, attempt) of pipeline_runs makes a second follower
 * (another process or host, or a retry after a crash between the two writes) find the run made.
 */

/** Ended runs taken per pipeline tick: a burst of ends is followed over a few ticks, never in one long one. */
const FOLLOW_BATCH = 50;

/** Whether an end of a run in `state` is one that `on.<end>` follows. */
export function endMatches(end: RunEnd, state: PipelineRunRow['state']): boolean {
  if (end === 'finished') return state === 'succeeded' || state === 'failed' || state === 'cancelled';
  return end === state;
}

/** The pipelines whose `on:` follows this run's end, each once. */
export function downstreamOf(pipelines: Iterable<LoadedPipeline>, run: PipelineRunRow): LoadedPipeline[] {
  const out: LoadedPipeline[] = [];
  for (const p of pipelines) {
    const follows = upstreamsOf(p).some(([end, upstream]) => upstream === run.pipeline && endMatches(end, run.state));
    if (follows) out.push(p);
  }
  return out;
}

/**
 * The steps of `pipeline` whose outputs the pipelines that follow it use: read when its runs'
 * steps end (outputs are read only where something uses them), so its end can hand them on.
 */
export function outputsUsedDownstream(pipelines: Iterable<LoadedPipeline>, pipeline: string): Set<string> {
  const steps = new Set<string>();
  for (const p of pipelines) {
    if (p.upstreamRefs.length === 0 || !upstreamsOf(p).some(([, upstream]) => upstream === pipeline)) continue;
    for (const ref of p.upstreamRefs) steps.add(ref.step);
  }
  return steps;
}

/**
 * The upstream run of a run it started, as the run was made from it: for a resume that renders
 * the steps again (new parameters). The upstream run's outputs are read as they are now.
 */
export async function upstreamOf(h: History, run: PipelineRunRow): Promise<UpstreamRun> {
  const upstream = run.upstreamRunId === null ? undefined : await getRun(h, run.upstreamRunId);
  if (!upstream) {
    throw new ConfigError(
      `run ${run.id} was started by run ${run.upstreamRunId}, which the history no longer holds (pruned by retention): resume it without new parameters`,
    );
  }
  if (upstream.attempt !== run.upstreamAttempt) {
    throw new ConfigError(
      `run ${run.id} was started by the end of attempt ${run.upstreamAttempt} of run ${upstream.id}, which has been resumed since (attempt ${upstream.attempt}): its values are not those this run was made with; resume it without new parameters`,
    );
  }
  return {
    runId: upstream.id,
    pipeline: upstream.pipeline,
    state: upstream.state,
    outputs: runOutputsView(await stepRequests(h, upstream.id)),
  };
}

/** How far back a chain of runs that started runs is walked for a loop. */
const MAX_CHAIN = 64;

/**
 * The pipelines of the runs whose ends led to this one (its own first), through each run's
 * upstream run: a follower found here would close a loop.
 */
async function chainOf(h: History, run: PipelineRunRow): Promise<Set<string>> {
  const names = new Set([run.pipeline]);
  let next = run.upstreamRunId;
  for (let depth = 0; next !== null && depth < MAX_CHAIN; depth++) {
    const upstream = await getRun(h, next);
    if (!upstream) break;
    names.add(upstream.pipeline);
    next = upstream.upstreamRunId;
  }
  return names;
}

/**
 * Why `follower` may not start on `run`'s end though its `on:` names it, or null. Checked again
 * here, not only when files load: a file that stops passing its checks keeps its older version
 * running, and hosts may hold different folders. The run's outputs reach the follower's steps:
 * its owner must be the run's, or one the upstream pipeline (as loaded now) allows. A follower
 * already in the run's chain would start runs for ever.
 */
function refusal(
  follower: LoadedPipeline,
  run: PipelineRunRow,
  upstream: LoadedPipeline | undefined,
  chain: ReadonlySet<string>,
): string | null {
  const owner = follower.def.owner;
  if (run.owner !== owner && !upstream?.def.allow.includes(owner)) {
    return `run ${run.id} is owner "${run.owner}"'s, and pipeline "${run.pipeline}" does not allow "${owner}"`;
  }
  if (chain.has(follower.name)) {
    return `run ${run.id} was itself started by a run of "${follower.name}" (a loop: ${[...chain].reverse().join(' → ')} → ${follower.name})`;
  }
  return null;
}

/**
 * Makes the runs that ended runs start, and marks those ends followed. A downstream run that
 * cannot be made for a reason of its own (its plan, the door) is recorded `skipped` with it by
 * createRun; anything else leaves the end unfollowed, tried again at the next tick. Returns the
 * runs made.
 */
export async function followEndedRuns(
  engine: RunEngineDeps,
  pipelines: () => Iterable<LoadedPipeline>,
): Promise<PipelineRunRow[]> {
  const made: PipelineRunRow[] = [];
  for (const run of await runsToFollow(engine.store, FOLLOW_BATCH))
    made.push(...(await followRun(engine, pipelines, run)));
  return made;
}

/** Follows one ended run's end (followEndedRuns), if it is still that end and not followed yet. */
export async function followRun(
  engine: RunEngineDeps,
  pipelines: () => Iterable<LoadedPipeline>,
  run: PipelineRunRow,
): Promise<PipelineRunRow[]> {
  const { store, logger } = engine;
  const made: PipelineRunRow[] = [];
  const loaded = [...pipelines()];
  const downstream = downstreamOf(loaded, run);
  let followed = true;
  const steps = downstream.length > 0 ? await stepRequests(store, run.id) : [];
  // Resumed (or followed) since it was listed: its outputs may be another attempt's; the
  // next pass sees it as it is.
  const now = downstream.length > 0 ? await getRun(store, run.id) : run;
  if (now?.attempt !== run.attempt || now.state !== run.state || now.downstreamCheckedAt !== null) return [];
  // A run cancelled while queued behind another never ran: it starts nothing.
  if (steps.length > 0) {
    // As the run's webhook carries them: each step's newest attempt that wrote any.
    const outputs = runOutputsView(steps);
    const upstream = loaded.find((p) => p.name === run.pipeline);
    const chain = await chainOf(store, run);
    for (const pipeline of downstream) {
      const refused = refusal(pipeline, run, upstream, chain);
      if (refused) {
        logger.warn({ pipeline: pipeline.name, upstreamRunId: run.id }, `not started: ${refused}`);
        continue;
      }
      try {
        made.push(
          await createRun(engine, pipeline, {
            trigger: 'upstream',
            triggeredBy: `run ${run.id} of ${run.pipeline}, ${run.state}`,
            actor: upstreamActor(run.pipeline),
            params: {},
            upstream: { runId: run.id, attempt: run.attempt, pipeline: run.pipeline, state: run.state, outputs },
          }),
        );
      } catch (error) {
        if (!(error instanceof SchedflowError)) throw error;
        followed = false;
        logger.error(
          { err: error, pipeline: pipeline.name, upstreamRunId: run.id },
          'a run that an upstream run starts could not be made: tried again at the next tick',
        );
      }
    }
  }
  if (followed) await markRunFollowed(store, run, (engine.clock ?? systemClock).now());
  return made;
}
