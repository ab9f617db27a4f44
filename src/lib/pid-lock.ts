import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/** Whether a process with this pid exists (EPERM: it does, as another user's). */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export type PidLock = { held: true; release(): void } | { held: false; holder: number };

/**
 * Takes `file` for this process by writing its pid there, unless a live process holds it.
 * A lock left by a process that died is taken over: a crash must not lock the dir for good.
 */
export function takePidLock(file: string): PidLock {
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const holder = lockHolder(file);
    if (holder !== null && pidAlive(holder)) return { held: false, holder };
    writeFileSync(file, String(process.pid), { mode: 0o600 });
  }
  return {
    held: true,
    release() {
      // Only our own: a lock taken over after we were presumed dead is not ours to remove.
      if (lockHolder(file) === process.pid) rmSync(file, { force: true });
    },
  };
}

function lockHolder(file: string): number | null {
  try {
    return Number(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}
