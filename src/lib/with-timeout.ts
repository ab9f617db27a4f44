/** Rejects when the promise has not settled within `ms`; the timer never outlives it. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what = 'answer'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Waits up to `ms` for `promise`: its value as `{ answered: true }`, or `{ answered: false }`
 * when it has not settled by then. A rejection within the time is thrown, so a caller can tell
 * silence (left to be retried later) from a refusal (the caller's to report).
 */
export async function answerWithin<T>(
  promise: Promise<T>,
  ms: number,
): Promise<{ answered: true; value: T } | { answered: false }> {
  let timer: NodeJS.Timeout | undefined;
  const silence = new Promise<{ answered: false }>((resolve) => {
    timer = setTimeout(() => resolve({ answered: false }), ms);
  });
  return Promise.race([promise.then((value) => ({ answered: true as const, value })), silence]).finally(() =>
    clearTimeout(timer),
  );
}
