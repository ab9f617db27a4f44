import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  constants as fsConstants,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  writeSync,
} from 'node:fs';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import type { JobUser } from './job-user.js';
import { defaultOutputPattern, expandOutputPattern, type SimJob } from './sim-job.js';

/** How a batch script ended, as the simulated slurmd reports it. */
export interface ProcessExit {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningProcess {
  pid: number;
  done: Promise<ProcessExit>;
  /** Signals the whole process group, as slurmd does on cancel and time-out. */
  signal(sig: NodeJS.Signals): void;
  /** The largest resident memory of the job's processes seen so far, in bytes; null when not measured. */
  peakMemoryBytes(): number | null;
  /** CPU time of the job's processes so far (sampled); null when not measured. */
  cpuSeconds(): CpuSeconds | null;
  /** When the leader started (clock ticks since boot, /proc/<pid>/stat): with the pid, its identity. */
  startTicks: number | null;
}

/**
 * The fields of `/proc/<pid>/stat` after `pid (comm)`: [0] state, [2] pgrp, [19] start time.
 * comm may hold spaces and parentheses, so they are counted from its last `)`. Throws when gone.
 */
function procStat(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The process's start time (clock ticks since boot); null when it is gone (or not Linux). */
export function processStartTicks(pid: number): number | null {
  try {
    const start = Number(procStat(pid)[19]);
    return Number.isFinite(start) ? start : null;
  } catch {
    return null;
  }
}

/**
 * How often a running script's memory is sampled. Real clusters default to 30 s
 * (JobAcctGatherFrequency); the simulator's jobs are short, so once a second.
 */
const MEMORY_SAMPLE_INTERVAL_MS = 1000;

/** The kB of a `/proc/<pid>/status` line such as `VmRSS:     1234 kB`; 0 when absent (kernel threads). */
function statusKb(status: string, key: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
  return match ? Number(match[1]) : 0;
}

/** Linux's USER_HZ: /proc counts CPU time in these ticks (100 a second on every architecture Node runs on). */
const CLOCK_TICKS_PER_SEC = 100;

/** CPU seconds of the script's processes: user and system. */
export interface CpuSeconds {
  user: number;
  system: number;
}

/** One look at a process group's members in /proc; null when no member is left (or not Linux). */
interface GroupSample {
  /** Resident bytes, as jobacct_gather/linux counts a task's: the RSS of its processes summed. */
  memoryBytes: number;
  /** Each member's own CPU ticks (utime, stime), keyed by pid and start time (pids are reused). */
  own: Map<string, [number, number]>;
  /** The leader's own ticks plus those of the children it has reaped (cutime, cstime). */
  leader: [number, number] | null;
}

/**
 * A process group's members as /proc shows them. A member's own high-water mark (VmHWM) exceeds
 * the RSS sum when it peaked between samples, so the larger of the two is its memory.
 */
function sampleGroup(pgid: number): GroupSample | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  let rssKb = 0;
  let hwmKb = 0;
  let found = false;
  const own = new Map<string, [number, number]>();
  let leader: [number, number] | null = null;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = procStat(entry);
      if (Number(stat[2]) !== pgid) continue;
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      rssKb += statusKb(status, 'VmRSS');
      hwmKb = Math.max(hwmKb, statusKb(status, 'VmHWM'));
      // Fields 14-17 of /proc/<pid>/stat: utime, stime, cutime, cstime.
      const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(stat[i]) || 0) as [
        number,
        number,
        number,
        number,
      ];
      own.set(`${entry}:${stat[19]}`, [utime, stime]);
      if (Number(entry) === pgid) leader = [utime + cutime, stime + cstime];
      found = true;
    } catch {
      // The process ended between listing and reading.
    }
  }
  return found ? { memoryBytes: Math.max(rssKb, hwmKb) * 1024, own, leader } : null;
}

/**
 * Samples a process group until stopped, keeping the peak memory and each member's last CPU
 * ticks (as jobacct_gather/linux does, by sampling); one last sample on stop. CPU time is a
 * lower bound: what a member used after its last sample is not seen, so of the sum of members'
 * own times and the leader's own and reaped children's (each a lower bound), the larger.
 */
