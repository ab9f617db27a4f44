/**
 * Slurm's reason codes (slurm.h `job_state_reason`, as `squeue`/`sacct` print them) in plain
 * words, for people who do not read slurm.h: why a job waits, with what its owner can do about
 * it, and why a job ended. The one table: post-job summaries and the pending view both read it.
 * https://slurm.schedmd.com/job_reason_codes.html, squeue(1) "JOB REASON CODES".
 */

/** A reason explained: Slurm's word, what it means, and (for a wait) what the user can do. */
export interface ReasonExplained {
  /** Slurm's word as sent (`Resources`, `ReqNodeNotAvail, Reserved for maintenance`). */
  code: string;
  meaning: string;
  /** What the job's owner can do; null where waiting is all there is, or for an end. */
  action: string | null;
}

interface Entry {
  meaning: string;
  action?: string;
}

const WAIT = 'nothing: it starts on its own once the scheduler gets to it';
const LIMIT_ACTION =
  'wait for jobs of the account (or QOS) to end, or ask its administrator to raise the limit; a smaller request (fewer CPUs, less memory or time) may fit sooner';

/** Reasons of a pending job. */
const PENDING: Record<string, Entry> = {
  Priority: { meaning: 'jobs with a higher priority are ahead of it in the queue', action: WAIT },
  Resources: {
    meaning: 'it waits for enough free CPUs, memory or nodes: other jobs use them now',
    action: 'wait; a shorter time limit or a smaller request may let the scheduler fit it in sooner (backfill)',
  },
  Dependency: {
    meaning: 'it waits for the jobs it depends on',
    action: 'nothing: it starts once they end as the dependency asks',
  },
  DependencyNeverSatisfied: {
    meaning: 'a job it depends on ended in a way that can never satisfy the dependency',
    action: 'cancel it, and submit it again without that dependency if it should still run',
  },
  JobHeldUser: { meaning: 'it is held by its owner', action: 'release it when it should run' },
  JobHeldAdmin: {
    meaning: 'it is held by an administrator',
    action: 'ask the cluster administrators why; only they can release it',
  },
  BeginTime: {
    meaning: 'its earliest start time (--begin) has not come yet',
    action: 'nothing: it becomes eligible then; change its begin time to start it sooner',
  },
  PartitionDown: {
    meaning: 'its partition is down',
    action: 'wait for the partition to come back, or move the job to another partition',
  },
  PartitionInactive: {
    meaning: 'its partition is inactive: it takes no jobs to run',
    action: 'move the job to another partition',
  },
  PartitionNodeLimit: {
    meaning: 'it asks for more (or fewer) nodes than the partition allows',
    action: 'change its node count, or move it to another partition',
  },
  PartitionTimeLimit: {
    meaning: "its time limit is longer than the partition's maximum",
    action: 'lower its time limit, or move it to a partition that allows it',
  },
  PartitionConfig: {
    meaning: "it asks for something the partition's configuration does not allow",
    action: 'check its request against the partition, or move it to another partition',
  },
  ReqNodeNotAvail: {
    meaning: 'a node it needs is not available: down, drained, or reserved (for maintenance, say)',
    action: 'wait for the nodes to come back or the reservation to end; a shorter time limit may let it run before',
  },
  Reservation: { meaning: 'it waits for its advance reservation to start', action: WAIT },
  ReservationDeleted: {
    meaning: 'the reservation it was submitted to was deleted',
    action: 'cancel it and submit it again without the reservation',
  },
  // Both a wait and an end: a node it needs, or one it ran on.
  NodeDown: {
    meaning: 'a node it needs, or one it was running on, went down or stopped responding',
    action: 'wait for the node to come back',
  },
  BadConstraints: {
    meaning: 'its constraints (features, memory, CPUs) cannot be met by any node',
    action: 'cancel it and submit it again with a request the nodes can meet',
  },
  InvalidAccount: {
    meaning: 'its account is not valid on this cluster or partition',
    action: 'cancel it and submit it again under an account you may use',
  },
  InvalidQOS: {
    meaning: 'its quality of service (QOS) is not valid for its account or partition',
    action: 'change its QOS, or cancel it and submit it again with a valid one',
  },
  AccountNotAllowed: {
    meaning: 'its account may not use this partition',
    action: 'move it to a partition the account may use',
  },
  QOSNotAllowed: {
    meaning: 'its QOS may not use this partition',
    action: 'change its QOS or partition',
  },
  AccountingPolicy: { meaning: 'an accounting limit of its account or QOS holds it back', action: LIMIT_ACTION },
  AssocGrpCpuLimit: {
    meaning: "the account's jobs already use all the CPUs its association may use at once",
    action: LIMIT_ACTION,
  },
  AssocGrpMemLimit: {
    meaning: "the account's jobs already use all the memory its association may use at once",
    action: LIMIT_ACTION,
  },
  AssocGrpNodeLimit: {
    meaning: "the account's jobs already use all the nodes its association may use at once",
    action: LIMIT_ACTION,
  },
  AssocGrpJobsLimit: {
    meaning: 'the account already runs as many jobs as its association may run at once',
    action: LIMIT_ACTION,
  },
  AssocGrpCPUMinutesLimit: {
    meaning: 'the account has used up the CPU minutes its association may use',
    action: 'ask the account administrator for more CPU time',
  },
  AssocMaxJobsLimit: {
    meaning: 'the user already runs as many jobs of this account as the association allows',
    action: 'nothing: it starts when one of those jobs ends',
  },
  AssocMaxWallDurationPerJobLimit: {
    meaning: 'its time limit is longer than the association allows a job',
    action: 'lower its time limit',
  },
  AssocMaxCpuPerJobLimit: {
    meaning: 'it asks for more CPUs than the association allows a job',
    action: 'ask for fewer CPUs',
  },
  QOSMaxJobsPerUserLimit: {
    meaning: 'you already run as many jobs as the QOS allows a user',
    action: 'nothing: it starts when one of your jobs ends',
  },
  QOSMaxSubmitJobPerUserLimit: {
    meaning: 'you already have as many jobs queued as the QOS allows a user',
    action: 'wait for some to end',
  },
  QOSMaxWallDurationPerJobLimit: {
    meaning: 'its time limit is longer than its QOS allows',
    action: 'lower its time limit, or use another QOS',
  },
  QOSMaxCpuPerUserLimit: {
    meaning: 'your jobs already use as many CPUs as the QOS allows a user',
    action: 'nothing: it starts when enough of your jobs end',
  },
  QOSGrpCpuLimit: { meaning: "the QOS's jobs already use all the CPUs it may use at once", action: LIMIT_ACTION },
  QOSGrpJobsLimit: { meaning: 'the QOS already runs as many jobs as it may', action: LIMIT_ACTION },
  QOSJobLimit: { meaning: "the QOS's job limit is reached", action: LIMIT_ACTION },
  QOSResourceLimit: { meaning: "the QOS's resource limit is reached", action: LIMIT_ACTION },
  QOSTimeLimit: { meaning: "the QOS's time limit is reached", action: LIMIT_ACTION },
  JobArrayTaskLimit: {
    meaning: 'the array already runs as many tasks as its throttle (`%` in --array) allows',
    action: 'nothing: the next task starts as one ends; raise the throttle to run more at once',
  },
  Licenses: { meaning: 'it waits for licenses other jobs hold', action: WAIT },
  Cleaning: {
    meaning: 'it was requeued and Slurm is still cleaning up after its previous run',
    action: WAIT,
  },
  Prolog: { meaning: 'the node prolog is still running', action: WAIT },
  FrontEndDown: { meaning: 'no front end node is available to run it', action: 'ask the cluster administrators' },
  SchedDefer: {
    meaning: 'the scheduler defers it (it is configured to start jobs only in its main cycle)',
    action: WAIT,
  },
  Reboot: { meaning: 'its nodes are being rebooted for it', action: WAIT },
  PowerUpNode: { meaning: 'its nodes are being powered up', action: WAIT },
  NodeActivation: { meaning: 'its nodes are starting up', action: WAIT },
  BurstBufferResources: { meaning: 'it waits for burst buffer space', action: WAIT },
  BurstBufferStageIn: { meaning: 'its burst buffer is being staged in', action: WAIT },
  JobHoldMaxRequeue: {
    meaning: 'it was requeued more often than the cluster allows, and is held',
    action: 'find out why it keeps failing, then release it or cancel it',
  },
  'launch failed requeued held': {
    meaning: 'launching it failed, and it was requeued and held',
    action: 'ask the cluster administrators; release it once the cause is fixed',
  },
  WaitingForScheduling: { meaning: 'the scheduler has not looked at it yet', action: WAIT },
  InactiveLimit: { meaning: 'it reached the cluster inactivity limit', action: 'ask the cluster administrators' },
};

