// The System page's fleet card: which hawkBit server this kiosk follows, its last poll, the
// update or content it works on, what it last reported, and a pause.
import { api, h, guarded } from '/console/api.js';

const when = (unix) => (unix ? new Date(unix * 1000).toLocaleString() : 'never');

const card = h('section', { class: 'card', 'aria-labelledby': 'h-fleet', id: 'fleet' });
const logs = document.querySelector('[aria-labelledby="h-logs"]');
logs.parentNode.insertBefore(card, logs);

function stateLine(s) {
  if (!s.enabled) return 'Off: this kiosk follows no fleet server (Settings, "Fleet server").';
  if (s.paused) return 'Paused by an administrator: nothing is asked of the server and nothing is installed.';
  const every = s.interval_secs ? ` every ${s.interval_secs} s` : '';
  return `Asks the server${every}; last answer: ${when(s.last_poll)}.`;
}

function render(s) {
  const action = s.action
    ? `${s.action.kind === 'content' ? 'Content' : 'Firmware'} ${s.action.version} (action ${s.action.id}): ${s.action.stage}`
      + (s.action.percent ? `, ${s.action.percent}%` : '')
    : 'None.';
  const reports = [...s.reported].reverse().slice(0, 10).map((r) => h('li', {},
    h('span', { text: `${when(r.at)} – ${r.what}` }), r.details ? h('span', { class: 'hint', text: ` ${r.details}` }) : null));
  const pause = h('button', {
    type: 'button', class: 'secondary', id: 'fleet-pause', text: s.paused ? 'Resume polling' : 'Pause polling',
    disabled: !s.enabled,
    onclick: () => guarded(async () => render(await api('POST', '/api/v1/fleet/pause', { paused: !s.paused })), error),
  });
  const error = h('p', { class: 'error', role: 'alert', id: 'fleet-error', hidden: true });
  // Through h(), which drops the absent parts (replaceChildren would write "null").
  card.replaceChildren(...h('div', {},
    h('h2', { id: 'h-fleet', text: 'Fleet' }),
    h('p', { class: 'hint', text: 'Updates and content from the museum\'s Eclipse hawkBit server.' }),
    h('dl', { class: 'facts' },
      h('dt', { text: 'Server' }), h('dd', { id: 'fleet-server', text: s.server ? `${s.server} (tenant ${s.tenant})` : 'none' }),
      h('dt', { text: 'This kiosk' }), h('dd', { id: 'fleet-target', text: s.controller_id || 'unknown' }),
      h('dt', { text: 'State' }), h('dd', { id: 'fleet-state', text: stateLine(s) }),
      h('dt', { text: 'In progress' }), h('dd', { id: 'fleet-action', text: action }),
      h('dt', { text: 'Content' }), h('dd', { id: 'fleet-content', text: s.content_version || 'none from the fleet' })),
    s.last_error ? h('p', { class: 'error', id: 'fleet-problem', text: `Last problem: ${s.last_error}` }) : null,
    h('h3', { text: 'Reported to the server' }),
    reports.length ? h('ul', { id: 'fleet-reported' }, reports) : h('p', { class: 'hint', id: 'fleet-reported', text: 'Nothing yet.' }),
    h('div', { class: 'row' }, pause),
    error).childNodes);
}

async function refresh() {
  try {
    render(await api('GET', '/api/v1/fleet'));
  } catch { /* shown again at the next refresh */ }
}

refresh();
setInterval(refresh, 5000);
