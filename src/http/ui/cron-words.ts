/**
 * A cron expression (five fields, or six with seconds) in words, for the common shapes ("every 15
 * minutes", "at 02:30 on Monday to Friday"); null when it is not one of them
 * (the page then shows the expression alone).
 */
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** The days of the week field in words: '' for every day, null when not a plain list. */
function dayList(field: string): string | null {
  if (field === '*') return '';
  if (field === '1-5') return 'Monday to Friday';
  if (field === '0,6' || field === '6,0') return 'Saturday and Sunday';
  const parts = field.split(',');
  if (!parts.every((p) => /^[0-7]$/.test(p))) return null;
  return parts.map((p) => DAYS[Number(p) % 7]).join(', ');
}

const pad = (n: string): string => n.padStart(2, '0');

export function cronInWords(cron: string): string | null {
  let fields = cron.trim().split(/\s+/);
  // Six fields: seconds first. "every N seconds", or the five-field words when it is 0.
  if (fields.length === 6) {
    const [sec, ...rest] = fields;
    const every = /^\*\/(\d+)$/.exec(sec ?? '');
    if (every && rest.every((f) => f === '*')) return `every ${every[1]} seconds`;
    if (sec !== '0') return null;
    fields = rest;
  }
  if (fields.length !== 5) return null;
  const [min, hour, dom, month, dow] = fields as [string, string, string, string, string];
  if (month !== '*') return null;
  const days = dayList(dow);
  if (days === null) return null;
  const onDays = days ? ` on ${days}` : '';
  const onDom = dom === '*' ? '' : /^\d+$/.test(dom) ? ` on day ${dom} of the month` : null;
  if (onDom === null) return null;
  if (min === '*' && hour === '*') return `every minute${onDom}${onDays}`;
  const step = /^\*\/(\d+)$/.exec(min);
  if (step && hour === '*') return `every ${step[1]} minutes${onDom}${onDays}`;
  if (/^\d+$/.test(min) && hour === '*') return `every hour at minute ${min}${onDom}${onDays}`;
  const hourStep = /^\*\/(\d+)$/.exec(hour);
  if (/^\d+$/.test(min) && hourStep) return `every ${hourStep[1]} hours at minute ${min}${onDom}${onDays}`;
  if (/^\d+$/.test(min) && /^\d+(,\d+)*$/.test(hour)) {
    const times = hour.split(',').map((h) => `${pad(h)}:${pad(min)}`);
    const when = dom === '*' && !days ? ' every day' : '';
    return `at ${times.join(' and ')}${when}${onDom}${onDays}`;
  }
  return null;
}
