import { execFile } from 'node:child_process';

/** What `unmunge` tells about a credential. */
export interface MungeDecoded {
  status: string;
  statusCode: number;
  encodeHost: string;
  encodeAddress: string;
  ttlSec: number;
  uid: number;
  userName: string;
}

export class MungeUnavailableError extends Error {
  override name = 'MungeUnavailableError';
}

/** Parses `unmunge` metadata lines such as `UID:             alice (1003)`. */
export function parseUnmungeOutput(text: string): MungeDecoded {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^([A-Z_]+):\s+(.*)$/.exec(line.trim());
    if (match?.[1] && match[2] !== undefined) fields.set(match[1], match[2]);
  }
  const status = fields.get('STATUS') ?? 'Unknown';
  const statusMatch = /^(.*) \((\d+)\)$/.exec(status);
  const host = /^(\S+) \(([^)]+)\)$/.exec(fields.get('ENCODE_HOST') ?? '');
  const uid = /^(\S+) \((\d+)\)$/.exec(fields.get('UID') ?? '');
  return {
    status: statusMatch?.[1] ?? status,
    statusCode: statusMatch?.[2] ? Number(statusMatch[2]) : -1,
    encodeHost: host?.[1] ?? '',
    encodeAddress: host?.[2] ?? '',
    ttlSec: Number(fields.get('TTL') ?? Number.NaN),
    uid: uid?.[2] ? Number(uid[2]) : -1,
    userName: uid?.[1] ?? '',
  };
}

/**
 * Decodes a credential with munged, which also rejects expired and replayed
 * ones. unmunge exits non-zero for those but still prints the metadata.
 */
export function unmunge(credential: string, timeoutMs = 5000): Promise<MungeDecoded> {
  return new Promise((resolve, reject) => {
    const child = execFile('unmunge', [], { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new MungeUnavailableError('unmunge is not installed (Debian package: munge)'));
        return;
      }
      if (stdout.includes('STATUS:')) {
        resolve(parseUnmungeOutput(stdout));
        return;
      }
      const message = stderr.trim() || (error ? error.message : 'no output');
      reject(new MungeUnavailableError(`unmunge failed: ${message}`));
    });
    child.stdin?.end(credential);
  });
}
