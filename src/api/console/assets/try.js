import { api, $, h, guarded, showError, beforeSignOut } from '/console/api.js';

/** The rate of the PCM the microphone worklet sends (mono, 16-bit little-endian). */
const MIC_RATE = 16000;

let socket = null;
/** The line of each turn's reply, by turn number: its streamed text, the whole message and the
 * final transcript all fill the same line (an apology after a failure too). */
const replies = new Map();
/** The line of a spoken question, filled in when the recogniser's transcript arrives. */
let heard = null;

function line(kind, text) {
  const li = h('li', { class: kind, text });
  $('chat').append(li);
  $('chat').scrollTop = $('chat').scrollHeight;
  return li;
}

/** Shows a turn's reply: `whole` replaces what is shown, a piece of the stream adds to it. */
function reply(turn, text, whole) {
  if (!replies.has(turn)) replies.set(turn, line('assistant', ''));
  const li = replies.get(turn);
  li.textContent = whole ? text : li.textContent + text;
}

// Audio: one context for the microphone and the answers, made on the first press or send (a
// browser lets a page sound only after a gesture).
let ctx = null;
let outRate = 24000;
let playAt = 0;
const playing = new Set();
let sentSamples = 0;
let playedSamples = 0;

function audioContext() {
  if (!ctx) ctx = new AudioContext();
  if (ctx.state === 'suspended') ctx.resume();
  return ctx;
}

function tally() {
  const sent = Math.round((sentSamples / MIC_RATE) * 1000);
  const played = Math.round((playedSamples / outRate) * 1000);
  const el = $('audio');
  el.dataset.sentMs = String(sent);
  el.dataset.playedMs = String(played);
  el.textContent = `Sent ${(sent / 1000).toFixed(1)} s of speech · played ${(played / 1000).toFixed(1)} s of answers`;
}

/** Schedules a chunk of the answer's PCM right after the previous one. */
function play(buf) {
  if (!ctx) return;
  const pcm = new Int16Array(buf, 0, buf.byteLength >> 1);
  if (!pcm.length) return;
  const b = ctx.createBuffer(1, pcm.length, outRate);
  const ch = b.getChannelData(0);
  for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
  const src = ctx.createBufferSource();
  src.buffer = b;
  src.connect(ctx.destination);
  playAt = Math.max(playAt, ctx.currentTime + 0.05);
  src.start(playAt);
  playAt += b.duration;
  playing.add(src);
  src.onended = () => playing.delete(src);
  playedSamples += pcm.length;
  tally();
}

/** Cuts off the answer being spoken (the visitor talks over it). */
function silence() {
  for (const src of playing) src.stop();
  playing.clear();
  playAt = 0;
}

function onMessage(ev) {
  if (typeof ev.data !== 'string') {
    play(ev.data);
    return;
  }
  const m = JSON.parse(ev.data);
  switch (m.type) {
    case 'avatar_status':
      $('chat-state').textContent = m.status;
      $('chat-state').className = `badge ${m.status}`;
      break;
    case 'transcript': {
      if (m.speaker === 'user') {
        // Typed text is shown as it is sent; spoken text when it is recognised.
        if (heard) {
          heard.textContent = m.text || '(nothing heard)';
          if (m.is_final) heard = null;
        }
        break;
      }
      reply(m.turn_seq, m.text, m.is_final);
      break;
    }
    case 'assistant_message':
      reply(m.turn_seq, m.text, true);
      break;
    case 'audio_start':
      outRate = m.sample_rate || outRate;
      break;
    case 'error':
      line('err', m.message);
      break;
    default:
  }
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
  const ws = new WebSocket(`${proto}//${location.host}/ws/chat/${encodeURIComponent(s.session_id)}`);
  ws.binaryType = 'arraybuffer';
  ws.addEventListener('message', onMessage);
  ws.addEventListener('close', (ev) => {
    $('chat-state').textContent = 'closed';
    if (ev.code !== 1000) showError(`The chat closed: ${ev.reason || 'connection lost'} (${ev.code}). Reload to start again.`);
    socket = null;
  });
  await new Promise((resolve, reject) => {
    ws.addEventListener('open', resolve, { once: true });
    ws.addEventListener('error', () => reject(new Error('Cannot open the chat socket')), { once: true });
  });
  ws.send(JSON.stringify({ type: 'audio_output', enabled: true }));
  socket = ws;
}

async function ready() {
  audioContext();
  if (!socket) await connect();
}

$('say').addEventListener('submit', (ev) => {
  ev.preventDefault();
  guarded(async () => {
    const text = $('text').value.trim();
    if (!text) return;
    await ready();
    socket.send(JSON.stringify({ type: 'text_input', text }));
    line('user', text);
    $('text').value = '';
  });
});

// Push to talk. The microphone is open only while the button is held: each press asks for it
// and each release stops it, so the browser shows it in use only then.
let held = false;
let mic = null;
let worklet = null;

async function press() {
  if (held) return;
  held = true;
  $('talk').setAttribute('aria-pressed', 'true');
  await guarded(async () => {
    if (!navigator.mediaDevices) throw new Error('The microphone needs the console over HTTPS (or on this machine).');
    const c = audioContext();
    await ready();
    if (!worklet) await c.audioWorklet.addModule('/console/mic.js');
    const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } });
    if (!held || !socket) {
      stream.getTracks().forEach((t) => t.stop());
      return;
    }
    if (!worklet) {
      worklet = new AudioWorkletNode(c, 'mic', { numberOfInputs: 1, numberOfOutputs: 0 });
      worklet.port.onmessage = (ev) => {
        if (!socket) return;
        if (ev.data === 'end') {
          socket.send(JSON.stringify({ type: 'audio_end' }));
          return;
        }
        if (ev.data.byteLength) {
          socket.send(ev.data);
          sentSamples += ev.data.byteLength >> 1;
          tally();
        }
      };
    }
    silence();
    socket.send(JSON.stringify({ type: 'audio_start', sample_rate: MIC_RATE, channels: 1, format: 'pcm_s16le' }));
    const source = c.createMediaStreamSource(stream);
    source.connect(worklet);
    mic = { stream, source };
    worklet.port.postMessage('start');
    heard = line('user', '…');
  });
  if (!mic) release();
}

function release() {
  if (!held) return;
  held = false;
  $('talk').setAttribute('aria-pressed', 'false');
  if (!mic) return;
  worklet.port.postMessage('stop');
  mic.source.disconnect();
  mic.stream.getTracks().forEach((t) => t.stop());
  mic = null;
}

const talk = $('talk');
talk.addEventListener('pointerdown', (ev) => {
  if (ev.button !== 0) return;
  talk.setPointerCapture(ev.pointerId);
  press();
});
for (const name of ['pointerup', 'pointercancel', 'lostpointercapture']) talk.addEventListener(name, release);
talk.addEventListener('keydown', (ev) => {
  if (ev.key !== ' ') return;
  ev.preventDefault();
  if (!ev.repeat) press();
});
talk.addEventListener('keyup', (ev) => {
  if (ev.key !== ' ') return;
  ev.preventDefault();
  release();
});
talk.addEventListener('blur', release);
talk.addEventListener('contextmenu', (ev) => ev.preventDefault());
