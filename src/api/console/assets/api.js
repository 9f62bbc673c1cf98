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
    const msg = (data && data.error) || text || res.statusText;
    const err = new Error(`${msg} (HTTP ${res.status})`);
    err.status = res.status;
    err.data = data;
    err.retryAfter = Number(res.headers.get('Retry-After')) || 0;
    throw err;
  }
  return data;
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

/** Builds an element: attributes (on* become listeners) and children (strings become text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined) el.append(c);
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

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
