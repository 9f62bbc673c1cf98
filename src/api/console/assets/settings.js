import { api, $, h, guarded, showError } from '/console/api.js';

/** Sections whose provider the test button checks (the test's names are `stage:provider`). */
const TESTABLE = ['llm', 'asr', 'tts', 'realtime', 'remote_voice'];
let original = {};

function fieldId(section, key) { return `s-${section}-${key}`; }

const PROVIDERS = ['', 'local', 'openai', 'openai_realtime', 'remote', 'wyoming'];

function input(section, key, value, secret) {
  const id = fieldId(section, key);
  const attrs = { id, name: `${section}.${key}`, 'data-section': section, 'data-key': key };
  if (key === 'provider' && PROVIDERS.includes(value)) {
    return h('select', attrs, PROVIDERS.map((p) => h('option', { value: p, text: p || 'none', selected: p === value })));
  }
  if (typeof value === 'boolean') return h('select', attrs, h('option', { value: 'true', text: 'yes', selected: value }), h('option', { value: 'false', text: 'no', selected: !value }));
  if (typeof value === 'number') return h('input', { ...attrs, type: 'number', step: 'any', value: String(value) });
  return h('input', { ...attrs, type: secret ? 'password' : 'text', value: value ?? '', autocomplete: secret ? 'new-password' : 'off' });
}

function section(name, values) {
  const rows = [];
  for (const [key, value] of Object.entries(values)) {
    if (key.endsWith('_set') && `${key.slice(0, -4)}` in values) continue;
    if (value !== null && typeof value === 'object') continue;
    const secret = `${key}_set` in values;
    const label = secret ? `${key} (${values[`${key}_set`] ? 'set' : 'not set'})` : key;
    rows.push(h('label', { for: fieldId(name, key), text: label }), input(name, key, value, secret));
  }
  const result = h('div', { class: 'result', id: `result-${name}`, 'aria-live': 'polite' });
  const test = TESTABLE.includes(name) ? h('button', {
    type: 'button', class: 'secondary', text: `Test ${name}`,
    onclick: () => runTest(name, result),
  }) : null;
  return h('fieldset', {}, h('legend', { text: name }), rows, h('div', { class: 'row' }, test), result);
}

async function runTest(name, result) {
  result.replaceChildren(h('p', { class: 'hint', text: 'Testing…' }));
  let checks;
  let failure = null;
  try {
    checks = (await api('POST', '/api/v1/settings/test')).checks;
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
    if (typeof before === 'number') value = Number(value);
    if (typeof before === 'boolean') value = value === 'true';
    if (value === before) continue;
    (patch[s] ||= {})[key] = value;
  }
  return patch;
}

async function loadSettings() {
  original = await api('GET', '/api/v1/settings');
  const form = $('providers');
  form.replaceChildren(
    ...Object.entries(original).filter(([, v]) => v && typeof v === 'object').map(([k, v]) => section(k, v)),
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
        : h('input', { id, 'data-path': p.path, value: typeof current === 'object' ? JSON.stringify(current) : String(current ?? ''), type: typeof current === 'number' ? 'number' : 'text', readonly: p.readonly });
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
      if (typeof before === 'number') value = Number(value);
      else if (typeof before === 'boolean') value = value === 'true';
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

guarded(loadSettings);
guarded(loadLaunch).catch((e) => showError(e));

async function loadCertificate() {
  const c = await api('GET', '/api/v1/tls/certificate');
  $('cert-fingerprint').textContent = c.fingerprint;
  if (!c.replaceable) {
    $('cert-result').textContent = 'The configuration names the certificate files (tls_cert, tls_key): replace them there.';
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
