import { api, $, h, guarded, showError, explain, pickCharacter } from '/console/api.js';

const POLL_MS = 1000;
const POLL_MAX = 600; // ten minutes of indexing at most, then a reload shows the rest
let cid = '';
let polls = 0;
let timer = 0;

const base = () => `/api/v1/characters/${encodeURIComponent(cid)}`;

function source(s) {
  const status = s.status === 'failed' ? `failed: ${s.error}` : s.status;
  return h('li', { 'data-status': s.status },
    h('span', { class: 'grow' }, h('strong', { text: s.relative_path || s.filename }), ' ',
      h('span', { class: `badge ${s.status}`, text: status }),
      s.status === 'ready' && s.indexable ? h('span', { class: 'hint', text: ` ${s.chunk_count} passage${s.chunk_count === 1 ? '' : 's'}` }) : null),
    h('button', { type: 'button', class: 'secondary', text: 'Reindex', onclick: () => guarded(async () => {
      await api('POST', `${base()}/knowledge/${s.id}/reindex`);
      await sources();
    }) }),
    h('button', { type: 'button', class: 'danger', text: 'Delete', onclick: () => guarded(async () => {
      if (!confirm(`Delete ${s.relative_path || s.filename}?`)) return;
      await api('DELETE', `${base()}/knowledge/${s.id}`);
      await sources();
    }) }));
}

/** Shows the sources; while one is indexing, looks again in a second (a bounded number of times). */
async function sources() {
  clearTimeout(timer);
  const { sources: list } = await api('GET', `${base()}/knowledge`);
  $('sources').replaceChildren(...(list.length ? list.map(source) : [h('li', { class: 'hint', text: 'No knowledge yet.' })]));
  if (list.some((s) => s.status === 'indexing') && polls++ < POLL_MAX) {
    timer = setTimeout(() => guarded(sources), POLL_MS);
  } else {
    polls = 0;
    await Promise.all([screen(), faqRecordings()]); // the FAQ questions change with the indexed knowledge
  }
}

// The FAQ: its entries with their translations side by side, each saved question beside its
// recorded answer. `faq` is what the page edits; `saved` what the kiosk has (a recording is
// attached to a question as saved, so an edited question offers none until it is saved).
const FAQ_MAX_QUESTION = 300;
const FAQ_MAX_ANSWER = 4000;
let faq = { languages: [], entries: [] };
let saved = [];
let recordings = [];

const copy = (entries) => entries.map((e) => ({ id: e.id, texts: JSON.parse(JSON.stringify(e.texts)) }));
const written = (t) => !!t && !!(t.question.trim() || t.answer.trim());

/** The language's name in itself ("Deutsch"), with its tag. */
function languageName(tag) {
  let name = tag;
  try { name = new Intl.DisplayNames([tag], { type: 'language' }).of(tag) || tag; } catch { name = tag; }
  return `${name[0].toUpperCase()}${name.slice(1)} (${tag})`;
}

/** The table's languages: the museum's in order, then any other an entry has. */
function faqLanguages() {
  const out = [...faq.languages];
  for (const e of faq.entries) for (const tag of Object.keys(e.texts)) if (!out.includes(tag)) out.push(tag);
  return out;
}

/** Uploads `file` as the recorded answer to `question`, replacing any it had. */
async function record(question, file) {
  const form = new FormData();
  form.append('question', question);
  form.append('file', file, file.name);
  await api('POST', `${base()}/recordings`, form);
  $('faq-result').textContent = `Recorded answer to "${question}" stored.`;
  await faqRecordings();
}

/** The recorded answer's controls beside a saved question: play, replace, delete; or upload. */
function recordingOf(i, tag, question) {
  const r = recordings.find((x) => x.question === question && x.language === tag);
  const id = `faq-rec-${i}-${tag}`;
  const input = h('input', { type: 'file', id, accept: 'audio/*,.wav,.flac,.ogg,.mp3', onchange: (ev) => {
    const file = ev.target.files[0];
    ev.target.value = '';
    if (file) guarded(() => record(question, file), $('faq-error'));
  } });
  if (!r) {
    return h('div', { class: 'rec' }, h('label', { for: id, text: 'Upload a recorded answer' }), input);
  }
  return h('div', { class: 'rec', 'data-recording': r.id },
    h('span', { class: 'hint', text: `Recorded answer, ${r.seconds.toFixed(1)} s (${r.orig_name})` }),
    h('audio', { controls: true, preload: 'metadata', src: r.url, 'aria-label': `Recorded answer to ${question}` }),
    h('label', { for: id, text: 'Replace the recording' }), input,
    h('button', { type: 'button', class: 'danger', text: 'Delete the recording', onclick: () => guarded(async () => {
      if (!confirm(`Delete the recorded answer to "${question}"?`)) return;
      await api('DELETE', `${base()}/recordings/${encodeURIComponent(r.id)}`);
      $('faq-result').textContent = 'Recording deleted: the answer is synthesised again.';
      await faqRecordings();
    }, $('faq-error')) }));
}

