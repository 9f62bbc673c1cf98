import { api, $, h, guarded } from '/console/api.js';

const PAGE = 50;
let cid = '';
let visit = '';
let cursor = '';
let shownVisit = null; // the visit of the last message shown, to start a new group

const base = () => `/api/v1/characters/${encodeURIComponent(cid)}/conversations`;
const query = (more = {}) => new URLSearchParams({ ...(visit ? { session_id: visit } : {}), ...more }).toString();

async function characters() {
  const list = await api('GET', '/api/v1/characters');
  const wanted = new URLSearchParams(location.search).get('character');
  cid = (list.find((c) => c.id === wanted) || list[0] || {}).id || '';
  $('character').replaceChildren(...list.map((c) => h('option', { value: c.id, selected: c.id === cid, text: c.name })));
}

function when(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toLocaleString();
}

/** Shows the next page of messages, newest first, a heading wherever the visit changes. */
async function more() {
  const page = await api('GET', `${base()}/messages?${query({ limit: PAGE, ...(cursor ? { before: cursor } : {}) })}`);
  const items = [];
  for (const m of page.messages.reverse()) {
    if (m.session_id !== shownVisit) {
      shownVisit = m.session_id;
      items.push(h('li', { class: 'visit' }, `Visit ${m.session_id.slice(0, 8)} · ${when(m.timestamp)} `,
        visit ? null : h('button', { type: 'button', class: 'secondary', text: 'Only this visit', onclick: () => show(m.session_id) })));
    }
    items.push(h('li', { class: m.role === 'user' ? 'user' : 'assistant', title: when(m.timestamp) },
      m.content, m.unmatched ? h('span', { class: 'tag', text: ' not in the knowledge' }) : null));
  }
  if (!items.length && !cursor) items.push(h('li', { class: 'hint', text: 'No conversations yet.' }));
  $('messages').append(...items);
  cursor = page.next_cursor || '';
  $('older').hidden = !page.has_more;
}

/** Starts the list over for `session` ('' for every visit). */
async function show(session) {
  visit = session;
  cursor = '';
  shownVisit = null;
  $('filter').hidden = !visit;
  $('visit').textContent = visit;
  $('csv').href = `${base()}/export?${query({ format: 'csv' })}`;
  $('json').href = `${base()}/export?${query({ format: 'json' })}`;
  $('messages').replaceChildren();
  await more();
}

$('older').addEventListener('click', () => guarded(more));
$('all').addEventListener('click', () => guarded(() => show('')));
$('character').addEventListener('change', (ev) => {
  cid = ev.target.value;
  history.replaceState(null, '', `?character=${encodeURIComponent(cid)}`);
  guarded(() => show(''));
});

guarded(async () => {
  await characters();
  if (cid) await show('');
});