function usageSampler(pgid: number): { peak(): number | null; cpu(): CpuSeconds | null; stop(): void } {
  let peak: number | null = null;
  const own = new Map<string, [number, number]>();
  let leader: [number, number] = [0, 0];
  let seen = false;
  const sample = () => {
    const s = sampleGroup(pgid);
    if (s === null) return;
    seen = true;
    peak = Math.max(peak ?? 0, s.memoryBytes);
    for (const [key, ticks] of s.own) own.set(key, ticks);
    if (s.leader) leader = s.leader;
  };
  // A first sample at once: a script that ends within the first interval still gets a (lower-bound) figure.
  sample();
  const timer = setInterval(sample, MEMORY_SAMPLE_INTERVAL_MS);
  // Sampling must never keep a simulator that is shutting down alive.
  timer.unref();
  return {
    peak: () => peak,
    cpu() {
      if (!seen) return null;
      let user = 0;
      let system = 0;
      for (const [u, sys] of own.values()) {
        user += u;
        system += sys;
      }
      const [leaderUser, leaderSystem] = leader;
      const [u, sys] = leaderUser + leaderSystem > user + system ? [leaderUser, leaderSystem] : [user, system];
      return { user: u / CLOCK_TICKS_PER_SEC, system: sys / CLOCK_TICKS_PER_SEC };
    },
    stop() {
      clearInterval(timer);
      // The script itself is reaped by now; children it left running in its group still count.
      sample();
    },
  };
}

/** Environment variables slurmd adds to every batch job. */
function slurmEnvironment(job: SimJob, nodeName: string, clusterName: string): string[] {
  return [
    `SLURM_JOB_ID=${job.jobId}`,
    `SLURM_JOBID=${job.jobId}`,
    `SLURM_JOB_NAME=${job.name}`,
    `SLURM_JOB_ACCOUNT=${job.account}`,
    `SLURM_JOB_PARTITION=${job.partition}`,
    `SLURM_JOB_USER=${job.user}`,
    `SLURM_JOB_NUM_NODES=1`,
    `SLURM_JOB_NODELIST=${nodeName}`,
    `SLURM_NTASKS=${job.tasks}`,
    `SLURM_CPUS_PER_TASK=${job.cpusPerTask}`,
    `SLURM_CPUS_ON_NODE=${job.tasks * job.cpusPerTask}`,
    `SLURM_SUBMIT_DIR=${job.cwd}`,
    `SLURM_CLUSTER_NAME=${clusterName}`,
    ...(job.arrayJobId !== undefined && job.arrayTaskId !== undefined
      ? [`SLURM_ARRAY_JOB_ID=${job.arrayJobId}`, `SLURM_ARRAY_TASK_ID=${job.arrayTaskId}`]
      : []),
  ];
}

/** Turns `NAME=value` entries into an env object; the job's own entries win over Slurm's. */
function toEnv(entries: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq <= 0) continue;
    env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

function outputPath(pattern: string, job: SimJob, cwd: string, nodeName: string): string {
  const expanded = expandOutputPattern(pattern, job, nodeName);
  return isAbsolute(expanded) ? expanded : resolve(cwd, expanded);
}

export interface StartOptions {
  scriptDir: string;
  nodeName: string;
  clusterName: string;
  /** The host user the script runs as (the simulator is root); null: the simulator's own user. */
  jobUser: JobUser | null;
}

/** Paths slurmd would open for the job's output (`slurm-%j.out` by default). */
export function outputPaths(job: SimJob, nodeName: string): { stdout: string; stderr: string } {
  const stdout = outputPath(job.standardOutput || defaultOutputPattern(job), job, job.cwd, nodeName);
  const stderr = job.standardError ? outputPath(job.standardError, job, job.cwd, nodeName) : stdout;
  return { stdout, stderr };
}

/**
 * Writes the script to a file and executes it, so the kernel honours its
 * interpreter line, in its own process group (so cancel reaches every child).
 */
