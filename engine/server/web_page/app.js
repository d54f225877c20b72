// Sottovoce's web page: the microphone over the server's WebSocket protocol (docs/protocol.md),
// live partials and finals, the latency of each final, the transcript as TXT/SRT/VTT, and files
// through the OpenAI-compatible transcription endpoint.
"use strict";
const $ = (id) => document.getElementById(id);
const RATE = 16000;
const finals = [];          // {text, start, end} in seconds
let session = null;         // the recording in progress

function status(text) { $("status").textContent = text; }
function keyHeaders() {
  const key = $("key").value.trim();
  return key ? { Authorization: "Bearer " + key } : {};
}

function showFinal(text, start, end) {
  if (!text.trim()) return;
  finals.push({ text: text.trim(), start, end });
  const item = document.createElement("li");
  item.textContent = text.trim();
  $("transcript").appendChild(item);
}

async function start() {
  const stream = await navigator.mediaDevices.getUserMedia(
    { audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } });
  const context = new AudioContext();
  await context.audioWorklet.addModule("web/capture.js");
  const source = context.createMediaStreamSource(stream);
  const node = new AudioWorkletNode(context, "capture");
  const silent = context.createGain();
  silent.gain.value = 0;  // the graph must reach the destination to run; nothing is heard
  source.connect(node).connect(silent).connect(context.destination);
  // The socket opens once the microphone runs, with its handlers set before it can open.
  const key = $("key").value.trim();
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/";
  const ws = new WebSocket(url, key ? ["bearer", key] : []);
  ws.binaryType = "arraybuffer";
  session = { ws, stream, context, node, sent: 0, sentAt: new Map(), ready: false };
  const s = session;
  node.port.onmessage = (event) => {
    if (!s.ready || ws.readyState !== WebSocket.OPEN) return;
    const block = event.data, pcm = new Int16Array(block.length);
    for (let i = 0; i < block.length; i++) {
      pcm[i] = Math.max(-32768, Math.min(32767, Math.round(block[i] * 32768)));
    }
    ws.send(pcm.buffer);
    s.sent += block.length;
    s.sentAt.set(s.sent, performance.now());
  };
  ws.onopen = () => {
    const language = $("language").value || null;
    ws.send(JSON.stringify({ type: "hello", v: 1, protocol: 1,
      session_id: "web-" + Math.random().toString(36).slice(2), sample_rate: RATE,
      language, prompt: null, offset: 0, options: {} }));
  };
  ws.onmessage = (event) => onMessage(s, JSON.parse(event.data));
  ws.onclose = (event) => {
    if (event.code !== 1000 && event.code !== 1005) status("Closed: " + (event.reason || event.code));
    else if (session === s || session === null) status("Stopped");
    release(s);
  };
  ws.onerror = () => status("Could not reach the server");
  $("record").textContent = "Stop";
  $("record").classList.add("recording");
  status("Connecting…");
}

function onMessage(s, message) {
  if (message.type === "ready") { s.ready = true; status("Listening"); }
  else if (message.type === "partial") {
    $("committed").textContent = message.committed;
    $("tentative").textContent = message.tentative;
  } else if (message.type === "final") {
    $("committed").textContent = ""; $("tentative").textContent = "";
    showFinal(message.text, message.start / RATE, message.end / RATE);
    latency(s, message);
  } else if (message.type === "error") status("Server: " + message.message);
}

function latency(s, message) {
  // The round trip on this page's clock: from sending the sample the decode started with
  // (trigger) to this message; the server says how much of it was its own.
  let sentAt = null;
  for (const [upto, at] of s.sentAt) {
    if (upto >= message.trigger) { sentAt = at; break; }
    s.sentAt.delete(upto);
  }
  if (sentAt === null) return;
  const total = performance.now() - sentAt, server = message.server_ms || 0;
  $("latency").textContent = `latency: ${Math.round(total)} ms (server ${Math.round(server)} ms, ` +
    `network ${Math.max(0, Math.round(total - server))} ms; decode ${Math.round(message.decode_ms || 0)} ms)`;
}

