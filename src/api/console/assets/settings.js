import { api, $, h, guarded, showError } from '/console/api.js';

/** Sections whose provider the test button checks (the test's names are `stage:provider`). */
const TESTABLE = ['llm', 'asr', 'tts', 'realtime', 'remote_voice'];
let original = {};
let characters = [];

function fieldId(section, key) { return `s-${section}-${key}`; }

const PROVIDERS = ['', 'local', 'openai', 'openai_realtime', 'remote', 'wyoming'];
const PROVIDER_NAMES = {
  '': 'none', local: 'the offline engine (local)', openai: 'an OpenAI-compatible server (openai)',
  openai_realtime: 'OpenAI Realtime (openai_realtime)', remote: 'another kiosk (remote)', wyoming: 'a Wyoming server (wyoming)',
};

/** The sections in the order staff think of them, with a title and one line of help each;
 * those for technicians last. Sections the kiosk does not know of are shown after these. */
const SECTIONS = [
  ['kiosk', 'The kiosk', 'Who visitors talk to, and how loud.'],
  ['tts', 'Voice', 'Who speaks the answers aloud.'],
  ['llm', 'Answers', 'Who writes the answers: the offline engine answers from the knowledge alone.'],
  ['asr', 'Hearing', "Who turns a visitor's speech into text."],
  ['hours', 'Opening hours', "When visitors may talk to the kiosk, in its own local time; outside them its screen says it is closed."],
  ['realtime', 'OpenAI Realtime (for technicians)', 'A provider that listens, answers and speaks in one.'],
  ['remote_voice', "Another kiosk's voice service (for technicians)", 'A VoiceLLMService reached over gRPC.'],
  ['model_providers', 'Shared provider keys (for technicians)', 'Keys of the original front end; this kiosk keeps them.'],
  ['doubao', 'Doubao (for technicians)', 'Not available on this kiosk; kept for the original front end.'],
  ['fleet', 'Fleet server (for technicians)', "The museum's Eclipse hawkBit server, which sends this kiosk updates and content; the System page shows what it does."],
];

/** What a plain-HTTP fleet server costs, said beside its allowance and while it is set. */
const INSECURE_HTTP = "Over http:// this kiosk's target token crosses the network in clear: anyone on it can read the token and pose as this kiosk to the server, or stand between them. Only for a test network; use https:// otherwise.";

/** Each field's label and one line of help. */
const FIELDS = {
  character_id: ['Character on the kiosk', 'The one visitors talk to; edit characters on the Characters page.'],
  volume: ['Speaker volume', 'Applied within a second of saving; also a launch setting of the audio section below.'],
  assistive_volume: ['Assistive speaker volume', 'The hearing loop or headphone socket, when the kiosk has one (the audio section below names it); it plays every answer and the test sound at this volume.'],
  language: ['Language', 'The language visitors speak, as a code such as en or en-US.'],
  languages: ['Languages', 'The languages visitors may choose on the screen, as codes such as en, de, es or pt-BR separated by commas, in the order the screen offers them; the first is the default every visit starts in.'],
  provider: ['Provider', 'Who does this part.'],
  base_url: ['Server address (URL)', 'Where the provider is reached, such as http://10.0.0.5:8000/v1.'],
  api_key: ['API key', 'Sent only to the address above: a new address needs the key again.'],
  model: ['Model', 'The model the server should use.'],
  temperature: ['Creativity (temperature)', '0 keeps answers close to the knowledge; higher varies them.'],
  max_tokens: ['Longest answer (tokens)', 'About three quarters of a word each.'],
  voice: ['Voice', "The default voice; a character's own voice comes first."],
  grpc_addr: ['Address (host:port)', 'Where the other service listens.'],
  enabled: ['Follow the opening hours', 'No: the kiosk is always open.'],
  when_closed: ['A press while closed', 'What a visitor hears when pressing the button outside the hours.'],
  openai_api_key: ['OpenAI API key', ''],
  dashscope_api_key: ['DashScope API key', ''],
  app_id: ['App id', ''],
  access_token: ['Access token', ''],
  'fleet.enabled': ['Follow the fleet server', 'No: this kiosk asks no server for updates or content.'],
  server_url: ['Server address (URL)', 'Where hawkBit is reached, such as https://fleet.museum.lan:8443.'],
  allow_insecure_http: ['Allow plain http://', `Yes: a server address of http:// is accepted. ${INSECURE_HTTP}`],
  tenant: ['Tenant', "The server's tenant, DEFAULT unless it has several."],
  controller_id: ['Target name', "This kiosk's controller id on the server; empty: its name on the network."],
  target_token: ['Target token', "This kiosk's security token from the server; sent only to the address above."],
  content_public_key: ['Fleet public key', 'Content bundles must be signed by its private key (base64 of the Ed25519 key).'],
  distribution: ['Distribution name', 'Reported for an update installed from this console, so the server knows what runs.'],
  'fleet.paused': ['Polling paused', 'Yes: nothing is asked of the server until resumed (also on the System page).'],
};

