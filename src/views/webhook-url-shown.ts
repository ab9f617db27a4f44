/**
 * A webhook URL as shown to those who may read a job but not administer the
 * daemon: scheme, host, port and path. User info is sent as Basic credentials
 * and a query often carries a receiver's token (Slack, Teams and most CI hooks
 * put theirs there), so both stay with admins; the fragment is never sent at all.
 */
export function shownWebhookUrl(url: string): string {
  try {
    const u = new URL(url);
    // `host` is hostname and port (left out when it is the scheme's default), without user info.
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