export async function startJobProcess(job: SimJob, options: StartOptions): Promise<RunningProcess> {
  const { jobUser } = options;
  await mkdir(options.scriptDir, { recursive: true, mode: 0o700 });
  const scriptPath = join(options.scriptDir, `job-${job.jobId}.sh`);
  await writeFile(scriptPath, job.script, { mode: 0o700 });
  await chmod(scriptPath, 0o700);
  // The job's user must read and execute its script (slurmd writes slurm_script as the user's).
  if (jobUser) await chown(scriptPath, jobUser.uid, jobUser.gid);

  const paths = outputPaths(job, options.nodeName);
  // slurmstepd falls back to /tmp when it cannot enter the working directory, and says so.
  let chdirError: string | null;
  let stdoutFd: number;
  let stderrFd: number;
  if (jobUser) {
    const prepared = await prepareAsJobUser(jobUser, job.cwd, paths);
    chdirError = prepared.chdirError;
    stdoutFd = prepared.stdoutFd;
    stderrFd = prepared.stderrFd;
  } else {
    chdirError = existsSync(job.cwd) ? null : 'No such file or directory';
    stdoutFd = openSync(paths.stdout, 'w');
    stderrFd = paths.stderr === paths.stdout ? stdoutFd : openSync(paths.stderr, 'w');
  }
  const cwd = chdirError === null ? job.cwd : '/tmp';
  if (chdirError !== null) {
    writeSync(stderrFd, `slurmstepd: error: couldn't chdir to \`${job.cwd}': ${chdirError}: going to /tmp instead\n`);
  }

  if (!job.script.startsWith('#!')) {
    // slurmstepd execve()s the script itself, with no shell to fall back on: without an
    // interpreter line that fails (ENOEXEC), and the errno is the job's exit code.
    writeSync(stderrFd, `slurmstepd: error: execve(): ${scriptPath}: Exec format error\n`);
    closeSync(stdoutFd);
    if (stderrFd !== stdoutFd) closeSync(stderrFd);
    return exitedProcess({ exitCode: constants.errno.ENOEXEC, signal: null });
  }
  // Exactly the job's environment and slurmd's variables, as user or not: HOME, USER and the
  // like are the submitter's to send (none of the simulator's own leak in).
  const env = { ...toEnv(slurmEnvironment(job, options.nodeName, options.clusterName)), ...toEnv(job.environment) };
  let child: ChildProcess;
  try {
    child = spawn(scriptPath, [], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', stdoutFd, stderrFd],
      // libuv drops the supplementary groups (setgroups(0)) before setgid/setuid, so root's
      // groups do not follow the job.
      ...(jobUser && { uid: jobUser.uid, gid: jobUser.gid }),
    });
  } catch (error) {
    closeSync(stdoutFd);
    if (stderrFd !== stdoutFd) closeSync(stderrFd);
    throw error;
  }
  if (stderrFd !== stdoutFd) closeSync(stdoutFd);
  // stderr's descriptor is kept until the script is known to run, for slurmstepd's execve error
  // below: its file is never opened again by name, which (as root) would follow whatever the
  // job put on its path meanwhile.
  let errorFd: number | null = stderrFd;
  const closeErrorFd = () => {
    if (errorFd !== null) closeSync(errorFd);
    errorFd = null;
  };
  child.once('spawn', closeErrorFd);

  const sampler = child.pid === undefined ? null : usageSampler(child.pid);
  const done = new Promise<ProcessExit>((resolveExit) => {
    child.once('error', (error) => {
      sampler?.stop();
      // execve failed (bad interpreter line, not executable): slurmstepd reports it in the output.
      try {
        if (errorFd !== null) writeSync(errorFd, `slurmstepd: error: execve(): ${scriptPath}: ${error.message}\n`);
      } catch {
        // The output file may be unwritable; the exit code still tells the story.
      } finally {
        closeErrorFd();
      }
      // Like slurmstepd, the errno of the failed execve is the exit code (ENOENT 2, EACCES 13).
      const errno = constants.errno[(error as NodeJS.ErrnoException).code as keyof typeof constants.errno];
      resolveExit({ exitCode: typeof errno === 'number' ? errno : 127, signal: null });
    });
    child.once('exit', (code, signal) => {
      // Before resolving: whoever awaits `done` reads the peak including the last sample.
      sampler?.stop();
      resolveExit({ exitCode: code, signal });
    });
  });

  return {
    pid: child.pid ?? -1,
    done,
    signal(sig) {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // Already gone.
      }
    },
    peakMemoryBytes: () => sampler?.peak() ?? null,
    cpuSeconds: () => sampler?.cpu() ?? null,
    startTicks: child.pid === undefined ? null : processStartTicks(child.pid),
  };
}

/**
 * Run as the job's user before its script, as slurmstepd does after dropping to the user: enter
 * the working directory (exit 3 when it cannot: the job then runs in /tmp) and create or
 * truncate each output file (exit 1 when one cannot be: the job fails). The user's own rights
 * decide, never root's: an output path the user may not write (/etc/passwd, another user's
 * file) is refused, not overwritten.
 */
