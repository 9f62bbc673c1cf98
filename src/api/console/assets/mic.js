// The "Try it" microphone, an AudioWorklet: while on, the input is mixed to mono, averaged down
// to 16 kHz (the rate the recogniser is fed, so nothing finer is worth sending) and posted as
// 16-bit PCM in 100 ms chunks. "stop" posts what is left, then "end".
const RATE = 16000;
const CHUNK = RATE / 10;

class Mic extends AudioWorkletProcessor {
  constructor() {
    super();
    this.on = false;
    this.step = sampleRate / RATE;
    this.reset();
    this.port.onmessage = (ev) => {
      if (ev.data === 'start') {
        this.reset();
        this.on = true;
      } else if (ev.data === 'stop') {
        this.on = false;
        this.port.postMessage(this.out.slice(0, this.len).buffer);
        this.port.postMessage('end');
        this.reset();
      }
    };
  }

  reset() {
    this.out = new Int16Array(CHUNK);
    this.len = 0;
    this.pos = 0;
    this.sum = 0;
    this.n = 0;
  }

  process(inputs) {
    const chans = inputs[0];
    if (!this.on || !chans || !chans.length) return true;
    for (let i = 0; i < chans[0].length; i++) {
      let x = 0;
      for (const c of chans) x += c[i];
      this.sum += x / chans.length;
      this.n++;
      if (++this.pos < this.step) continue;
      this.pos -= this.step;
      this.out[this.len++] = Math.max(-1, Math.min(1, this.sum / this.n)) * 32767;
      this.sum = 0;
      this.n = 0;
      if (this.len === CHUNK) {
        this.port.postMessage(this.out.buffer, [this.out.buffer]);
        this.out = new Int16Array(CHUNK);
        this.len = 0;
      }
    }
    return true;
  }
}

registerProcessor('mic', Mic);
