import type { ApiVersion } from '../../src/sched/versions.js';
import type { StepRecord } from './reduce.js';
import { type SequenceOptions, SequenceRun, TERMINAL, UNKNOWN_JOB_ID } from './sequence-run.js';
import type { DiffTarget } from './target.js';

/**
 * The fixed sequence of requests of the differential check: what schedflow and its
 * operators ask plain slurmrestd, and the ways it says no. Run against a real Slurm it
 * records the fixtures; run against the simulator, its records must equal them.
 */

export type { SequenceOptions } from './sequence-run.js';

const nowSec = (): number => Math.floor(Date.now() / 1000);

/** Runs the sequence for one API version; the records are in the order of the steps. */
export async function runSequence(
  target: DiffTarget,
  version: ApiVersion,
  options: SequenceOptions = {},
): Promise<StepRecord[]> {
  const run = new SequenceRun(target, version, options);
  // Accounting windows start a little before the first submission (whole seconds on both sides).
  run.setTime('start', nowSec() - 5);

  await run.step('ping', { path: '/slurm/{v}/ping' });

  // slurmrestd authenticates before it routes: no credentials, no answer but 401, on any path.
  await run.step('no credentials: ping', { path: '/slurm/{v}/ping', as: 'none' });
  await run.step('no credentials: job listing', { path: '/slurm/{v}/jobs', as: 'none' });
  await run.step('no credentials: accounting', { path: '/slurmdb/{v}/jobs', as: 'none' });
  await run.step('no credentials: unknown path', { path: '/slurm/{v}/no-such-endpoint', as: 'none' });
  await run.step('no credentials: path outside the API', { path: '/no-such-path', as: 'none' });
  await run.step('unknown path', { path: '/slurm/{v}/no-such-endpoint' });
  await run.step('unknown path outside the API', { path: '/no-such-path' });
  await run.step('unknown API version', { path: '/slurm/v0.0.1/ping' });

  // A token slurmrestd passes on and Slurm cannot verify: each daemon says so its own way.
  await run.step('bad token: ping', { path: '/slurm/{v}/ping', as: 'bad-token' });
  await run.step('bad token: job listing', { path: '/slurm/{v}/jobs', as: 'bad-token' });
  await run.step('bad token: jobs/state', { path: '/slurm/{v}/jobs/state?job_id=1', as: 'bad-token' });
  await run.step('bad token: one job', { path: '/slurm/{v}/job/1', as: 'bad-token' });
  await run.step('bad token: submit', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    as: 'bad-token',
    body: run.jobBody('bad-token', 'true'),
  });
  await run.step('bad token: cancel', { method: 'DELETE', path: '/slurm/{v}/job/1', as: 'bad-token' });
  await run.step('bad token: accounting', { path: '/slurmdb/{v}/jobs?step=1', as: 'bad-token' });
  await run.step('bad token: accounting job', { path: '/slurmdb/{v}/job/1', as: 'bad-token' });

  await run.submit('submit (accepted)', 'ok', 'sleep 1');
  await run.submit('submit a job that exits 3', 'failed', 'sleep 1; exit 3');
  await run.submit('submit a job to cancel', 'cancelled', 'sleep 300');
  // slurmctld does not read the script: one without `#!` is accepted, and fails when slurmd cannot exec it.
  await run.submit('submit a script without #!', 'noexec', 'echo no interpreter line', 'alice', '');

  await run.step('submit refused: unknown partition', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: run.jobBody('refused', 'true', { partition: 'no-such-partition' }),
  });
  await run.step('submit refused: partition not allowed for the account (bob on lab-owner)', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    as: 'bob',
    body: run.jobBody('refused', 'true', { partition: 'lab-owner' }),
  });
  await run.step('submit refused: account the user has no association with (bob as lab)', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    as: 'bob',
    body: run.jobBody('refused', 'true', { account: 'lab' }),
  });

  await run.step('submit refused: no script', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: {
      job: { name: 'sf-diff-refused', current_working_directory: target.workDir, environment: ['PATH=/usr/bin:/bin'] },
    },
  });
  await run.step('submit refused: empty script', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: run.jobBody('refused', '', { script: '' }),
  });
  await run.step('submit refused: no environment', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: {
      job: { name: 'sf-diff-refused', script: '#!/bin/bash\ntrue\n', current_working_directory: target.workDir },
    },
  });
  await run.step('submit refused: more CPUs than the node has', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: run.jobBody('refused', 'true', { tasks: 64 }),
  });
  await run.step('submit refused: more memory than the node has', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: run.jobBody('nomem', 'true', { memory_per_node: { set: true, infinite: false, number: 99_999_999 } }),
  });
  // That refusal leaves a job behind: slurmctld had made its record (FAILED, BadConstraints) and
  // slurmdbd keeps it. Its id is only in the listings.
  await run.adopt('nomem');
  await run.step('submit refused: dependency on an unknown job', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: run.jobBody('refused', 'true', { dependency: `afterok:${UNKNOWN_JOB_ID}` }),
  });
  await run.step('submit refused: body is not JSON', {
    method: 'POST',
    path: '/slurm/{v}/job/submit',
    body: 'not json',
  });

  // slurmrestd's data_parser coerces what it can: a number or boolean where a string belongs, a
  // string or fraction where an integer does, each with a warning; what it cannot read it drops
  // with a warning and no error (HTTP 200, no job). Its JSON reader takes bare NaN and Infinity.
  const bare = (token: string): string =>
    JSON.stringify(run.jobBody('coerced', 'true', { tasks: '@bare@' })).replace('"@bare@"', token);
  await run.submitAside('submit coerced: tasks NaN (bare, not JSON)', bare('NaN'));
  await run.submitAside('submit coerced: tasks Infinity (bare, not JSON)', bare('Infinity'));
  await run.submitAside('submit coerced: tasks -Infinity (bare, not JSON)', bare('-Infinity'));
  await run.submitAside('submit coerced: tasks a fraction', run.jobBody('coerced', 'true', { tasks: 2.5 }));
  await run.submitAside('submit coerced: tasks a numeric string', run.jobBody('coerced', 'true', { tasks: '2' }));
  await run.submitAside(
    'submit coerced: cpus_per_task a numeric string',
    run.jobBody('coerced', 'true', { cpus_per_task: '1' }),
  );
  await run.submitAside('submit dropped: tasks a word', run.jobBody('coerced', 'true', { tasks: 'two' }));
  await run.submitAside('submit dropped: tasks a boolean', run.jobBody('coerced', 'true', { tasks: true }));
  await run.submitAside('submit coerced: name a number', run.jobBody('coerced', 'true', { name: 5 }));
  await run.submitAside('submit coerced: name a fraction', run.jobBody('coerced', 'true', { name: 5.5 }));
  await run.submitAside('submit coerced: name a boolean', run.jobBody('coerced', 'true', { name: true }));
  await run.submitAside('submit coerced: comment a number', run.jobBody('coerced', 'true', { comment: 7 }));

  await run.waitForControllerStates(['cancelled'], (s) => s === 'RUNNING');
  await run.step("cancel another user's job", { method: 'DELETE', path: '/slurm/{v}/job/{cancelled}', as: 'bob' });
  await run.step('cancel own job', { method: 'DELETE', path: '/slurm/{v}/job/{cancelled}' });
  await run.step('cancel an unknown job', { method: 'DELETE', path: '/slurm/{v}/job/{unknown}' });
  await run.step('one job: unknown id', { path: '/slurm/{v}/job/{unknown}' });
  await run.step('one job: not a job id', { path: '/slurm/{v}/job/not-a-number' });

  await run.waitForControllerStates(['ok', 'failed', 'cancelled', 'noexec'], (s) => TERMINAL.has(s));
  await run.step('cancel a finished job', { method: 'DELETE', path: '/slurm/{v}/job/{ok}' });

  await run.step('job listing', { path: '/slurm/{v}/jobs' });
  run.setTime('future', nowSec() + 3600);
  await run.step('job listing: nothing changed since update_time', { path: '/slurm/{v}/jobs?update_time={future}' });
  await run.step('one job: completed', { path: '/slurm/{v}/job/{ok}' });
  await run.step('one job: failed', { path: '/slurm/{v}/job/{failed}' });
  await run.step('one job: cancelled', { path: '/slurm/{v}/job/{cancelled}' });
  await run.step('one job: script without #!', { path: '/slurm/{v}/job/{noexec}' });
  await run.step('one job: refused for memory', { path: '/slurm/{v}/job/{nomem}' });

  await run.step('jobs/state: all', { path: '/slurm/{v}/jobs/state' });
  await run.step('jobs/state: one id', { path: '/slurm/{v}/jobs/state?job_id={ok}' });
  await run.step('jobs/state: several ids as repeated job_id', {
    path: '/slurm/{v}/jobs/state?job_id={ok}&job_id={failed}&job_id={cancelled}',
  });
  await run.step('jobs/state: ids as CSV', { path: '/slurm/{v}/jobs/state?job_id={ok},{failed}' });
  await run.step('jobs/state: ids as encoded CSV', { path: '/slurm/{v}/jobs/state?job_id={ok}%2C{failed}' });
  await run.step('jobs/state: unknown id', { path: '/slurm/{v}/jobs/state?job_id={unknown}' });
  await run.step('jobs/state: not a job id', { path: '/slurm/{v}/jobs/state?job_id=not-a-number' });

  await run.waitForAccounting(['ok', 'failed', 'cancelled', 'noexec', 'nomem']);
  run.setTime('end', nowSec() + 60);
  await run.step('accounting: start_time', { path: '/slurmdb/{v}/jobs?start_time={start}' });
  await run.step('accounting: account', { path: '/slurmdb/{v}/jobs?start_time={start}&account=lab' });
  await run.step('accounting: accounts as repeated account', {
    path: '/slurmdb/{v}/jobs?start_time={start}&account=lab&account=other',
  });
  await run.step('accounting: job_name', {
    path: '/slurmdb/{v}/jobs?start_time={start}&job_name=sf-diff-failed-{v}-{run}',
  });
  await run.step('accounting: users', { path: '/slurmdb/{v}/jobs?start_time={start}&users=alice' });
  await run.step('accounting: state with start_time and end_time', {
    path: '/slurmdb/{v}/jobs?start_time={start}&end_time={end}&state=FAILED',
  });
  // slurmdbd ends a state query's window at its start when no end_time is given.
  // (Narrowed by job_name so that no other job on the cluster can make the answer non-empty.)
  await run.step('accounting: state with start_time only', {
    path: '/slurmdb/{v}/jobs?start_time={start}&state=FAILED&job_name=sf-diff-failed-{v}-{run}',
  });
  await run.step('accounting: active states with start_time and job ids (the poller)', {
    path: '/slurmdb/{v}/jobs?step={ok}&step={failed}&step={cancelled}&account=lab&start_time={start}&state=PENDING&state=RUNNING',
  });
  await run.step('accounting: several states with job ids', {
    path: '/slurmdb/{v}/jobs?step={ok}&step={failed}&step={cancelled}&state=COMPLETED&state=CANCELLED',
  });
  await run.step('accounting: job ids as repeated step', {
    path: '/slurmdb/{v}/jobs?step={ok}&step={failed}&step={cancelled}',
  });
  await run.step('accounting: job ids as CSV', { path: '/slurmdb/{v}/jobs?step={ok},{failed}' });
  await run.step('accounting: job ids as encoded CSV', { path: '/slurmdb/{v}/jobs?step={ok}%2C{failed}' });
  await run.step('accounting: a start_time that is no time', { path: '/slurmdb/{v}/jobs?start_time=yesterday' });
  await run.step('accounting: nothing matches', { path: '/slurmdb/{v}/jobs?step={unknown}' });
  await run.step('accounting job: completed', { path: '/slurmdb/{v}/job/{ok}' });
  await run.step('accounting job: failed', { path: '/slurmdb/{v}/job/{failed}' });
  await run.step('accounting job: cancelled', { path: '/slurmdb/{v}/job/{cancelled}' });
  await run.step('accounting job: script without #!', { path: '/slurmdb/{v}/job/{noexec}' });
  await run.step('accounting job: refused for memory', { path: '/slurmdb/{v}/job/{nomem}' });
  await run.step('accounting job: unknown id', { path: '/slurmdb/{v}/job/{unknown}' });
  await run.step('accounting job: not a job id', { path: '/slurmdb/{v}/job/not-a-number' });

  // MaxSubmitJobs=1 on alice: one job pending or running is all she may have.
  await target.setSubmitLimit('alice', 1);
  try {
    await run.submit('submit under MaxSubmitJobs', 'limited', 'sleep 300');
    await run.step('submit refused: over MaxSubmitJobs', {
      method: 'POST',
      path: '/slurm/{v}/job/submit',
      body: run.jobBody('over-limit', 'true'),
    });
    await run.send({ method: 'DELETE', path: '/slurm/{v}/job/{limited}' });
    await run.waitForControllerStates(['limited'], (s) => TERMINAL.has(s));
  } finally {
    await target.setSubmitLimit('alice', null);
  }

  // ---- The cluster's view (issue 34): partitions, nodes and reservations. (Their answers while
  // slurmctld is gone are not recorded: on the shared test cluster another test's `cluster.sh up`
  // can bring slurmctld back under the step, and the recording then holds a live answer.)
  await run.step('cluster: partitions', { path: '/slurm/{v}/partitions' });
  await run.step('cluster: nodes', { path: '/slurm/{v}/nodes' });
  await run.step('cluster: no reservations', { path: '/slurm/{v}/reservations' });
  await target.setReservation('sf-diff-maint', 'maintenance');
  try {
    await run.step('cluster: a maintenance reservation', { path: '/slurm/{v}/reservations' });
  } finally {
    await target.setReservation('sf-diff-maint', null);
  }
  await run.step('bad token: partitions', { path: '/slurm/{v}/partitions', as: 'bad-token' });
  await run.step('bad token: nodes', { path: '/slurm/{v}/nodes', as: 'bad-token' });
  await run.step('bad token: reservations', { path: '/slurm/{v}/reservations', as: 'bad-token' });
  // ---- end of the cluster's view

  // Outages: what each endpoint answers while slurmctld, then slurmdbd, is gone.
  await target.setDaemon('slurmctld', 'down');
  try {
    await run.step('slurmctld down: ping', { path: '/slurm/{v}/ping' });
    await run.step('slurmctld down: job listing', { path: '/slurm/{v}/jobs' });
    await run.step('slurmctld down: jobs/state', { path: '/slurm/{v}/jobs/state?job_id={ok}' });
    await run.step('slurmctld down: one job', { path: '/slurm/{v}/job/{ok}' });
    await run.step('slurmctld down: submit', {
      method: 'POST',
      path: '/slurm/{v}/job/submit',
      body: run.jobBody('outage', 'true'),
    });
    await run.step('slurmctld down: cancel', { method: 'DELETE', path: '/slurm/{v}/job/{ok}' });
    await run.step('slurmctld down: accounting', { path: '/slurmdb/{v}/jobs?step={ok}' });
  } finally {
    await target.setDaemon('slurmctld', 'up');
  }
  await target.setDaemon('slurmdbd', 'down');
  try {
    await run.step('slurmdbd down: accounting', { path: '/slurmdb/{v}/jobs?step={ok}' });
    await run.step('slurmdbd down: accounting job', { path: '/slurmdb/{v}/job/{ok}' });
    await run.step('slurmdbd down: jobs/state', { path: '/slurm/{v}/jobs/state?job_id={ok}' });
  } finally {
    await target.setDaemon('slurmdbd', 'up');
  }
  return run.records;
}