function input(section, key, value, secret) {
  const id = fieldId(section, key);
  const attrs = { id, name: `${section}.${key}`, 'data-section': section, 'data-key': key, 'aria-describedby': `${id}-help` };
  if (section === 'kiosk' && key === 'character_id') {
    const oldest = [...characters].sort((a, b) => (a.created_at < b.created_at ? -1 : 1))[0];
    return h('select', attrs, h('option', { value: '', text: `The oldest character${oldest ? ` (${oldest.name})` : ''}`, selected: !value }),
      characters.map((c) => h('option', { value: c.id, text: c.name, selected: c.id === value })),
      value && !characters.some((c) => c.id === value) ? h('option', { value, text: 'A character that no longer exists', selected: true }) : null);
  }
  if (key === 'provider' && PROVIDERS.includes(value)) {
    return h('select', attrs, PROVIDERS.map((p) => h('option', { value: p, text: PROVIDER_NAMES[p], selected: p === value })));
  }
  if (section === 'kiosk' && (key === 'volume' || key === 'assistive_volume')) {
    const shown = h('output', { for: id, id: `${id}-shown`, text: `${value}%` });
    const slider = h('input', { ...attrs, type: 'range', min: 0, max: 100, step: 1, value: String(value),
      oninput: () => { shown.textContent = `${slider.value}%`; } });
    if (key === 'assistive_volume') return h('p', { class: 'row' }, slider, shown);
    const said = h('span', { id: `${id}-result`, class: 'hint', 'aria-live': 'polite' });
    const test = h('button', { type: 'button', class: 'secondary', id: `${id}-test`, text: 'Test sound',
      onclick: async () => {
        said.textContent = '';
        try {
          await api('POST', '/api/v1/kiosk/test-sound', { volume: Number(slider.value) });
          said.textContent = `Playing on the kiosk at ${slider.value}% (not saved).`;
        } catch (e) { said.textContent = e.message; }
      } });
    return [h('p', { class: 'row' }, slider, shown, test), said];
  }
  if (key === 'when_closed') {
    const says = { say: "It says it is closed and when to come back", nothing: 'Nothing happens' };
    return h('select', attrs, Object.entries(says).map(([v, t]) => h('option', { value: v, text: t, selected: v === value })));
  }
  if (typeof value === 'boolean') return h('select', attrs, h('option', { value: 'true', text: 'yes', selected: value }), h('option', { value: 'false', text: 'no', selected: !value }));
  if (typeof value === 'number') return h('input', { ...attrs, type: 'number', step: 'any', value: String(value) });
  if (secret) {
    // A secret is never shown: its mask stays the field's value (unchanged, so not sent) until
    // "Replace" empties the field for a new one.
    const field = h('input', { ...attrs, type: 'password', value: value ?? '', autocomplete: 'new-password', hidden: true });
    const replace = h('button', { type: 'button', class: 'secondary', id: `${id}-replace`, text: value ? 'Replace' : 'Set',
      onclick: () => { field.value = ''; field.hidden = false; replace.hidden = true; field.focus(); } });
    return [h('p', { class: 'row secret' }, h('span', { class: 'grow', text: value ? `Set (${value})` : 'Not set' }), replace), field];
  }
  return h('input', { ...attrs, type: 'text', value: value ?? '', autocomplete: 'off' });
}

/** The language's name in itself ("Deutsch"), else its code. */
function languageName(tag) {
  let name = tag;
  try { name = new Intl.DisplayNames([tag], { type: 'language' }).of(tag) || tag; } catch { name = tag; }
  return `${name[0].toUpperCase()}${name.slice(1)}`;
}

