import { describe, expect, it } from 'vitest';
import { getProfileSync } from '../../../src/db/accounting.js';
import { createToken } from '../../../src/db/tokens.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { http, waitFor } from '../../helpers/http.js';

const env = daemonTestEnv();

/** One sample of a Prometheus text exposition (`name{labels} value`), or undefined. */
function sample(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  if (line === undefined) return undefined;
  const value = line.slice(line.lastIndexOf(' ') + 1);
  return value === '+Inf' ? Number.POSITIVE_INFINITY : Number(value);
}

/**
 * Issue 13, weak spot 4: during a full controller outage the proxy answers from its cache
 * (stale-if-error), and those answers must not pass for successful polls.
 */
describe('health while the scheduler is down behind its proxy', () => {
  it('says "serving stale answers since …" in /readyz, the Profiles page and the metrics, and no successful poll', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const store = td.daemon.history.store;
    const api = td.daemon.apiUrl as string;
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'long',
        script: '#!/bin/sh\nsleep 60\n',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const running = await td.waitForState(id, 'running');
    // A fresh poll after the start, so the proxy holds an answer to serve stale.
    await waitFor(
      async () => (((await getProfileSync(store, 'test'))?.lastPollAt ?? 0) > running.updatedAt ? true : undefined),
      {
        what: 'a poll after the job started',
      },
    );
    // A scrape in good times, as Prometheus makes: the last successful poll it saw.
    const good = (await http(`${api}/metrics`)).text;
    expect(sample(good, 'schedflow_profile_last_poll_ok', 'profile="test"')).toBe(1);
    expect(sample(good, 'schedflow_upstream_serving_stale', 'profile="test"')).toBe(0);
    const down = await http(`${sim.url}/_sim/upstream`, {
      headers: sim.admin,
      method: 'PUT',
      body: { slurmctld: 'down', slurmdbd: 'down' },
    });
    expect(down.status).toBe(200);
    const downAt = Date.now();
    await waitFor(async () => ((await getProfileSync(store, 'test'))?.lastPollStale ? true : undefined), {
      what: 'a poll answered stale',
    });
    // Until the freshest fresh answer is 4 s old (polls answered stale meanwhile): long enough that
    // a poll counted as successful would show. Scraped only now, as before: a scrape that saw a
    // success would move what the metric of the time since one counts from.
    await waitFor(
      async () => {
        const text = (await http(`${api}/metrics`)).text;
        const age = sample(text, 'schedflow_upstream_fresh_answer_age_seconds', 'profile="test"');
        return (age ?? 0) >= 4 ? true : undefined;
      },
      { what: 'the freshest answer to be 4 s old', intervalMs: 250 },
    );

    const sync = await getProfileSync(store, 'test');
    expect(sync, JSON.stringify(sync)).toMatchObject({ lastPollOk: false, lastPollStale: true });
    expect(sync?.lastPollError).toMatch(/serving stale answers/);

    const metrics = (await http(`${api}/metrics`)).text;
    expect(sample(metrics, 'schedflow_profile_last_poll_ok', 'profile="test"')).toBe(0);
    const sinceOk = sample(metrics, 'schedflow_profile_seconds_since_successful_poll', 'profile="test"') ?? 0;
    expect(sinceOk).toBeGreaterThanOrEqual((Date.now() - downAt) / 1000 - 1);
    expect(sinceOk).toBeLessThan(60);
    expect(sample(metrics, 'schedflow_upstream_fresh_answer_age_seconds', 'profile="test"')).toBeGreaterThanOrEqual(4);
    expect(
      sample(metrics, 'schedflow_upstream_stale_answers_total', 'profile="test",endpoint="jobs_state"'),
    ).toBeGreaterThan(0);
    expect(sample(metrics, 'schedflow_upstream_serving_stale', 'profile="test"')).toBe(1);
    expect(sample(metrics, 'schedflow_upstream_requests_total', 'profile="test",endpoint="submit",status="200"')).toBe(
      1,
    );
    expect(
      sample(metrics, 'schedflow_upstream_requests_total', 'profile="test",endpoint="jobs_state",status="200"'),
    ).toBeGreaterThan(0);
    // Bounded labels: fixed endpoint names, never a job id.
    expect(metrics).not.toMatch(/schedflow_upstream_requests_total\{[^}]*endpoint="[^"]*\d/);

    const ready = await http(`${api}/readyz`);
    expect(ready.status).toBe(200);
    const detail = (ready.json as { detail?: Record<string, string> }).detail;
    expect(detail?.['scheduler:test']).toMatch(/^serving stale answers since \d{4}-\d\d-\d\dT/);

    const token = (await createToken(td.daemon.history.store, { name: 'health-viewer', scopes: ['admin'] })).token;
    const nonce = 'login-nonce';
    const login = await fetch(`${api}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
      body: new URLSearchParams({ _login: nonce, token, next: '/ui/profiles' }).toString(),
    });
    const session = login.headers
      .getSetCookie()
      .map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1])
      .find((v) => v);
    expect(session).toBeTruthy();
    const page = await fetch(`${api}/ui/profiles`, { headers: { cookie: `schedflow_ui=${session}` } });
    const text = (await page.text()).replace(/<[^>]+>/g, '');
    expect(text).toMatch(/serving stale answers since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);

    // The scheduler back: fresh answers, and the note goes.
    await http(`${sim.url}/_sim/upstream`, {
      headers: sim.admin,
      method: 'PUT',
      body: { slurmctld: 'up', slurmdbd: 'up' },
    });
    await waitFor(async () => ((await getProfileSync(store, 'test'))?.lastPollOk ? true : undefined), {
      what: 'a fresh poll',
    });
    const after = await http(`${api}/readyz`);
    expect((after.json as { detail?: unknown }).detail).toBeUndefined();
  }, 60_000);
});
