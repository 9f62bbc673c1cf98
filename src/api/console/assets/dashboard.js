import { api, $, h, availabilityText, guarded, showError } from '/console/api.js';

const SNAPSHOT_EVERY_MS = 2000;

function fact(dl, name, value, ok) {
  dl.append(h('dt', { text: name }), h('dd', { text: value, class: ok === undefined ? null : ok ? 'good' : 'bad' }));
}

/** What each stage's provider does, as staff say it. */
const STAGES = { llm: 'Answers (llm)', asr: 'Hearing (asr)', tts: 'Voice (tts)' };

function when(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}

function duration(s) {
  const d = Math.floor(s / 86400), hh = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  return `${d ? d + 'd ' : ''}${hh}h ${m}m ${s % 60}s`;
}

async function health() {
  await guarded(async () => {
    const v = await api('GET', '/api/v1/health');
    const dl = $('health');
    dl.replaceChildren();
    $('setup').hidden = v.admin_auth !== 'setup';
    fact(dl, 'Status', v.status, v.status === 'ok');
    fact(dl, 'Version', v.version);
    fact(dl, 'Uptime', duration(v.uptime_s));
    fact(dl, 'Open conversations', String(v.sessions));
    for (const [stage, p] of Object.entries(v.providers || {})) {
      const last = p.last_call;
      let text = `${p.provider || 'none'} – ${p.ok ? 'ok' : p.error || 'failing'}`;
      if (last && !last.ok) text += ` (failing since ${when(last.since)}: visitors hear an apology instead)`;
      else if (last) text += ` (last call ${when(last.at)})`;
      fact(dl, STAGES[stage] || stage, text, p.ok);
    }
    for (const [dev, st] of Object.entries(v.device || {})) {
      fact(dl, `Device ${dev}`, String(st), st === 'ok' || st === 'sim');
    }
  });
}

/** The last 30 days' share of the opening hours the kiosk fully served. */
async function availability() {
  await guarded(async () => {
    $('availability').textContent = availabilityText(await api('GET', '/api/v1/system/availability'));
  });
}

const names = new Map();
async function characterName(id) {
  if (!id) return 'none';
  if (!names.has(id)) {
    try {
      const c = await api('GET', `/api/v1/characters/${encodeURIComponent(id)}`);
      names.set(id, c.name);
    } catch {
      return id;
    }
  }
  return names.get(id);
}

let session = '';
let live = false;
let healthSoon = 0;
/** The line of each side of each turn ("user 3"): streamed text, the whole message and the final
 * transcript fill one line. */
let lines = new Map();
function line(kind, text) {
  const li = h('li', { class: kind, text });
  $('transcript').append(li);
  $('transcript').scrollTop = $('transcript').scrollHeight;
  $('no-visitor').hidden = true;
  return li;
}

/** Shows one side of a turn: `whole` replaces what is shown, a piece of the reply's stream
 * adds to it. */
function said(kind, turn, text, whole) {
  const key = `${kind} ${turn}`;
  if (!lines.has(key)) lines.set(key, line(kind, ''));
  const li = lines.get(key);
  li.textContent = whole ? text : li.textContent + text;
}

function watch() {
  const es = new EventSource('/api/v1/kiosk/events');
  es.addEventListener('state', async (ev) => {
    const s = JSON.parse(ev.data);
    const badge = $('state');
    badge.textContent = s.status;
    badge.className = `badge ${s.status}`;
    // The console benchmark times a load to the first live state by this mark.
    if (!live) { live = true; performance.mark('docent-live'); }
    const o = s.opening || { open: true, when: '' };
    $('opening').textContent = o.open ? (o.when ? `Open until ${o.when}` : 'Open')
      : (o.when ? `Closed until ${o.when}` : 'Closed');
    if (s.session_id !== session) {
      session = s.session_id;
      lines = new Map();
      $('transcript').replaceChildren();
      $('no-visitor').hidden = false;
    }
    // A visit stays open a while after its last turn: while the kiosk is idle it is the last one.
    const idle = s.status === 'idle';
    $('visitor-h').textContent = idle && session ? 'Last visitor' : 'Current visitor';
    if (idle) $('no-visitor').hidden = false;
    // The number of open sessions changes with visits: look again (at most every second).
    clearTimeout(healthSoon);
    healthSoon = setTimeout(health, 1000);
    $('character').textContent = await characterName(s.character_id);
  });
  es.addEventListener('transcript', (ev) => {
    const t = JSON.parse(ev.data);
    const user = t.speaker === 'user';
    said(user ? 'user' : 'assistant', t.turn_seq, t.text, user || t.is_final);
  });
  es.addEventListener('assistant', (ev) => {
    const t = JSON.parse(ev.data);
    said('assistant', t.turn_seq, t.text, true);
  });
  es.addEventListener('turn_error', (ev) => line('err', JSON.parse(ev.data).message));
  es.addEventListener('open', () => showError(null));
  es.addEventListener('error', () => {
    $('state').textContent = 'reconnecting…';
    // The stream may have been refused (signed out, too many streams): say why on the page.
    api('GET', '/api/auth').then((a) => {
      if (!a.authenticated && $('setup').hidden) showError('Signed out: the live view stopped.');
    }).catch((e) => showError(e));
  });
}

let lastUrl = null;
async function snapshot() {
  try {
    const res = await fetch('/api/v1/kiosk/snapshot', { credentials: 'same-origin', cache: 'no-store' });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      $('screen').hidden = true;
      $('screen-note').textContent = `No picture: ${body.error || res.statusText}`;
      return res.status !== 409;
    }
    const url = URL.createObjectURL(await res.blob());
    $('screen').src = url;
    $('screen').hidden = false;
    $('screen-note').textContent = `Updated ${new Date().toLocaleTimeString()}`;
    if (lastUrl) URL.revokeObjectURL(lastUrl);
    lastUrl = url;
    return true;
  } catch (e) {
    $('screen-note').textContent = `No picture: ${e.message}`;
    return true;
  }
}

async function snapshots() {
  // A real display has no picture to show (409): stop asking.
  if (!(await snapshot())) return;
  if (document.hidden) document.addEventListener('visibilitychange', snapshots, { once: true });
  else setTimeout(snapshots, SNAPSHOT_EVERY_MS);
}

/** Marks a kiosk whose visitors' voices go to a host outside the building. */
async function privacy() {
  const v = await api('GET', '/api/v1/settings/privacy');
  const hosts = [...new Set(v.flows.filter((f) => f.leaves_building && f.receives.includes('voice_audio')).map((f) => f.host))];
  $('voices-to').textContent = hosts.join(', ');
  $('voices-leave').hidden = !v.voices_leave;
}

$('refresh').addEventListener('click', health);
$('refresh').addEventListener('click', availability);
$('refresh').addEventListener('click', () => guarded(privacy));
guarded(privacy);
health();
setInterval(health, 15000);
availability();
setInterval(availability, 60000);
watch();
snapshots();
