import { expect } from 'vitest';
import type { TestDaemon } from './daemon.js';

/** A page of the web UI, logged in with a token through the login form (its cookie and field). */
export async function uiPage(td: TestDaemon, token: string, path: string): Promise<string> {
  const base = td.daemon.apiUrl as string;
  const cookieOf = (res: Response) =>
    res.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
  const form = await fetch(`${base}/ui/login`);
  const loginCookie = cookieOf(form);
  const field = /name="_login" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
  const login = await fetch(`${base}/ui/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: loginCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _login: field, token, next: path }).toString(),
  });
  expect(login.status).toBe(303);
  const page = await fetch(`${base}${path}`, { headers: { cookie: cookieOf(login) } });
  expect(page.status).toBe(200);
  return page.text();
}