/** The museum's languages: codes in order, the first the default; their names said below. */
function languagesField(list) {
  const id = fieldId('kiosk', 'languages');
  const [label, help] = FIELDS.languages;
  const named = h('p', { id: `${id}-named`, 'aria-live': 'polite' });
  const name = (text) => {
    const tags = text.split(/[\s,]+/).filter(Boolean);
    named.textContent = tags.length ? tags.map((t, i) => `${languageName(t)}${i === 0 ? ' (default)' : ''}`).join(' · ') : 'No language: the kiosk needs one.';
  };
  const field = h('input', { id, name: 'kiosk.languages', 'data-section': 'kiosk', 'data-key': 'languages', 'aria-describedby': `${id}-help`,
    type: 'text', value: list.join(', '), autocomplete: 'off', oninput: (ev) => name(ev.target.value) });
  name(field.value);
  return [h('label', { for: id, text: label }), field, named, h('p', { class: 'hint', id: `${id}-help`, text: help })];
}

function section(name, values) {
  const meta = SECTIONS.find(([n]) => n === name) || [name, name, ''];
  const rows = [];
  // The fields in the order of FIELDS (the provider before where it is reached), others after.
  const rank = (k) => { const i = Object.keys(FIELDS).indexOf(k); return i < 0 ? 99 : i; };
  for (const [key, value] of Object.entries(values).sort(([a], [b]) => rank(a) - rank(b))) {
    if (key.endsWith('_set') && `${key.slice(0, -4)}` in values) continue;
    if (name === 'kiosk' && key === 'language' && Array.isArray(values.languages)) continue; // the first of languages
    if (name === 'kiosk' && key === 'languages' && Array.isArray(value)) {
      rows.push(...languagesField(value));
      continue;
    }
    if (value !== null && typeof value === 'object') continue;
    const secret = `${key}_set` in values;
    const [label, help] = FIELDS[`${name}.${key}`] || FIELDS[key] || [key, ''];
    const id = fieldId(name, key);
    rows.push(h('label', { for: id, text: label }), input(name, key, value, secret), h('p', { class: 'hint', id: `${id}-help`, text: help }));
  }
  const result = h('div', { class: 'result', id: `result-${name}`, 'aria-live': 'polite' });
  const test = TESTABLE.includes(name) ? h('button', {
    type: 'button', class: 'secondary', id: `test-${name}`, text: 'Test what is in the form',
    onclick: () => runTest(name, result),
  }) : null;
  if (name === 'hours') rows.push(...weekRows(values));
  const insecure = name === 'fleet' && values.allow_insecure_http
    ? h('p', { class: 'warn', id: 'fleet-insecure', text: `Plain http:// is allowed. ${INSECURE_HTTP}` }) : null;
  return h('fieldset', { id: `section-${name}` }, h('legend', { text: meta[1] }), h('p', { class: 'hint', text: meta[2] }), insecure, rows,
    test ? h('div', { class: 'row' }, test) : null, result);
}

const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];

/** The week (a row a day: open or not, from, to) and the closed days of the opening hours. */
function weekRows(values) {
  const week = values.week || [];
  const rows = DAYS.map((day, i) => {
    const span = week[i];
    const times = ['open', 'close'].map((k) => h('input', {
      id: `h-${k}-${i}`, type: 'text', inputmode: 'numeric', size: 5, value: span ? span[k] : k === 'open' ? '09:00' : '17:00',
      'aria-label': `${day} ${k === 'open' ? 'opens at' : 'closes at'}`, placeholder: 'HH:MM',
    }));
    return h('p', { class: 'row' },
      h('label', { class: 'grow' }, h('input', { type: 'checkbox', id: `h-day-${i}`, checked: !!span }), ` ${day}`),
      times[0], h('span', { text: 'to' }), times[1]);
  });
  return [h('p', { class: 'hint', text: 'Each day: ticked when open, from and to (HH:MM, 24:00 for midnight).' }), ...rows,
    h('label', { for: 'h-closed', text: 'Closed days' }),
    h('input', { id: 'h-closed', type: 'text', value: (values.closed_days || []).join(', '), placeholder: '2026-12-25, 2027-01-01', 'aria-describedby': 'h-closed-help' }),
    h('p', { class: 'hint', id: 'h-closed-help', text: 'Dates when the kiosk stays closed whatever the week says, separated by commas.' })];
}

