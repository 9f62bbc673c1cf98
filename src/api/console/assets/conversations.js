import { api, $, h, guarded, pickCharacter } from '/console/api.js';

const PAGE = 50;
let cid = '';
let visit = '';
let cursor = '';
/** The visits shown, by session id: their heading's time and their list of messages. */
let groups = new Map();

const base = () => `/api/v1/characters/${encodeURIComponent(cid)}/conversations`;
const query = (more = {}) => new URLSearchParams({ ...(visit ? { session_id: visit } : {}), ...more }).toString();

function when(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toLocaleString();
}

/** The visit of `m`, made (after every visit shown so far: pages come newest first) if new. */
function group(m) {
  let g = groups.get(m.session_id);
  if (g) return g;
  const heading = h('h2', {});
  const list = h('ol', {});
  const li = h('li', { class: m.staff ? 'visit staff' : 'visit', 'data-session': m.session_id },
    h('div', { class: 'row' }, h('div', { class: 'grow' }, heading),
      visit ? null : h('button', { type: 'button', class: 'secondary only', text: 'Only this visit', onclick: () => guarded(() => show(m.session_id)) }),
      h('button', { type: 'button', class: 'danger forget', text: 'Forget this visit', onclick: () => guarded(() => forget(m.session_id)) })),
    list);
  g = { heading, list, staff: !!m.staff, count: 0 };
  groups.set(m.session_id, g);
  $('messages').append(li);
  return g;
}

/** Shows the next (older) page: each message goes on top of its visit, which reads oldest first. */
async function more() {
  const page = await api('GET', `${base()}/messages?${query({ limit: PAGE, ...(cursor ? { before: cursor } : {}) })}`);
  for (const m of [...page.messages].reverse()) {
    const g = group(m);
    g.list.prepend(h('li', { class: m.role === 'user' ? 'user' : 'assistant', title: when(m.timestamp) },
      m.content, m.unmatched ? h('span', { class: 'tag', text: ' not in the knowledge' }) : null));
    g.count += 1;
    const who = g.staff ? 'Staff test (Try it)' : 'Visitor';
    g.heading.textContent = `${who}, ${when(m.timestamp)} · ${g.count} message${g.count === 1 ? '' : 's'}`;
  }
  if (!groups.size) $('messages').replaceChildren(h('li', { class: 'hint', text: 'No conversations yet.' }));
  cursor = page.next_cursor || '';
  $('older').hidden = !page.has_more;
}

/** Forgets a visit, as a visitor may ask: its words go at once, its counts stay in the statistics. */
async function forget(session) {
  if (!confirm('Forget this visit? What was said is deleted now; the statistics keep only its counts.')) return;
  await api('DELETE', `${base()}/visits/${encodeURIComponent(session)}`);
  await show(visit === session ? '' : visit);
}

/** Starts the list over for `session` ('' for every visit). */
async function show(session) {
  visit = session;
  cursor = '';
  groups = new Map();
  $('filter').hidden = !visit;
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
  cid = await pickCharacter($('character'));
  if (cid) await show('');
});
