import { api, $, h, guarded, showError, explain } from '/console/api.js';

const FIELDS = ['name', 'description', 'personality', 'speaking_style', 'welcome_message', 'system_prompt', 'voice_provider', 'voice_type'];
/** The kiosk's states that each have an idle clip of the active image. */
const STATES = ['idle', 'listening', 'speaking'];
/** What a provider field does, for the "not available on this kiosk" mark. */
const PART = { voice_provider: 'voice', 'components.llm': 'brain', 'components.asr': 'hearing', 'components.tts': 'voice' };
let editing = null; // the character being edited, or null for a new one
let kiosk = '';
let languages = []; // the museum's, the default first (a voice per language for the others)
let sampleUrl = null; // the object URL of the voice sample playing, revoked when replaced

const enc = encodeURIComponent;
const base = (filename) => filename.replace(/\.[^.]*$/, '');

function imageUrl(c, img) {
  return img.url || `/api/v1/characters/${enc(c.id)}/images/${enc(img.filename)}`;
}

/** The stored clip of `state` for the active image, from the character's clip URLs. */
function clipUrl(c, state) {
  const prefix = `/api/v1/characters/${c.id}/idle-videos/${base(c.active_image)}/${state}/`;
  return c.idle_video_urls.find((u) => u.startsWith(prefix));
}

/** PUTs `file` to `path` with XMLHttpRequest, reporting upload progress on `bar`. */
function upload(path, file, bar) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', path);
    xhr.setRequestHeader('Content-Type', 'video/mp4');
    bar.hidden = false;
    bar.value = 0;
    xhr.upload.addEventListener('progress', (e) => {
      if (e.lengthComputable) bar.value = e.loaded / e.total;
    });
    xhr.addEventListener('load', () => {
      bar.hidden = true;
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let msg = xhr.statusText;
      try { msg = JSON.parse(xhr.responseText).error || msg; } catch { /* not JSON */ }
      reject(new Error(explain(msg, xhr.status)));
    });
    xhr.addEventListener('error', () => { bar.hidden = true; reject(new Error('Cannot reach the kiosk')); });
    xhr.send(file);
  });
}

/** The idle clips of the active image, one per state: preview, upload with progress. */
function clips(c) {
  if (!c.active_image) return null;
  const err = h('p', { class: 'error', role: 'alert', hidden: true });
  return h('div', { class: 'clips' },
    h('h3', { text: 'Idle clips (H.264 MP4)' }),
    STATES.map((state) => {
      const url = clipUrl(c, state);
      const id = `c-${c.id}-${state}`;
      const bar = h('progress', { max: 1, value: 0, hidden: true, 'aria-label': `Upload of the ${state} clip` });
      const input = h('input', { type: 'file', id, accept: 'video/mp4', class: 'file', 'data-state': state });
      input.addEventListener('change', () => guarded(async () => {
        if (!input.files.length) return;
        const path = `/api/v1/characters/${enc(c.id)}/idle-videos/${enc(base(c.active_image))}/${state}/${state}.mp4`;
        await upload(path, input.files[0], bar);
        await load();
      }, err));
      return h('div', { class: 'clip' },
        url ? h('video', { src: url, controls: true, muted: true, loop: true, preload: 'metadata', 'aria-label': `${c.name} ${state}` })
          : h('p', { class: 'hint', text: `No ${state} clip.` }),
        h('label', { for: id, text: `Upload the ${state} clip` }), input, bar);
    }),
    err);
}

