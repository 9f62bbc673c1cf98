import { api, $, h, availabilityText, guarded, pickCharacter } from '/console/api.js';

const SVG = 'http://www.w3.org/2000/svg';
let cid = '';
let stats = { days: [], most_asked: [] };

/** An SVG element with its attributes (the chart is drawn here: nothing from elsewhere). */
function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children.flat()) el.append(c);
  return el;
}

/** The Monday of the week of `day` (YYYY-MM-DD, UTC). */
function weekOf(day) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
  return d.toISOString().slice(0, 10);
}

/** The days added up per day or per week (from its Monday). */
function periods(per) {
  const out = [];
  for (const d of stats.days) {
    const key = per === 'week' ? weekOf(d.day) : d.day;
    let p = out[out.length - 1];
    if (!p || p.key !== key) {
      p = { key, visits: 0, questions: 0, answered: 0, unanswered: 0, asked_again: 0 };
      out.push(p);
    }
    for (const k of ['visits', 'questions', 'answered', 'unanswered', 'asked_again']) p[k] += d[k];
  }
  return out;
}

/** Bars per period: visits, and questions split into answered, unanswered and the rest. */
function chart(per) {
  const rows = periods(per);
  if (!rows.length) {
    $('chart').replaceChildren(h('p', { class: 'hint', text: 'No visits yet.' }));
    $('legend').textContent = '';
    return;
  }
  const max = Math.max(1, ...rows.map((r) => Math.max(r.visits, r.questions)));
  const W = 28;
  const H = 160;
  const width = Math.max(300, rows.length * W * 2 + 40);
  const y = (n) => H - (n / max) * H + 10;
  const bars = rows.map((r, i) => {
    const x = 30 + i * W * 2;
    const other = r.questions - r.answered - r.unanswered;
    const parts = [[r.answered, '#1b7a36', 'answered'], [r.unanswered, '#a4161a', 'unanswered'], [other, '#59636e', 'no answer']];
    let top = H + 10;
    const stacked = parts.filter(([n]) => n > 0).map(([n, fill, what]) => {
      const hgt = (n / max) * H;
      top -= hgt;
      return svg('rect', { x: x + W, y: top, width: W - 4, height: hgt, fill }, svg('title', {}, `${r.key}: ${n} ${what}`));
    });
    return svg('g', { 'data-period': r.key },
      svg('rect', { x, y: y(r.visits), width: W - 4, height: H + 10 - y(r.visits), fill: '#0b5cad', class: 'visits' }, svg('title', {}, `${r.key}: ${r.visits} visits`)),
      stacked,
      svg('text', { x: x + W - 2, y: H + 26, 'text-anchor': 'middle', 'font-size': 11, fill: '#1b1f24' }, r.key.slice(5)));
  });
  const axis = svg('g', {},
    svg('line', { x1: 26, y1: H + 10, x2: width, y2: H + 10, stroke: '#59636e' }),
    svg('text', { x: 22, y: 18, 'text-anchor': 'end', 'font-size': 11, fill: '#1b1f24' }, String(max)),
    svg('text', { x: 22, y: H + 10, 'text-anchor': 'end', 'font-size': 11, fill: '#1b1f24' }, '0'));
  const label = `Visits and questions ${per === 'week' ? 'per week' : 'per day'}, ${rows[0].key} to ${rows[rows.length - 1].key}`;
  $('chart').replaceChildren(svg('svg', { viewBox: `0 0 ${width} ${H + 34}`, width, height: H + 34, role: 'img', 'aria-label': label, class: 'chart' }, axis, bars));
  $('legend').textContent = `Each ${per === 'week' ? 'week (from its Monday)' : 'day'}: blue, visits; beside it, its questions: green answered, red unanswered, grey without an answer (a failure).`;
}

function shares() {
  const all = stats.days.reduce((t, d) => ({
    visits: t.visits + d.visits, questions: t.questions + d.questions, answered: t.answered + d.answered,
    unanswered: t.unanswered + d.unanswered, asked_again: t.asked_again + d.asked_again,
  }), { visits: 0, questions: 0, answered: 0, unanswered: 0, asked_again: 0 });
  const pct = (n) => (all.questions ? `${Math.round((100 * n) / all.questions)} %` : '0 %');
  const n = (count, word) => `${count} ${word}${count === 1 ? '' : 's'}`;
  $('shares').textContent = `${n(all.visits, 'visit')}, ${n(all.questions, 'question')}: answered ${all.answered} (${pct(all.answered)}), `
    + `asked again ${all.asked_again} (${pct(all.asked_again)}), unanswered ${all.unanswered} (${pct(all.unanswered)}).`;
  $('top').replaceChildren(...(stats.most_asked.length
    ? stats.most_asked.map((q) => h('li', {}, q.question, h('span', { class: 'hint', text: ` ×${q.count}, answered ${q.answered}` })))
    : [h('li', { class: 'hint', text: 'No questions yet.' })]));
}

async function load() {
  stats = await api('GET', `/api/v1/characters/${encodeURIComponent(cid)}/statistics`);
  $('csv').href = `/api/v1/characters/${encodeURIComponent(cid)}/statistics?format=csv`;
  $('to-knowledge').href = `/console/knowledge?character=${encodeURIComponent(cid)}`;
  chart($('period').value);
  shares();
}

/** The kiosk's availability: the last 30 days together, then each day that was open. */
async function availability() {
  const v = await api('GET', '/api/v1/system/availability');
  $('availability').textContent = availabilityText(v);
  const hours = (s) => `${(s / 3600).toFixed(1)} h`;
  $('avail-days').replaceChildren(...v.days.filter((d) => d.open_secs > 0).reverse().flatMap((d) => [
    h('dt', { text: d.date }),
    h('dd', { text: `${((100 * d.serving_secs) / d.open_secs).toFixed(1)} % of ${hours(d.open_secs)} open` }),
  ]));
}

$('period').addEventListener('change', () => chart($('period').value));
$('character').addEventListener('change', (ev) => {
  cid = ev.target.value;
  history.replaceState(null, '', `?character=${encodeURIComponent(cid)}`);
  guarded(load);
});

guarded(availability);
guarded(async () => {
  cid = await pickCharacter($('character'));
  if (cid) await load();
});
