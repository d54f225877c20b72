// AudioWorklet: the microphone's samples, resampled to 16 kHz mono, posted in 512-sample blocks.
class Capture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / 16000;  // input samples per output sample
    this.at = 0;                     // next output's position in the current input block
    this.prev = 0;                   // the previous block's last sample (position -1)
    this.block = new Float32Array(512);
    this.filled = 0;
  }
  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (!input) return true;
    const n = input.length;
    // Linear interpolation is enough for speech going into Whisper (16 kHz, its own filter).
    while (this.at <= n - 1) {
      const i = Math.floor(this.at), f = this.at - i;
      const a = i < 0 ? this.prev : input[i];
      const b = i + 1 < n ? input[i + 1] : a;
      this.block[this.filled++] = a * (1 - f) + b * f;
      if (this.filled === this.block.length) {
        this.port.postMessage(this.block.slice(0));
        this.filled = 0;
      }
      this.at += this.step;
    }
    this.at -= n;
    this.prev = input[n - 1];
    return true;
  }
}
registerProcessor("capture", Capture);