/** The week and closed days as the form has them, when they differ from the saved ones. */
function hoursChanges(patch) {
  if (!original.hours || !document.getElementById('h-closed')) return;
  const week = DAYS.map((_, i) => (document.getElementById(`h-day-${i}`).checked
    ? { open: document.getElementById(`h-open-${i}`).value.trim(), close: document.getElementById(`h-close-${i}`).value.trim() } : null));
  const closed = document.getElementById('h-closed').value.split(/[\s,]+/).filter(Boolean);
  // The saved week's keys come in another order: compare day by day.
  const same = (a, b) => (a && b ? a.open === b.open && a.close === b.close : a === b);
  if (!week.every((d, i) => same(d, (original.hours.week || [])[i] ?? null))) (patch.hours ||= {}).week = week;
  if (JSON.stringify(closed) !== JSON.stringify(original.hours.closed_days)) (patch.hours ||= {}).closed_days = closed;
}

async function runTest(name, result) {
  result.replaceChildren(h('p', { class: 'hint', text: 'Testing what is in the form (nothing is saved)…' }));
  let checks;
  let failure = null;
  try {
    checks = (await api('POST', '/api/v1/settings/test', changes())).checks;
  } catch (e) {
    checks = e.data && e.data.checks;
    failure = e;
  }
  if (!checks) {
    result.replaceChildren(h('p', { class: 'error', role: 'alert', text: failure ? failure.message : 'No answer' }));
    return;
  }
  const mine = checks.filter((c) => c.name.startsWith(`${name}:`));
  const shown = mine.length ? mine : checks;
  result.replaceChildren(...(shown.length ? shown : [{ name, ok: true, latency_ms: 0, error: 'nothing to check' }]).map((c) =>
    h('p', { class: c.ok ? 'okmsg' : 'error', text: `${c.name}: ${c.ok ? 'ok' : 'failed'} (${c.latency_ms} ms)${c.detail ? ' – ' + c.detail : ''}${c.error ? ' – ' + c.error : ''}` })));
}

function changes() {
  const patch = {};
  for (const el of $('providers').querySelectorAll('[data-section]')) {
    const { section: s, key } = el.dataset;
    const before = original[s][key];
    let value = el.value;
    // A secret left hidden, or emptied by "Replace" and left empty, stays as it is.
    if (`${key}_set` in original[s] && (el.hidden || value === '')) continue;
    if (typeof before === 'number') value = Number(value);
    if (typeof before === 'boolean') value = value === 'true';
    if (Array.isArray(before)) {
      value = value.split(/[\s,]+/).filter(Boolean);
      if (JSON.stringify(value) === JSON.stringify(before)) continue;
    }
    if (value === before) continue;
    (patch[s] ||= {})[key] = value;
  }
  hoursChanges(patch);
  return patch;
}

async function loadSettings() {
  [original, characters] = await Promise.all([api('GET', '/api/v1/settings'), api('GET', '/api/v1/characters')]);
  const form = $('providers');
  const known = SECTIONS.map(([n]) => n).filter((n) => original[n]);
  // `inference` is the original front end's name for remote_voice's address: not a section.
  const others = Object.keys(original)
    .filter((n) => !known.includes(n) && n !== 'inference' && original[n] && typeof original[n] === 'object');
  form.replaceChildren(
    ...[...known, ...others].map((k) => section(k, original[k])),
    h('p', { id: 'settings-result', 'aria-live': 'polite' }),
    h('button', { type: 'submit', text: 'Save settings' }));
}

$('providers').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    const patch = changes();
    if (!Object.keys(patch).length) {
      $('settings-result').textContent = 'Nothing changed.';
      return;
    }
    await api('PUT', '/api/v1/settings', patch);
    await loadSettings();
    await loadFlows();
    $('settings-result').textContent = `Saved: ${Object.keys(patch).join(', ')}.`;
  });
});