/** Families of accounting limits (`AssocGrp*`, `QOSMax*`, ...): a member the table lacks still reads well. */
const FAMILIES: { prefix: string; meaning: string }[] = [
  { prefix: 'AssocGrp', meaning: "an aggregate limit of the job's account (association) is reached" },
  { prefix: 'AssocMax', meaning: "a part of the request exceeds a per-job or per-user limit of the job's account" },
  { prefix: 'QOSGrp', meaning: "an aggregate limit of the job's QOS is reached" },
  { prefix: 'QOSMax', meaning: "a part of the request exceeds a per-job or per-user limit of the job's QOS" },
  { prefix: 'QOSMin', meaning: "the request is below a minimum of the job's QOS" },
  { prefix: 'Max', meaning: "a per-account limit of the job's QOS is reached" },
];

/** Reasons of an ended job. */
const ENDED: Record<string, Entry> = {
  NonZeroExitCode: { meaning: 'the batch script ended with a non-zero exit code, so Slurm counts the job as failed' },
  TimeLimit: { meaning: 'the job was still running when its time limit ran out, so Slurm stopped it' },
  OutOfMemory: { meaning: 'a process of the job used more memory than the job requested, and the kernel killed it' },
  NodeFail: { meaning: 'a node the job was running on failed' },
  RaisedSignal: { meaning: 'the job was ended by a signal (killed from outside, or it crashed)' },
  JobLaunchFailure: {
    meaning: 'Slurm could not start the job on its node (a missing working directory, executable or file system)',
  },
  DeadLine: { meaning: 'it could not finish before its deadline' },
  SystemFailure: { meaning: 'Slurm, the file system or the network failed' },
  Cancelled: { meaning: 'someone cancelled it' },
  Preempted: { meaning: 'a job with a higher priority took its resources' },
};