function card(c) {
  const id = `c-${c.id}`;
  const upload = h('input', { type: 'file', id: `${id}-file`, accept: 'image/png,image/jpeg,image/webp,image/gif', class: 'file' });
  upload.addEventListener('change', () => guarded(async () => {
    if (!upload.files.length) return;
    const form = new FormData();
    form.append('avatar', upload.files[0]);
    await api('POST', `/api/v1/characters/${enc(c.id)}/avatar`, form);
    await load();
  }));
  const thumbs = h('div', { class: 'thumbs', role: 'group', 'aria-label': `Images of ${c.name}` },
    c.images.map((img) => h('button', {
      type: 'button',
      'aria-pressed': String(img.filename === c.active_image),
      'aria-label': `Use ${img.orig_name || img.filename} as ${c.name}'s image`,
      onclick: () => guarded(async () => {
        await api('PUT', `/api/v1/characters/${enc(c.id)}/images/${enc(img.filename)}/activate`);
        await load();
      }),
    }, h('img', { src: imageUrl(c, img), alt: '' }))));
  const isKiosk = c.id === kiosk;
  const missing = (c.not_on_this_kiosk || []).map((m) => `${PART[m.field]} (${m.provider})`);
  return h('li', { 'data-id': c.id },
    c.avatar_image ? h('img', { src: c.avatar_image, alt: `${c.name}'s active image` }) : null,
    h('h2', { text: c.name }),
    isKiosk ? h('p', { class: 'okmsg', text: 'Shown on the kiosk' }) : null,
    missing.length ? h('p', { class: 'warn', text: `Not available on this kiosk: ${[...new Set(missing)].join(', ')}` }) : null,
    h('p', { class: 'hint', text: c.description || 'No description.' }),
    h('div', { class: 'row' },
      h('button', { type: 'button', onclick: () => open(c), text: 'Edit' }),
      isKiosk ? null : h('button', {
        type: 'button', class: 'secondary', text: 'Show on kiosk',
        onclick: () => guarded(async () => {
          await api('PUT', '/api/v1/settings', { kiosk: { character_id: c.id } });
          await load();
        }),
      }),
      h('button', {
        type: 'button', class: 'danger', text: 'Delete',
        onclick: () => guarded(async () => {
          if (!confirm(`Delete ${c.name}? Its images and knowledge go too.`)) return;
          await api('DELETE', `/api/v1/characters/${enc(c.id)}`);
          await load();
        }),
      })),
    h('label', { for: upload.id, text: 'Upload an image' }), upload,
    thumbs,
    clips(c));
}

async function load() {
  const [list, settings] = await Promise.all([
    api('GET', '/api/v1/characters'),
    api('GET', '/api/v1/settings'),
  ]);
  kiosk = settings.kiosk.character_id || (list[0] && list[0].id) || '';
  languages = settings.kiosk.languages || [];
  const current = list.find((c) => c.id === kiosk);
  $('kiosk-character').textContent = current ? current.name : 'no character';
  $('list').replaceChildren(...list.map(card));
}

/** Offers the voices of the chosen provider: a list to pick from when the provider has a fixed
 * set (others are refused on save), suggestions beside free text otherwise. */
async function loadVoices() {
  const provider = $('f-voice_provider').value;
  const input = $('f-voice_type');
  const pick = $('f-voice_pick');
  const current = input.value;
  let v = null;
  try {
    v = await api('GET', `/api/v1/characters/voices?provider=${enc(provider)}`);
  } catch (e) {
    $('voice-note').textContent = `No list of voices: ${e.message}`;
  }
  const closed = !!(v && v.closed && v.voices.length);
  pick.hidden = !closed;
  input.hidden = closed;
  $('voice-label').htmlFor = closed ? 'f-voice_pick' : 'f-voice_type';
  if (closed) {
    const known = !current || v.voices.some((x) => x.id === current);
    pick.replaceChildren(h('option', { value: '', text: 'The default voice', selected: !current }),
      ...v.voices.map((x) => h('option', { value: x.id, text: x.name === x.id ? x.id : `${x.name} (${x.id})`, selected: x.id === current })),
      known ? null : h('option', { value: current, text: `${current} (this provider has no such voice)`, selected: true }));
    $('voice-note').textContent = `${v.voices.length} voices of ${v.provider}.`;
  }
  if (v) $('voice-list').replaceChildren(...v.voices.map((x) => h('option', { value: x.id })));
  if (!closed && v) {
    $('voice-note').textContent = v.voices.length ? `Suggested voices of ${v.provider}; its server may have others.` : 'This provider speaks in the voice its own settings choose.';
  }
}

