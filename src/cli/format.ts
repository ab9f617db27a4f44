import type { Freshness } from '../sched/freshness.js';
import type { SchedJob, TimeLimit } from '../sched/job-model.js';

/** A plain text table: a header row, then one row per item, columns padded to fit. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** Local time without the year noise: `2026-11-22 04:07:19`. */
export function formatTime(unixSec: number | null): string {
  if (unixSec === null) return '-';
  const d = new Date(unixSec * 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** Seconds as Slurm prints elapsed time: `[D-]HH:MM:SS`. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null) return '-';
  const days = Math.floor(seconds / 86_400);
  const rest = seconds % 86_400;
  const pad = (n: number) => String(n).padStart(2, '0');
  const hms = `${pad(Math.floor(rest / 3600))}:${pad(Math.floor((rest % 3600) / 60))}:${pad(rest % 60)}`;
  return days > 0 ? `${days}-${hms}` : hms;
}

export function formatTimeLimit(limit: TimeLimit): string {
  if (limit === null) return '-';
  if (limit === 'infinite') return 'UNLIMITED';
  return formatDuration(limit.minutes * 60);
}

export function formatExit(job: SchedJob): string {
  if (job.signal) return `signal ${job.signal.id} (${job.signal.name})`;
  return job.exit_code === null ? '-' : String(job.exit_code);
}

export function jobsTable(jobs: SchedJob[]): string {
  return table(
    ['JOBID', 'NAME', 'STATE', 'REASON', 'PARTITION', 'ACCOUNT', 'USER', 'SUBMITTED', 'ELAPSED', 'EXIT'],
    jobs.map((j) => [
      String(j.job_id),
      j.name,
      j.state,
      j.reason ?? '-',
      j.partition,
      j.account,
      j.user,
      formatTime(j.submit_time),
      formatDuration(j.elapsed_sec),
      formatExit(j),
    ]),
  );
}

export function jobDetail(job: SchedJob): string {
  const rows: [string, string][] = [
    ['job_id', String(job.job_id)],
    ['name', job.name],
    ['state', `${job.state}${job.state_flags.length > 1 ? ` (${job.state_flags.join(',')})` : ''}`],
    ['reason', job.reason ?? '-'],
    ['exit', formatExit(job)],
    ['partition', job.partition],
    ['account', job.account],
    ['user', job.user],
    ['submitted', formatTime(job.submit_time)],
    ['started', formatTime(job.start_time)],
    ['ended', formatTime(job.end_time)],
    ['elapsed', formatDuration(job.elapsed_sec)],
    ['time_limit', formatTimeLimit(job.time_limit)],
    ['nodes', job.nodes ?? '-'],
    ['cpus', job.cpus === null ? '-' : String(job.cpus)],
    ['comment', job.comment || '-'],
    ['stdout', job.stdout_path ?? '-'],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

/** "as of 12 s ago" or "as of 12 s ago, stale (served during an outage)". */
export function freshnessNote(f: Freshness): string {
  return `as of ${f.ageSec} s ago${f.stale ? ', stale (the scheduler is unreachable; cached data)' : ''}`;
}

/** A size for a person: `812 B`, `4.2 KiB`, `1.3 GiB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}