let launch = [];
async function loadLaunch() {
  const v = await api('GET', '/api/v1/config/launch');
  launch = v.sections.flatMap((s) => s.params);
  const form = $('launch');
  form.replaceChildren(...v.sections.map((s) => h('fieldset', {},
    h('legend', { text: s.title }),
    s.params.map((p) => {
      const id = `l-${p.path}`;
      const current = p.pending ?? p.value;
      const ctl = p.options && p.options.length
        ? h('select', { id, 'data-path': p.path, disabled: p.readonly }, p.options.map((o) => h('option', { value: o, text: o, selected: o === current })))
        : typeof current === 'boolean'
          ? h('select', { id, 'data-path': p.path, disabled: p.readonly }, h('option', { value: 'true', text: 'yes', selected: current }), h('option', { value: 'false', text: 'no', selected: !current }))
          : h('input', { id, 'data-path': p.path, value: current !== null && typeof current === 'object' ? JSON.stringify(current) : String(current ?? ''), type: typeof current === 'number' ? 'number' : 'text', readonly: p.readonly });
      return [
        h('label', { for: id }, p.name, ' ',
          p.requires_restart ? h('span', { class: 'tag', text: 'restart' }) : null,
          p.readonly ? h('span', { class: 'hint', text: ' (read-only)' }) : null,
          p.pending !== undefined ? h('span', { class: 'hint', text: ` (now ${JSON.stringify(p.value)}, next start ${JSON.stringify(p.pending)})` }) : null),
        ctl,
      ];
    }))),
  h('p', { id: 'launch-result', 'aria-live': 'polite' }),
  h('button', { type: 'submit', text: 'Save launch settings' }));
}

$('launch').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    const params = [];
    for (const p of launch) {
      if (p.readonly) continue;
      const el = document.getElementById(`l-${p.path}`);
      const before = p.pending ?? p.value;
      let value = el.value;
      // An optional number (an LED line) is empty when unset: empty is null, digits a number.
      if (before === null || typeof before === 'number') {
        const n = Number(value);
        value = value.trim() === '' ? null : Number.isNaN(n) ? value : n;
      } else if (typeof before === 'boolean') value = value === 'true';
      else if (before !== null && typeof before === 'object') value = JSON.parse(value);
      if (JSON.stringify(value) !== JSON.stringify(before)) params.push({ path: p.path, value });
    }
    if (!params.length) {
      $('launch-result').textContent = 'Nothing changed.';
      return;
    }
    const r = await api('PUT', '/api/v1/config/launch', { params });
    await loadLaunch();
    $('launch-result').textContent = r.requires_restart ? 'Saved; restart the kiosk for it to take effect.' : 'Saved and applied.';
  });
});

/** What each provider receives, as staff say it. */
const RECEIVES = { voice_audio: "visitors' voices", transcripts: 'the conversation as text', knowledge: "the character's knowledge" };
const STAGE_NAMES = { asr: 'Hearing', llm: 'Answers', tts: 'Voice' };

/** Lists what leaves the kiosk under the settings in force (GET /api/v1/settings/privacy). */
async function loadFlows() {
  const v = await api('GET', '/api/v1/settings/privacy');
  const items = v.flows.filter((f) => f.host).map((f) => h('li', { class: f.leaves_building ? 'flow leaves' : 'flow', 'data-stage': f.stage },
    h('strong', { text: `${STAGE_NAMES[f.stage] || f.stage} (${f.provider}): ` }),
    `${f.receives.map((r) => RECEIVES[r] || r).join(', ')} go to ${f.host}`,
    f.leaves_building ? h('span', { class: 'tag', text: ' leaves the building' }) : ' (in the building)'));
  $('flows').replaceChildren(...(items.length ? items
    : [h('li', { class: 'flow', text: 'Nothing leaves the kiosk: the offline engine hears, answers and speaks on the kiosk itself.' })]));
}

guarded(loadSettings);
guarded(loadFlows);
guarded(loadLaunch).catch((e) => showError(e));

async function loadCertificate() {
  const c = await api('GET', '/api/v1/tls/certificate');
  $('cert-fingerprint').textContent = c.fingerprint;
  if (!c.replaceable) {
    $('cert-result').textContent = 'The configuration names the certificate files ([access] tls_cert, tls_key): replace them there.';
    for (const el of $('cert').querySelectorAll('input, button')) el.disabled = true;
  }
}

$('cert').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    $('cert-result').textContent = '';
    const [cert_pem, key_pem] = await Promise.all([$('cert-file').files[0].text(), $('key-file').files[0].text()]);
    const r = await api('PUT', '/api/v1/tls/certificate', { cert_pem, key_pem });
    $('cert-fingerprint').textContent = r.fingerprint;
    $('cert-result').textContent = 'Certificate replaced: new connections use it now.';
  }, $('cert-error'));
});

guarded(loadCertificate);
