import { api, $, h, guarded, showError } from '/console/api.js';

const FIELDS = ['name', 'description', 'personality', 'speaking_style', 'welcome_message', 'system_prompt', 'voice_provider', 'voice_type'];
let editing = null; // the character being edited, or null for a new one
let kiosk = '';

function imageUrl(c, img) {
  return img.url || `/api/v1/characters/${encodeURIComponent(c.id)}/images/${encodeURIComponent(img.filename)}`;
}

function card(c) {
  const id = `c-${c.id}`;
  const upload = h('input', { type: 'file', id: `${id}-file`, accept: 'image/png,image/jpeg,image/webp,image/gif', class: 'file' });
  upload.addEventListener('change', () => guarded(async () => {
    if (!upload.files.length) return;
    const form = new FormData();
    form.append('avatar', upload.files[0]);
    await api('POST', `/api/v1/characters/${encodeURIComponent(c.id)}/avatar`, form);
    await load();
  }));
  const thumbs = h('div', { class: 'thumbs', role: 'group', 'aria-label': `Images of ${c.name}` },
    c.images.map((img) => h('button', {
      type: 'button',
      'aria-pressed': String(img.filename === c.active_image),
      'aria-label': `Use ${img.orig_name || img.filename} as ${c.name}'s image`,
      onclick: () => guarded(async () => {
        await api('PUT', `/api/v1/characters/${encodeURIComponent(c.id)}/images/${encodeURIComponent(img.filename)}/activate`);
        await load();
      }),
    }, h('img', { src: imageUrl(c, img), alt: '' }))));
  const isKiosk = c.id === kiosk;
  return h('li', { 'data-id': c.id },
    c.avatar_image ? h('img', { src: c.avatar_image, alt: `${c.name}'s active image` }) : null,
    h('h2', { text: c.name }),
    isKiosk ? h('p', { class: 'okmsg', text: 'Shown on the kiosk' }) : null,
    h('p', { class: 'hint', text: c.description || 'No description.' }),
    thumbs,
    h('label', { for: upload.id, text: 'Upload an image' }), upload,
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
          await api('DELETE', `/api/v1/characters/${encodeURIComponent(c.id)}`);
          await load();
        }),
      })));
}

async function load() {
  const [list, settings] = await Promise.all([
    api('GET', '/api/v1/characters'),
    api('GET', '/api/v1/settings'),
  ]);
  kiosk = settings.kiosk.character_id || (list[0] && list[0].id) || '';
  const current = list.find((c) => c.id === kiosk);
  $('kiosk-character').textContent = current ? current.name : 'no character';
  $('list').replaceChildren(...list.map(card));
}

function open(c) {
  editing = c;
  $('edit-h').textContent = c ? `Edit ${c.name}` : 'New character';
  for (const f of FIELDS) $(`f-${f}`).value = c ? c[f] || '' : '';
  showError(null, $('form-error'));
  $('edit').showModal();
  $('f-name').focus();
}

$('new').addEventListener('click', () => open(null));
$('cancel').addEventListener('click', () => $('edit').close());
$('form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const body = editing ? { ...editing } : {};
  for (const f of FIELDS) body[f] = $(`f-${f}`).value;
  await guarded(async () => {
    if (editing) await api('PUT', `/api/v1/characters/${encodeURIComponent(editing.id)}`, body);
    else await api('POST', '/api/v1/characters', body);
    $('edit').close();
    await load();
  }, $('form-error'));
});

guarded(load);