$('f-voice_pick').addEventListener('change', (ev) => { $('f-voice_type').value = ev.target.value; });
$('f-voice_provider').addEventListener('change', () => guarded(loadVoices, $('sample-error')));

/** The language's name in itself ("Deutsch"), with its code. */
function languageName(tag) {
  let name = tag;
  try { name = new Intl.DisplayNames([tag], { type: 'language' }).of(tag) || tag; } catch { name = tag; }
  return `${name[0].toUpperCase()}${name.slice(1)} (${tag})`;
}

/** A voice field per museum language beyond the default, each with its sample. */
function drawVoices(c) {
  const others = languages.slice(1);
  $('voices-by-language').hidden = !others.length;
  $('voices').replaceChildren(...others.map((tag) => {
    const id = `f-voice-${tag}`;
    const field = h('input', { id, 'data-language': tag, list: 'voice-list', autocomplete: 'off', value: (c && c.voices && c.voices[tag]) || '' });
    return h('div', { class: 'row' },
      h('div', { class: 'grow' }, h('label', { for: id, text: languageName(tag) }), field),
      h('button', { type: 'button', class: 'secondary', text: 'Play a sample', 'aria-label': `Play a sample of the ${languageName(tag)} voice`,
        onclick: () => guarded(() => playSample(field.value || $('f-voice_type').value), $('sample-error')) }));
  }));
}

function open(c) {
  editing = c;
  $('edit-h').textContent = c ? `Edit ${c.name}` : 'New character';
  for (const f of FIELDS) $(`f-${f}`).value = c ? c[f] || '' : '';
  drawVoices(c);
  guarded(loadVoices, $('sample-error'));
  showError(null, $('form-error'));
  showError(null, $('sample-error'));
  $('sample').hidden = true;
  $('edit').showModal();
  $('f-name').focus();
}

/** Plays a sample of the chosen voice: the voice test asked for a WAV, played from a blob URL. */
async function playSample(voice = $('f-voice_type').value) {
  const res = await fetch('/api/v1/characters/test-voice', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'audio/wav' },
    body: JSON.stringify({ voice_provider: $('f-voice_provider').value, voice_type: voice }),
  });
  if (!res.ok) {
    let msg = res.statusText;
    try { msg = (await res.json()).error || msg; } catch { /* not JSON */ }
    throw new Error(explain(msg, res.status));
  }
  if (sampleUrl) URL.revokeObjectURL(sampleUrl);
  sampleUrl = URL.createObjectURL(await res.blob());
  const audio = $('sample');
  audio.src = sampleUrl;
  audio.hidden = false;
  await audio.play().catch(() => { /* autoplay refused: the controls are shown */ });
}

$('new').addEventListener('click', () => open(null));
$('cancel').addEventListener('click', () => $('edit').close());
$('sample-play').addEventListener('click', () => guarded(() => playSample(), $('sample-error')));
$('form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const body = editing ? { ...editing } : {};
  for (const f of FIELDS) body[f] = $(`f-${f}`).value;
  body.voices = { ...(editing && editing.voices) };
  for (const field of $('voices').querySelectorAll('input[data-language]')) {
    if (field.value.trim()) body.voices[field.dataset.language] = field.value.trim();
    else delete body.voices[field.dataset.language];
  }
  await guarded(async () => {
    if (editing) await api('PUT', `/api/v1/characters/${enc(editing.id)}`, body);
    else await api('POST', `/api/v1/characters`, body);
    $('edit').close();
    await load();
  }, $('form-error'));
});

guarded(load);
