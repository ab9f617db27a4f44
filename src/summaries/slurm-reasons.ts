/**
 * Slurm's reason codes (slurm.h `job_state_reason`, as `squeue`/`sacct`
 * print them) in plain words, for people who do not read slurm.h.
 * https://slurm.schedmd.com/job_reason_codes.html
 */
const MEANINGS: Record<string, string> = {
  NonZeroExitCode: 'the batch script ended with a non-zero exit code, so Slurm counts the job as failed',
  TimeLimit: 'the job was still running when its time limit ran out, so Slurm stopped it',
  OutOfMemory: 'a process of the job used more memory than the job requested, and the kernel killed it',
  NodeDown: 'a node the job was running on went down or stopped responding',
  NodeFail: 'a node the job was running on failed',
  RaisedSignal: 'the job was ended by a signal (killed from outside, or it crashed)',
  JobLaunchFailure:
    'Slurm could not start the job on its node (a missing working directory, executable or file system)',
  DependencyNeverSatisfied: 'a job it depends on ended in a way that can never satisfy the dependency, so it never ran',
  Dependency: 'it waits for the jobs it depends on',
  Resources: 'it waits for enough free CPUs, memory or nodes',
  Priority: 'other jobs with higher priority go first',
  BeginTime: 'its start time has not come yet',
  PartitionTimeLimit: "its time limit is longer than the partition's maximum",
  PartitionNodeLimit: 'it asks for more nodes than the partition allows',
  PartitionDown: 'its partition is down',
  ReqNodeNotAvail: 'a node it requires is not available (down, drained or reserved)',
  Reservation: 'it waits for its advance reservation',
  InvalidAccount: 'its account is not valid on this cluster or partition',
  InvalidQOS: 'its quality of service (QOS) is not valid for its account or partition',
  QOSMaxWallDurationPerJobLimit: 'its time limit is longer than its QOS allows',
  AssocMaxJobsLimit: 'the account already runs as many jobs as it may',
  AssocGrpCpuLimit: 'the account group already uses all the CPUs it may',
  AssocGrpMemLimit: 'the account group already uses all the memory it may',
  BadConstraints: 'its constraints cannot be met by any node',
  DeadLine: 'it could not finish before its deadline',
  Prolog: 'the node prolog is still running',
  SystemFailure: 'Slurm, the file system or the network failed',
  Cancelled: 'someone cancelled it',
  Preempted: 'a job with a higher priority took its resources',
};

/** The plain-words meaning of a reason code; null for none (`None`) or an unknown one. */
export function explainReason(code: string | null): { code: string; meaning: string } | null {
  if (!code || code === 'None') return null;
  const meaning = MEANINGS[code];
  return meaning ? { code, meaning } : { code, meaning: 'a Slurm reason code schedflow has no explanation for' };
}

/** Signal numbers of Linux x86-64/arm64 that end jobs, by name. */
const SIGNALS: Record<number, string> = {
  1: 'SIGHUP',
  2: 'SIGINT',
  4: 'SIGILL',
  6: 'SIGABRT',
  7: 'SIGBUS',
  8: 'SIGFPE',
  9: 'SIGKILL',
  11: 'SIGSEGV',
  13: 'SIGPIPE',
  15: 'SIGTERM',
  24: 'SIGXCPU',
  25: 'SIGXFSZ',
};

export function signalName(signal: number): string {
  return SIGNALS[signal] ?? `signal ${signal}`;
}
