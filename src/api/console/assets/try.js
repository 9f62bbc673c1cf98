import { api, $, h, guarded, showError, beforeSignOut } from '/console/api.js';

let socket = null;
let partial = null;

function line(kind, text) {
  const li = h('li', { class: kind, text });
  $('chat').append(li);
  $('chat').scrollTop = $('chat').scrollHeight;
  return li;
}

async function connect() {
  const s = await api('POST', '/api/v1/sessions', {});
  // The session is the page's own: end it when the page goes, so it does not count against the
  // kiosk's session limit until it expires.
  // Signing out ends it first, since the session is the administrator's own.
  let ended = false;
  const end = () => {
    if (ended) return Promise.resolve();
    ended = true;
    return fetch(`/api/v1/sessions/${encodeURIComponent(s.session_id)}`, { method: 'DELETE', keepalive: true, credentials: 'same-origin' });
  };
  addEventListener('pagehide', end, { once: true });
  beforeSignOut.push(end);
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  socket = new WebSocket(`${proto}//${location.host}/ws/chat/${encodeURIComponent(s.session_id)}`);
  socket.addEventListener('message', (ev) => {
    if (typeof ev.data !== 'string') return;
    const m = JSON.parse(ev.data);
    switch (m.type) {
      case 'avatar_status':
        $('chat-state').textContent = m.status;
        $('chat-state').className = `badge ${m.status}`;
        break;
      case 'transcript': {
        if (m.speaker === 'user') break; // our own text is shown as it is sent
        if (!partial) partial = line('assistant', '');
        partial.textContent = m.text;
        if (m.is_final) partial = null;
        break;
      }
      case 'assistant_message':
        if (partial) { partial.textContent = m.text; partial = null; } else line('assistant', m.text);
        break;
      case 'error':
        line('err', m.message);
        break;
      default:
    }
  });
  socket.addEventListener('close', (ev) => {
    $('chat-state').textContent = 'closed';
    if (ev.code !== 1000) showError(`The chat closed: ${ev.reason || 'connection lost'} (${ev.code}). Reload to start again.`);
    socket = null;
  });
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', () => reject(new Error('Cannot open the chat socket')), { once: true });
  });
}

$('say').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    const text = $('text').value.trim();
    if (!text) return;
    if (!socket) await connect();
    socket.send(JSON.stringify({ type: 'text_input', text }));
    line('user', text);
    partial = null;
    $('text').value = '';
  });
});
