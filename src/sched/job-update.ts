/**
 * One change to a job Slurm already has (POST {ctl}/job/{id}): what `scontrol update job` sets.
 * Absent members are left as they are.
 */
export interface JobUpdate {
  timeLimitMin?: number;
  partition?: string;
  qos?: string;
  nice?: number;
  name?: string;
  comment?: string;
  /** true = hold (user hold), false = release */
  hold?: boolean;
}
