import { api, $, h, guarded, explain } from '/console/api.js';

/** The document being edited; the form writes into it as staff type. */
let doc = {};

/** "start_date" -> "Start date". */
const words = (key) => String(key).replace(/[_-]+/g, ' ').replace(/^./, (c) => c.toUpperCase());
/** Fields whose text runs to sentences. */
const LONG = /description|paragraph|text|bio|about/i;

/** An empty entry shaped like `like` (another entry of the same list), with a fresh id. */
function blank(like, list) {
  if (typeof like === 'string' || like === undefined) return '';
  if (typeof like === 'number') return 0;
  if (typeof like === 'boolean') return false;
  if (Array.isArray(like)) return [];
  const out = {};
  for (const [k, v] of Object.entries(like)) out[k] = k === 'id' ? '' : blank(v);
  if ('id' in like) {
    const prefix = String(like.id || 'item').replace(/-?\d+$/, '') || 'item';
    let n = list.length + 1;
    while (list.some((e) => e && e.id === `${prefix}-${n}`)) n += 1;
    out.id = `${prefix}-${n}`;
  }
  return out;
}

/** An image field: its picture, a file to upload under a new name, and a button to take it away. */
function image(holder, key, label) {
  const id = `f-${Math.random().toString(36).slice(2)}`;
  const value = holder[key];
  const src = value && (value.startsWith('/') || value.startsWith('http') ? value : `/api/img/${encodeURIComponent(value)}`);
  const file = h('input', { type: 'file', id, accept: 'image/png,image/jpeg,image/webp,image/gif' });
  file.addEventListener('change', () => guarded(async () => {
    const f = file.files[0];
    if (!f) return;
    const ext = (f.name.match(/\.[A-Za-z0-9]{1,5}$/) || [''])[0].toLowerCase();
    const name = `${(holder.id || key).replace(/[^A-Za-z0-9_-]/g, '')}-${Date.now()}${ext}`;
    const res = await fetch(`/api/img/${encodeURIComponent(name)}`, {
      method: 'PUT', credentials: 'same-origin', body: f, headers: { 'Content-Type': f.type || 'application/octet-stream' },
    });
    if (!res.ok) {
      const body = await res.json().catch(() => null);
      throw new Error(explain((body && body.error) || res.statusText, res.status));
    }
    holder[key] = name;
    draw();
  }));
  const remove = value ? h('button', { type: 'button', class: 'danger', text: 'Remove the image',
    onclick: () => guarded(async () => {
      if (!value.startsWith('/') && !value.startsWith('http')) await api('DELETE', `/api/img/${encodeURIComponent(value)}`);
      holder[key] = '';
      draw();
    }) }) : null;
  return h('div', { class: 'image-field' },
    h('label', { for: id, text: `${label}: ${value ? 'upload another' : 'upload one'}` }),
    src ? h('img', { src, alt: `${label} (${value})`, class: 'site-image' }) : h('p', { class: 'hint', text: 'No image.' }),
    file, remove);
}

/** The field of `holder[key]`: text, a list (add, remove) or a group of fields. */
function field(holder, key, label) {
  const value = holder[key];
  if (key === 'image' && (typeof value === 'string' || value == null)) return image(holder, key, label);
  if (Array.isArray(value)) {
    const items = value.map((v, i) => h('li', {},
      field(value, i, typeof v === 'object' && v ? v.title || v.id || `${label} ${i + 1}` : `${label} ${i + 1}`),
      h('button', { type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove ${label} ${i + 1}`,
        onclick: () => { value.splice(i, 1); draw(); } })));
    return h('fieldset', { 'data-list': key },
      h('legend', { text: `${label} (${value.length})` }),
      h('ol', { class: 'plain entries' }, items),
      h('button', { type: 'button', class: 'secondary', text: `Add to ${label.toLowerCase()}`,
        onclick: () => { value.push(blank(value[value.length - 1], value)); draw(); } }));
  }
  if (value && typeof value === 'object') {
    return h('fieldset', {}, h('legend', { text: label }),
      Object.keys(value).map((k) => field(value, k, words(k))));
  }
  const id = `f-${Math.random().toString(36).slice(2)}`;
  const text = typeof value === 'string' && (LONG.test(String(key)) || LONG.test(label) || value.length > 80);
  const input = text
    ? h('textarea', { id, rows: 3, text: value ?? '' })
    : h('input', { id, value: value ?? '', type: typeof value === 'number' ? 'number' : 'text' });
  input.addEventListener('input', () => {
    holder[key] = typeof value === 'number' ? Number(input.value) : input.value;
  });
  return [h('label', { for: id, text: label }), input];
}

function draw() {
  $('fields').replaceChildren(...Object.keys(doc).map((k) => field(doc, k, words(k))));
}

async function load() {
  // The public document may be cached for 30 s: the editor reads what is stored now.
  const res = await fetch('/api/data', { cache: 'no-store', credentials: 'same-origin' });
  if (!res.ok) throw new Error(explain(res.statusText, res.status));
  doc = await res.json();
  draw();
}

$('site').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    $('site-result').textContent = '';
    const r = await api('PUT', '/api/data', doc);
    $('site-result').textContent = `Saved: ${r.count.works} works, ${r.count.exhibitions} exhibitions.`;
  });
});

$('reset').addEventListener('click', () => guarded(async () => {
  if (!confirm('Replace the whole site with the example?')) return;
  await api('POST', '/api/data?seed=1');
  await load();
  $('site-result').textContent = 'The example is back.';
}));

guarded(load);
