/**
 * Waits until the wall clock has entered the next whole second (at most a second, half on
 * average). For what is judged in whole seconds of real time by another party, a scheduler's
 * accounting window or a URL carrying `now`, where a fixed sleep of "a second and a bit" waited
 * longer than needed.
 */
export async function untilNextSecond(): Promise<void> {
  const nextMs = (Math.floor(Date.now() / 1000) + 1) * 1000;
  // A few ms past the boundary: timers may fire a little early relative to Date.now().
  await new Promise((r) => setTimeout(r, nextMs - Date.now() + 5));
}