function stop() {
  const s = session;
  if (!s) return;
  session = null;
  s.stream.getTracks().forEach((t) => t.stop());
  if (s.ws.readyState === WebSocket.OPEN) { s.ws.send(JSON.stringify({ type: "end", v: 1 })); status("Finishing…"); }
  $("record").textContent = "Record";
  $("record").classList.remove("recording");
}

function release(s) {
  s.stream.getTracks().forEach((t) => t.stop());
  s.context.close().catch(() => {});
  if (session === s) { session = null; $("record").textContent = "Record"; $("record").classList.remove("recording"); }
}

function stamp(seconds, mark) {
  const ms = Math.round(seconds * 1000), h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60;
  const sec = Math.floor(ms / 1000) % 60, rest = ms % 1000, two = (n) => String(n).padStart(2, "0");
  return `${two(h)}:${two(m)}:${two(sec)}${mark}${String(rest).padStart(3, "0")}`;
}

function document_(format) {
  if (format === "txt") return finals.map((f) => f.text).join("\n") + "\n";
  const cues = finals.map((f, i) => (format === "srt" ? `${i + 1}\n` : "") +
    `${stamp(f.start, format === "srt" ? "," : ".")} --> ${stamp(f.end, format === "srt" ? "," : ".")}\n${f.text}\n`);
  return (format === "vtt" ? "WEBVTT\n\n" : "") + cues.join("\n");
}

function download(format) {
  const blob = new Blob([document_(format)], { type: "text/plain" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = "transcript." + format;
  link.click();
  URL.revokeObjectURL(link.href);
}

function transcribeFile(file) {
  // Upload with progress, then the text as the server decodes it (server-sent events).
  const form = new FormData();
  form.append("file", file);
  form.append("model", "whisper-1");
  form.append("stream", "true");
  const xhr = new XMLHttpRequest();
  xhr.open("POST", "/v1/audio/transcriptions");
  for (const [name, value] of Object.entries(keyHeaders())) xhr.setRequestHeader(name, value);
  const bar = $("progress");
  bar.hidden = false; bar.value = 0;
  $("file-status").textContent = "Uploading " + file.name + "…";
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = (50 * e.loaded) / e.total; };
  let read = 0, text = "";
  const duration = file.duration || null;
  xhr.onprogress = () => {
    const chunk = xhr.responseText.slice(read);
    const end = chunk.lastIndexOf("\n\n");
    if (end < 0) return;
    read += end + 2;
    for (const line of chunk.slice(0, end).split("\n")) {
      if (!line.startsWith("data: ")) continue;
      const event = JSON.parse(line.slice(6));
      if (event.type === "transcript.text.delta") {
        text += event.delta;
        bar.value = Math.min(99, bar.value + 5);
        $("file-status").textContent = "Transcribing " + file.name + ": " + text.trim();
      } else if (event.type === "transcript.text.done") {
        bar.value = 100;
        $("file-status").textContent = file.name + ": done";
        showFinal(event.text, 0, event.usage ? event.usage.seconds : 0);
      } else if (event.type === "error") {
        $("file-status").textContent = file.name + ": " + event.error.message;
      }
    }
  };
  xhr.onload = () => {
    if (xhr.status !== 200) {
      let message = xhr.statusText;
      try { message = JSON.parse(xhr.responseText).error.message; } catch (e) { /* not JSON */ }
      $("file-status").textContent = file.name + ": " + message;
      bar.hidden = true;
    }
  };
  xhr.onerror = () => { $("file-status").textContent = "Could not reach the server"; };
  xhr.send(form);
}

$("record").onclick = () => (session ? stop() : start().catch((e) => status("Microphone: " + e.message)));
$("copy").onclick = () => navigator.clipboard.writeText(document_("txt")).then(() => status("Copied"));
for (const format of ["txt", "srt", "vtt"]) $(format).onclick = () => download(format);
$("clear").onclick = () => { finals.length = 0; $("transcript").textContent = ""; };
$("file").onchange = (e) => { if (e.target.files[0]) transcribeFile(e.target.files[0]); };
const drop = $("drop");
drop.ondragover = (e) => { e.preventDefault(); drop.classList.add("over"); };
drop.ondragleave = () => drop.classList.remove("over");
drop.ondrop = (e) => { e.preventDefault(); drop.classList.remove("over"); if (e.dataTransfer.files[0]) transcribeFile(e.dataTransfer.files[0]); };