const BY_LOWER = new Map<string, Entry>(
  [...Object.entries(ENDED), ...Object.entries(PENDING)].map(([code, entry]) => [code.toLowerCase(), entry]),
);

/**
 * The plain-words meaning of a reason code, with what to do for a wait.
 * Slurm adds details after a comma (`ReqNodeNotAvail, Reserved for maintenance`,
 * `ReqNodeNotAvail, UnavailableNodes:node[1-2]`): the word before it is looked up, and the code
 * kept whole. An unknown word is shown as Slurm's own.
 * Null for none (`None`, or absent).
 */
export function explainReason(code: string | null): ReasonExplained | null {
  // `None` is Slurm's word for no reason.
  if (!code || code === 'None') return null;
  const word = code.split(',')[0]?.trim() ?? code;
  // slurm.h spells some codes in two ways over the versions (AssocGrpCpuLimit, AssocGrpCPULimit).
  const entry = BY_LOWER.get(word.toLowerCase());
  if (entry) return { code, meaning: entry.meaning, action: entry.action ?? null };
  const family = FAMILIES.find(({ prefix }) => word.startsWith(prefix));
  if (family) return { code, meaning: family.meaning, action: LIMIT_ACTION };
  return { code, meaning: 'a Slurm reason code schedflow has no plain words for', action: null };
}

/** Whether schedflow has words of its own for the code (an unknown one is shown as Slurm's word). */
export function isKnownReason(code: string): boolean {
  const word = code.split(',')[0]?.trim() ?? code;
  return BY_LOWER.has(word.toLowerCase()) || FAMILIES.some(({ prefix }) => word.startsWith(prefix));
}