/** A cell of the table: one language's question and answer of entry `i`. */
function faqCell(i, tag) {
  const e = faq.entries[i];
  const t = e.texts[tag] || { question: '', answer: '' };
  const lacking = !written(t);
  const edit = (side) => (ev) => {
    e.texts[tag] = { ...(e.texts[tag] || { question: '', answer: '' }), [side]: ev.target.value };
    $('faq-result').textContent = 'Not saved yet.';
  };
  const stored = saved.find((x) => x.id === e.id);
  const storedText = stored && stored.texts[tag];
  const asSaved = storedText && storedText.question === t.question && storedText.answer === t.answer;
  const name = languageName(tag);
  return h('td', { class: lacking ? 'missing' : null, 'data-language': name },
    lacking ? h('span', { class: 'tag', text: 'missing' }) : null,
    h('label', { for: `faq-q-${i}-${tag}`, text: `Question, ${name}` }),
    h('input', { id: `faq-q-${i}-${tag}`, value: t.question, maxlength: String(FAQ_MAX_QUESTION), oninput: edit('question') }),
    h('label', { for: `faq-a-${i}-${tag}`, text: `Answer, ${name}` }),
    h('textarea', { id: `faq-a-${i}-${tag}`, maxlength: String(FAQ_MAX_ANSWER), oninput: edit('answer') }, t.answer),
    asSaved ? recordingOf(i, tag, t.question) : null);
}

/** Recordings whose question is no saved entry's any more (it was edited or removed). */
function drawOrphans() {
  const orphans = recordings.filter((r) => !saved.some((e) => e.texts[r.language] && e.texts[r.language].question === r.question));
  $('faq-orphans').hidden = !orphans.length;
  $('orphans').replaceChildren(...orphans.map((r) => h('li', { 'data-recording': r.id },
    h('span', { class: 'grow', text: `${r.question} (${r.language}, ${r.seconds.toFixed(1)} s)` }),
    h('audio', { controls: true, preload: 'none', src: r.url, 'aria-label': `Recorded answer to ${r.question}` }),
    h('button', { type: 'button', class: 'danger', text: 'Delete', 'aria-label': `Delete the recording of ${r.question}`, onclick: () => guarded(async () => {
      await api('DELETE', `${base()}/recordings/${encodeURIComponent(r.id)}`);
      await faqRecordings();
    }, $('faq-error')) }))));
}

