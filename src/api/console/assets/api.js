// Shared helpers of the console pages: the JSON API, errors on the page, safe DOM building.

/** Calls the API; resolves to the parsed body, rejects with the API's `error` text. */
export async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body instanceof FormData) {
    init.body = body;
  } else if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new Error(`Cannot reach the kiosk: ${e.message}`);
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    if (res.status === 401 && !path.startsWith('/api/auth')) {
      location.assign('/console/login');
    }
    const err = new Error(explain((data && data.error) || text || res.statusText, res.status));
    err.status = res.status;
    err.data = data;
    err.retryAfter = Number(res.headers.get('Retry-After')) || 0;
    throw err;
  }
  return data;
}

/** The kiosk's error text as a sentence for staff ("Wrong password."), without status codes;
 * an empty one says what kind of failure it was. */
export function explain(msg, status) {
  const text = String(msg || '').trim() || (status >= 500 ? 'The kiosk could not do that' : 'That was refused');
  const sentence = text[0].toUpperCase() + text.slice(1);
  return /[.!?]$/.test(sentence) ? sentence : `${sentence}.`;
}

/** Shows `err` (an Error or text) in the page's alert area, or in `target`; null clears it. */
export function showError(err, target = document.getElementById('error')) {
  if (!target) return;
  if (err === null) {
    target.hidden = true;
    target.textContent = '';
    return;
  }
  target.textContent = typeof err === 'string' ? err : err.message;
  target.hidden = false;
}

/** Builds an element: attributes (on* become listeners) and children (strings become text;
 * arrays, nested to any depth, are spread). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined) el.append(c);
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

/** Fills `select` with the characters and picks the one in `?character=`, else the one on the
 * kiosk (the settings' choice, else the oldest, as the kiosk itself does); resolves to its id. */
export async function pickCharacter(select) {
  const [list, settings] = await Promise.all([api('GET', '/api/v1/characters'), api('GET', '/api/v1/settings')]);
  const oldest = [...list].sort((a, b) => (a.created_at < b.created_at ? -1 : 1))[0];
  const kiosk = list.find((c) => c.id === settings.kiosk.character_id) || oldest || {};
  const wanted = list.find((c) => c.id === new URLSearchParams(location.search).get('character'));
  const id = (wanted || kiosk).id || '';
  select.replaceChildren(...list.map((c) => h('option', {
    value: c.id, selected: c.id === id, text: c.id === kiosk.id ? `${c.name} (on the kiosk)` : c.name,
  })));
  return id;
}

/** How available the kiosk was while open (`GET /api/v1/system/availability`), in a sentence. */
export function availabilityText(v) {
  return v.percent === null
    ? 'Availability: not open in the last 30 days (nothing counted yet).'
    : `Available ${v.percent.toFixed(1)} % of opening hours, last 30 days.`;
}

/** Runs `fn`, showing any failure on the page instead of only in the browser's console. */
export async function guarded(fn, target) {
  try {
    showError(null, target);
    return await fn();
  } catch (e) {
    showError(e, target);
    return undefined;
  }
}

/** Work a page must finish while still signed in (ending its own sessions), run at sign-out. */
export const beforeSignOut = [];

const signout = $('signout');
if (signout) {
  signout.addEventListener('click', () => guarded(async () => {
    await Promise.allSettled(beforeSignOut.map((f) => f()));
    await api('DELETE', '/api/auth');
    location.assign('/console/login');
  }));
}

// On a narrow screen the navigation is one row that scrolls sideways: show the current page.
const current = document.querySelector('nav a[aria-current=page]');
const row = current && current.closest('ul');
if (row && row.scrollWidth > row.clientWidth) current.scrollIntoView({ inline: 'center', block: 'nearest' });