const PREPARE_SCRIPT = `cd -- "$1" 2>/dev/null && entered=1
shift
for file do
  if [ -p "$file" ]; then echo "$file is a FIFO" >&2; exit 1; fi
  : > "$file" || exit 1
done
[ -n "$entered" ] || exit 3`;

const DEV_NULL = '/dev/null';

/** Beyond this the preparation is stuck (a FIFO swapped in after the check above): the job fails. */
const PREPARE_TIMEOUT_MS = 10_000;

/**
 * The output files created as the job's user, then opened here for the script's stdout and
 * stderr without following a link, without blocking, and without creating or truncating
 * anything, each checked to be a regular file the job's user owns: between the two, the user's
 * other jobs may have swapped in a link or a FIFO, which root must not write through.
 */
async function prepareAsJobUser(
  user: JobUser,
  cwd: string,
  paths: { stdout: string; stderr: string },
): Promise<{ chdirError: string | null; stdoutFd: number; stderrFd: number }> {
  // `--output=/dev/null` is common and harmless to open as anyone; it is no file of the user's.
  const files = [...new Set([paths.stdout, paths.stderr])].filter((path) => path !== DEV_NULL);
  const exitCode = await new Promise<number>((resolveRun, reject) => {
    execFile(
      '/bin/sh',
      ['-c', PREPARE_SCRIPT, 'sh', cwd, ...files],
      { uid: user.uid, gid: user.gid, cwd: '/', env: { PATH: '/usr/bin:/bin' }, timeout: PREPARE_TIMEOUT_MS },
      (error, _stdout, stderr) => {
        if (error === null) return resolveRun(0);
        if (typeof error.code === 'number' && error.code === 3) return resolveRun(3);
        reject(new Error(`slurmstepd: error: could not open the output of the job as ${user.name}: ${stderr.trim()}`));
      },
    );
  });
  const openOwned = (path: string): number => {
    if (path === DEV_NULL) return openSync(DEV_NULL, 'w');
    const fd = openSync(
      path,
      fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY,
    );
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.uid !== user.uid) {
      closeSync(fd);
      throw new Error(`slurmstepd: error: the output file ${path} is not a regular file of ${user.name}`);
    }
    return fd;
  };
  const stdoutFd = openOwned(paths.stdout);
  let stderrFd = stdoutFd;
  try {
    if (paths.stderr !== paths.stdout) stderrFd = openOwned(paths.stderr);
  } catch (error) {
    closeSync(stdoutFd);
    throw error;
  }
  const chdirError = exitCode !== 3 ? null : existsSync(cwd) ? 'Permission denied' : 'No such file or directory';
  return { chdirError, stdoutFd, stderrFd };
}

/**
 * After a simulator crash the scripts it started may still run. Kill the group
 * only when the pid is still that job's script, so a reused pid is safe: by its
 * start time (which survives the script exec-ing another program), or for a job
 * saved without one, by its command line.
 */
export function killOrphan(pid: number, startTicks: number | undefined, scriptDir: string, jobId: number): void {
  try {
    if (startTicks !== undefined) {
      if (processStartTicks(pid) !== startTicks) return;
    } else if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(join(scriptDir, `job-${jobId}.sh`))) {
      return;
    }
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Not running any more.
  }
}

/** A job whose script never started: it has already ended, as given. */
function exitedProcess(exit: ProcessExit): RunningProcess {
  return {
    pid: -1,
    done: Promise.resolve(exit),
    signal() {},
    peakMemoryBytes: () => null,
    cpuSeconds: () => null,
    startTicks: null,
  };
}

/**
 * A job that "runs" for a fixed time without a process (benchmark mode): it
 * completes with exit 0, or ends by the signal it is sent.
 */
export function simulatedProcess(runtimeMs: number): RunningProcess {
  let finish: (exit: ProcessExit) => void = () => {};
  const done = new Promise<ProcessExit>((resolve) => {
    finish = resolve;
  });
  const timer = setTimeout(() => finish({ exitCode: 0, signal: null }), runtimeMs);
  return {
    pid: -1,
    done,
    signal(sig) {
      clearTimeout(timer);
      finish({ exitCode: null, signal: sig });
    },
    peakMemoryBytes: () => null,
    cpuSeconds: () => null,
    startTicks: null,
  };
}