/** Draws the FAQ table: a row per entry, a column per language. */
function drawFaq() {
  const languages = faqLanguages();
  $('faq-download').href = `${base()}/faq.csv`;
  const head = h('thead', {}, h('tr', {}, languages.map((tag) => h('th', { scope: 'col', text: languageName(tag) })),
    h('th', { scope: 'col', text: 'Entry' })));
  const rows = faq.entries.map((e, i) => h('tr', { 'data-entry': e.id || '' },
    languages.map((tag) => faqCell(i, tag)),
    h('td', { class: 'actions', 'data-language': 'Entry' }, h('button', { type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove entry ${i + 1}`, onclick: () => {
      faq.entries.splice(i, 1);
      $('faq-result').textContent = 'Not saved yet.';
      drawFaq();
    } }))));
  const body = h('tbody', {}, rows.length ? rows
    : h('tr', {}, h('td', { colspan: String(languages.length + 1), class: 'hint', text: 'No FAQ entry yet: add a question, or upload a CSV file.' })));
  $('faq-table').replaceChildren(head, body);
  drawOrphans();
}

function showFaq(view) {
  faq = { languages: view.languages, entries: copy(view.entries) };
  saved = copy(view.entries);
  drawFaq();
}

async function faqRecordings() {
  recordings = await api('GET', `${base()}/recordings`);
  drawFaq();
}

async function loadFaq() {
  const [view, recs] = await Promise.all([api('GET', `${base()}/faq`), api('GET', `${base()}/recordings`)]);
  recordings = recs;
  showFaq(view);
}

$('faq-add').addEventListener('click', () => {
  faq.entries.push({ id: '', texts: {} });
  drawFaq();
  const first = faqLanguages()[0];
  if (first) $(`faq-q-${faq.entries.length - 1}-${first}`).focus();
});

$('faq-save').addEventListener('click', () => guarded(async () => {
  $('faq-result').textContent = 'Saving…';
  const entries = faq.entries.map((e) => ({ id: e.id || undefined, texts: e.texts }));
  showFaq(await api('PUT', `${base()}/faq`, { entries }));
  $('faq-result').textContent = 'Saved.';
  await sources();
}, $('faq-error')).then(() => { if (!$('faq-error').hidden) $('faq-result').textContent = ''; }));

$('faq-csv').addEventListener('change', (ev) => {
  const file = ev.target.files[0];
  ev.target.value = '';
  if (!file) return;
  guarded(async () => {
    let res;
    try {
      res = await fetch(`${base()}/faq.csv`, { method: 'PUT', credentials: 'same-origin', headers: { 'Content-Type': 'text/csv' }, body: await file.text() });
    } catch (e) {
      throw new Error(`Cannot reach the kiosk: ${e.message}`);
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new Error(explain((body && body.error) || res.statusText, res.status));
    showFaq(body);
    $('faq-result').textContent = `${file.name}: ${body.entries.length} entries stored.`;
    await sources();
  }, $('faq-error'));
});

const SCREEN_MAX = 30;
const SCREEN_MAX_CHARS = 120;
let onScreen = [];

/** Draws the questions on the screen (in order, each movable) and the other FAQ questions. */
function drawScreen(choice) {
  onScreen = choice.on_screen.map((q) => q.text);
  const full = onScreen.length >= SCREEN_MAX;
  const n = onScreen.length;
  $('on-screen').replaceChildren(...(n ? onScreen.map((text, i) => h('li', { 'data-question': text },
    h('label', { class: 'grow' }, h('input', { type: 'checkbox', checked: true, onchange: () => saveScreen(onScreen.filter((t) => t !== text)) }),
      ` ${i + 1}. ${text}`),
    h('button', { type: 'button', class: 'secondary', text: '↑', 'aria-label': `Move up: ${text}`, disabled: i === 0, onclick: () => saveScreen(moved(i, i - 1)) }),
    h('button', { type: 'button', class: 'secondary', text: '↓', 'aria-label': `Move down: ${text}`, disabled: i === n - 1, onclick: () => saveScreen(moved(i, i + 1)) })))
    : [h('li', { class: 'hint', text: 'None: the screen offers no questions.' })]));
  const others = choice.faq.filter((t) => !onScreen.includes(t));
  $('faq').replaceChildren(...(others.length ? others.map((text) => {
    const long = [...text].length > SCREEN_MAX_CHARS;
    return h('li', { 'data-question': text },
      h('label', { class: 'grow' }, h('input', { type: 'checkbox', disabled: full || long, onchange: () => saveScreen([...onScreen, text]) }), ` ${text}`),
      long ? h('span', { class: 'hint', text: 'too long for the screen' }) : null);
  }) : [h('li', { class: 'hint', text: 'No other FAQ question in the knowledge.' })]));
}

/** The questions on the screen with the one at `from` moved to `to`. */
function moved(from, to) {
  const next = [...onScreen];
  next.splice(to, 0, next.splice(from, 1)[0]);
  return next;
}

/** Saves the questions on the screen; refused, it draws again what is saved. */
async function saveScreen(questions) {
  $('screen-result').textContent = '';
  const choice = await guarded(() => api('PUT', `${base()}/screen-questions`, { questions }), $('screen-error'));
  if (choice) {
    drawScreen(choice);
    $('screen-result').textContent = 'Saved.';
  } else {
    await guarded(screen);
  }
}

async function screen() {
  drawScreen(await api('GET', `${base()}/screen-questions`));
}

async function unmatched() {
  const { questions } = await api('GET', `${base()}/conversations/unmatched`);
  $('unmatched').replaceChildren(...(questions.length
    ? questions.map((q) => h('li', {}, h('span', { class: 'grow', text: q.question }), h('span', { class: 'badge', title: 'times asked', text: `×${q.count}` })))
    : [h('li', { class: 'hint', text: 'None so far.' })]));
}

/** Uploads one file, its progress shown in `bar`; resolves to the server's answer. */
function send(file, path, bar) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    form.append('files', file, file.name);
    form.append('relative_paths', path);
    const x = new XMLHttpRequest();
    x.open('POST', `${base()}/knowledge/files`);
    x.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
    x.onload = () => {
      let body = null;
      try { body = JSON.parse(x.responseText); } catch { body = null; }
      if (x.status === 201) resolve(body);
      else reject(new Error(explain((body && body.error) || x.statusText, x.status)));
    };
    x.onerror = () => reject(new Error('Cannot reach the kiosk'));
    x.send(form);
  });
}

/** Uploads files one at a time, each with its own progress bar and outcome. */
async function upload(items) {
  for (const { file, path } of items) {
    const bar = h('progress', { max: '1', value: '0', 'aria-label': `Upload of ${path}` });
    const note = h('span', { class: 'hint', text: ' uploading' });
    $('uploads').append(h('li', {}, h('span', { class: 'grow', text: path }), bar, note));
    try {
      const res = await send(file, path, bar);
      bar.value = 1;
      const skipped = res.skipped && res.skipped[0];
      note.textContent = skipped ? ` skipped: ${skipped.reason}` : ' uploaded';
      note.className = skipped ? 'bad' : 'good';
    } catch (e) {
      note.textContent = ` ${e.message}`;
      note.className = 'bad';
    }
    await guarded(sources);
  }
}

const picked = (input) => [...input.files].map((f) => ({ file: f, path: f.webkitRelativePath || f.name }));

/** Every file under a dropped entry, with its path inside the drop. */
async function walk(entry, out) {
  if (entry.isFile) {
    out.push(await new Promise((res, rej) => entry.file((f) => res({ file: f, path: entry.fullPath.replace(/^\//, '') }), rej)));
  } else if (entry.isDirectory) {
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
      if (!batch.length) break;
      for (const e of batch) await walk(e, out);
    }
  }
}

for (const id of ['files', 'folder']) {
  $(id).addEventListener('change', (ev) => { upload(picked(ev.target)); ev.target.value = ''; });
}
const drop = $('drop');
drop.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (ev) => {
  ev.preventDefault();
  drop.classList.remove('over');
  const entries = [...ev.dataTransfer.items].map((i) => i.webkitGetAsEntry && i.webkitGetAsEntry()).filter(Boolean);
  guarded(async () => {
    const items = [];
    if (entries.length) for (const e of entries) await walk(e, items);
    else items.push(...[...ev.dataTransfer.files].map((f) => ({ file: f, path: f.name })));
    await upload(items);
  });
});

$('ask').addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (!cid) return; // the character is still being chosen
  guarded(async () => {
    $('answer').replaceChildren(h('p', { class: 'hint', text: 'Thinking…' }));
    const a = await api('POST', `${base()}/knowledge/ask`, { question: $('question').value });
    $('answer').replaceChildren(
      h('h3', { text: `The kiosk would say (${a.provider})` }),
      h('p', { id: 'answer-text', class: a.matched ? 'said' : 'said bad', text: a.answer }),
      h('h3', { text: a.passages.length ? 'Passages found' : 'No passage found' }),
      h('ol', { id: 'passages' }, a.passages.map((p) => h('li', {},
        h('strong', { text: p.title || p.filename }), h('span', { class: 'hint', text: ` score ${p.score.toFixed(2)}` }),
        h('p', { text: p.content })))));
  }, $('ask-error')).then(() => { if (!$('ask-error').hidden) $('answer').replaceChildren(); });
});

$('character').addEventListener('change', (ev) => {
  cid = ev.target.value;
  history.replaceState(null, '', `?character=${encodeURIComponent(cid)}`);
  $('answer').replaceChildren();
  showError(null);
  guarded(() => Promise.all([loadFaq(), sources(), unmatched()]));
});

guarded(async () => {
  cid = await pickCharacter($('character'));
  if (cid) await Promise.all([loadFaq(), sources(), unmatched()]);
});
