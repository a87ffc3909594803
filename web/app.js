// The chat page: talks to this server only (/v1/models, /props, /v1/chat/completions), keeps
// conversations, settings and the API key in localStorage, and builds every element with
// createElement / textContent (model output is never parsed as HTML; see markdown.js).
import { renderMarkdown } from './markdown.js';

const $ = (id) => document.getElementById(id);
const STORE = { key: 'llamapi.apiKey', convs: 'llamapi.conversations', current: 'llamapi.current',
  settings: 'llamapi.settings', model: 'llamapi.model' };
const SETTINGS = ['system', 'temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed'];

const state = {
  apiKey: localStorage.getItem(STORE.key) || '',
  convs: loadJson(STORE.convs, []),
  currentId: localStorage.getItem(STORE.current) || '',
  settings: loadJson(STORE.settings, {}),
  models: [],
  modalities: new Map(), // model id -> {vision, audio}
  pending: [], // attachments of the message being written
  running: null, // {controller, conv, msg}
  nodes: new WeakMap(), // message -> its element (kept out of the stored JSON)
};

function loadJson(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v ?? fallback;
  } catch {
    return fallback;
  }
}

function saveConvs() {
  localStorage.setItem(STORE.current, state.currentId);
  try {
    localStorage.setItem(STORE.convs, JSON.stringify(state.convs));
  } catch {
    // Over the storage quota (attachments are data URLs): keep the text, drop their bytes.
    const slim = JSON.stringify(state.convs, (k, v) =>
      (k === 'url' || k === 'data') && typeof v === 'string' && v.length > 1024 ? undefined : v);
    try {
      localStorage.setItem(STORE.convs, slim);
      showNotice('Attachments are too large to keep in this browser: conversations are saved without them.');
    } catch (e) {
      showNotice(`Could not save the conversation in this browser: ${e.message}`);
    }
  }
}

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

function showNotice(text) {
  const n = $('notice');
  n.textContent = text;
  n.hidden = !text;
}

// ---- the API key ----

let keyWaiters = [];

function askKey(message) {
  $('key-error').textContent = message || '';
  $('key-error').hidden = !message;
  $('key-dialog').hidden = false;
  $('key-input').value = '';
  $('key-input').focus();
  return new Promise((resolve) => keyWaiters.push(resolve));
}

function submitKey() {
  const key = $('key-input').value.trim();
  if (!key) return;
  state.apiKey = key;
  localStorage.setItem(STORE.key, key);
  $('key-dialog').hidden = true;
  const waiters = keyWaiters;
  keyWaiters = [];
  for (const w of waiters) w();
}

// fetch with the key; a 401 asks for a key (again) and retries.
async function api(path, opts = {}) {
  for (;;) {
    const headers = { ...(opts.headers || {}) };
    if (state.apiKey) headers.Authorization = `Bearer ${state.apiKey}`;
    const res = await fetch(path, { ...opts, headers });
    if (res.status !== 401) return res;
    await askKey(state.apiKey ? 'That key was refused.' : '');
  }
}

async function errorText(res) {
  try {
    const body = await res.json();
    return body?.error?.message || `HTTP ${res.status}`;
  } catch {
    return `HTTP ${res.status}`;
  }
}

// ---- models ----

async function loadModels() {
  let res;
  try {
    res = await api('/v1/models');
  } catch (e) {
    showNotice(`Cannot reach the server: ${e.message}`);
    return;
  }
  if (!res.ok) {
    showNotice(`Listing models failed: ${await errorText(res)}`);
    return;
  }
  const body = await res.json();
  state.models = (body.data || []).filter((m) => !m.model_kind || m.model_kind === 'chat');
  const sel = $('model');
  sel.replaceChildren(...state.models.map((m) => el('option', { value: m.id, text: m.id })));
  if (!state.models.length) {
    showNotice('No chat model is loaded. Start the server with -m MODEL, or load one with llamapi load.');
    return;
  }
  showNotice('');
  const conv = currentConv();
  const wanted = conv?.model || localStorage.getItem(STORE.model);
  if (wanted && state.models.some((m) => m.id === wanted)) sel.value = wanted;
  await onModelChange();
}

// What a model accepts besides text: its /v1/models entry when it says, else /props.
async function modalitiesOf(id) {
  if (state.modalities.has(id)) return state.modalities.get(id);
  const m = state.models.find((x) => x.id === id) || {};
  let mod = null;
  if (m.modalities && typeof m.modalities === 'object') mod = m.modalities;
  else if (Array.isArray(m.capabilities))
    mod = { vision: m.capabilities.includes('vision'), audio: m.capabilities.includes('audio') };
  else if (Array.isArray(m.input_modalities))
    mod = { vision: m.input_modalities.includes('image'), audio: m.input_modalities.includes('audio') };
  if (!mod) {
    try {
      const res = await api(`/props?model=${encodeURIComponent(id)}`);
      if (res.ok) mod = (await res.json()).modalities;
    } catch {
      // unknown: treated as text only
    }
  }
  mod = { vision: !!mod?.vision, audio: !!mod?.audio };
  state.modalities.set(id, mod);
  return mod;
}

async function onModelChange() {
  const id = $('model').value;
  localStorage.setItem(STORE.model, id);
  const m = state.models.find((x) => x.id === id);
  const mod = await modalitiesOf(id);
  const parts = [];
  if (m?.n_ctx) parts.push(`context ${m.n_ctx}`);
  parts.push(mod.vision || mod.audio ? `accepts ${[mod.vision && 'images', mod.audio && 'audio'].filter(Boolean).join(' and ')}` : 'text only');
  if (m?.status && m.status !== 'ready') parts.push(m.status);
  $('model-info').textContent = parts.join(' · ');
  const conv = currentConv();
  if (conv && !conv.messages.length) conv.model = id;
}

// ---- conversations ----

function currentConv() {
  return state.convs.find((c) => c.id === state.currentId) || null;
}

function newConv() {
  const conv = { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
    title: 'New chat', model: $('model').value, messages: [], updated: Date.now() };
  state.convs.unshift(conv);
  state.currentId = conv.id;
  saveConvs();
  return conv;
}

function selectConv(id) {
  if (state.running) return;
  state.currentId = id;
  saveConvs();
  const conv = currentConv();
  if (conv?.model && state.models.some((m) => m.id === conv.model)) {
    $('model').value = conv.model;
    onModelChange();
  }
  render();
}

function deleteConv(id) {
  if (state.running?.conv.id === id) return;
  state.convs = state.convs.filter((c) => c.id !== id);
  if (state.currentId === id) state.currentId = state.convs[0]?.id || '';
  saveConvs();
  render();
}

function renderConvList() {
  const list = $('conversations');
  list.replaceChildren(...state.convs.map((conv) => {
    const li = el('li', { class: conv.id === state.currentId ? 'current' : '' });
    li.dataset.id = conv.id;
    const title = el('button', { class: 'title', type: 'button', text: conv.title, title: conv.title,
      onclick: () => selectConv(conv.id) });
    const rename = el('button', { class: 'small rename', type: 'button', text: 'Rename', onclick: () => {
      const input = el('input', { value: conv.title, 'aria-label': 'Conversation title' });
      const done = (save) => {
        if (save && input.value.trim()) conv.title = input.value.trim().slice(0, 120);
        saveConvs();
        renderConvList();
      };
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') done(true);
        if (e.key === 'Escape') done(false);
      });
      input.addEventListener('blur', () => done(true));
      title.replaceChildren(input);
      input.focus();
      input.select();
    } });
    // Two clicks delete: the first arms the button for three seconds.
    const del = el('button', { class: 'small delete', type: 'button', text: 'Delete', onclick: () => {
      if (del.classList.contains('confirm')) {
        deleteConv(conv.id);
        return;
      }
      del.classList.add('confirm');
      del.textContent = 'Sure?';
      setTimeout(() => {
        del.classList.remove('confirm');
        del.textContent = 'Delete';
      }, 3000);
    } });
    li.append(title, rename, del);
    return li;
  }));
}

// ---- messages ----

function renderContent(target, text) {
  target.replaceChildren(renderMarkdown(document, text, (pre) => {
    const copy = el('button', { class: 'copy', type: 'button', text: 'Copy', onclick: async () => {
      try {
        await navigator.clipboard.writeText(pre.querySelector('code').textContent);
        copy.textContent = 'Copied';
      } catch {
        copy.textContent = 'Copy failed';
      }
    } });
    pre.append(copy);
  }));
}

function statsText(msg) {
  const s = msg.stats;
  if (!s) return '';
  const parts = [];
  if (s.n != null) parts.push(`${s.n} tokens`);
  if (s.tps != null) parts.push(`${s.tps.toFixed(1)} tokens/s`);
  if (s.stopped) parts.push('stopped');
  else if (s.finish && s.finish !== 'stop') parts.push(`finish: ${s.finish}`);
  return parts.join(' · ');
}

function messageNode(msg) {
  const node = el('div', { class: `msg ${msg.role}` }, el('div', { class: 'who', text: msg.role === 'user' ? 'You' : (msg.model || 'Assistant') }));
  if (msg.role === 'user') {
    const body = el('div', { class: 'body', text: msg.content });
    const thumbs = el('div', { class: 'thumbs' });
    for (const a of msg.attachments || []) {
      if (!a.url && !a.data) thumbs.append(el('span', { class: 'chip', text: `${a.name} (not kept)` }));
      else if (a.kind === 'image') thumbs.append(el('img', { src: a.url, alt: a.name }));
      else thumbs.append(el('audio', { src: `data:audio/${a.format};base64,${a.data}`, controls: '' }));
    }
    if (thumbs.childNodes.length) body.append(thumbs);
    node.append(body);
    return node;
  }
  const reasoning = el('details', { class: 'reasoning' }, el('summary', { text: 'Reasoning' }), el('div'));
  const content = el('div', { class: 'content' });
  const error = el('div', { class: 'error' });
  const stats = el('div', { class: 'stats' });
  node.append(reasoning, content, error, stats);
  node.update = () => {
    reasoning.hidden = !msg.reasoning;
    reasoning.querySelector('div').textContent = msg.reasoning || '';
    renderContent(content, msg.content || '');
    error.textContent = msg.error || '';
    error.hidden = !msg.error;
    stats.textContent = statsText(msg);
  };
  node.update();
  return node;
}

function render() {
  renderConvList();
  const conv = currentConv();
  const box = $('messages');
  if (!conv || !conv.messages.length) {
    box.replaceChildren(el('p', { class: 'empty', text: 'Pick a model and send a message.' }));
    return;
  }
  box.replaceChildren(...conv.messages.map((m) => {
    const n = messageNode(m);
    state.nodes.set(m, n);
    return n;
  }));
  box.scrollTop = box.scrollHeight;
}

// ---- attachments ----

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

const AUDIO_FORMATS = { 'audio/wav': 'wav', 'audio/x-wav': 'wav', 'audio/wave': 'wav', 'audio/mpeg': 'mp3', 'audio/mp3': 'mp3' };

async function addFiles(files) {
  const id = $('model').value;
  const mod = await modalitiesOf(id);
  for (const f of files) {
    const isImage = f.type.startsWith('image/');
    const isAudio = f.type.startsWith('audio/');
    if (!isImage && !isAudio) {
      showNotice(`${f.name}: only images and audio can be attached.`);
      continue;
    }
    if (isImage && !mod.vision) {
      showNotice(`The model ${id} is text-only: it cannot read images (${f.name} was not attached).`);
      continue;
    }
    if (isAudio && !mod.audio) {
      showNotice(`The model ${id} does not accept audio (${f.name} was not attached).`);
      continue;
    }
    if (isAudio && !AUDIO_FORMATS[f.type]) {
      showNotice(`${f.name}: audio must be WAV or MP3.`);
      continue;
    }
    const url = await readAsDataUrl(f);
    if (isImage) state.pending.push({ kind: 'image', name: f.name, url });
    else state.pending.push({ kind: 'audio', name: f.name, format: AUDIO_FORMATS[f.type], data: url.slice(url.indexOf(',') + 1) });
    showNotice('');
  }
  renderPending();
}

function renderPending() {
  $('attachments').replaceChildren(...state.pending.map((a, i) => el('span', { class: 'chip' },
    a.kind === 'image' ? el('img', { src: a.url, alt: '' }) : null,
    a.name,
    el('button', { type: 'button', text: '×', title: 'Remove', onclick: () => {
      state.pending.splice(i, 1);
      renderPending();
    } }))));
}

// ---- sending ----

function requestMessages(conv) {
  const out = [];
  if (state.settings.system) out.push({ role: 'system', content: state.settings.system });
  for (const m of conv.messages) {
    if (m.role === 'assistant') {
      if (m.content) out.push({ role: 'assistant', content: m.content });
      continue;
    }
    if (!m.attachments?.length) {
      out.push({ role: 'user', content: m.content });
      continue;
    }
    const parts = [];
    if (m.content) parts.push({ type: 'text', text: m.content });
    for (const a of m.attachments) {
      if (!a.url && !a.data) continue; // not kept (storage quota)
      if (a.kind === 'image') parts.push({ type: 'image_url', image_url: { url: a.url } });
      else parts.push({ type: 'input_audio', input_audio: { data: a.data, format: a.format } });
    }
    out.push({ role: 'user', content: parts.length ? parts : m.content });
  }
  return out;
}

function samplingParams() {
  const p = {};
  for (const k of SETTINGS) {
    if (k === 'system') continue;
    const v = state.settings[k];
    if (v === '' || v == null || Number.isNaN(Number(v))) continue;
    p[k] = ['top_k', 'max_tokens', 'seed'].includes(k) ? Math.trunc(Number(v)) : Number(v);
  }
  return p;
}

function setRunning(r) {
  state.running = r;
  const b = $('send');
  b.textContent = r ? 'Stop' : 'Send';
  b.classList.toggle('stop', !!r);
}

async function send() {
  if (state.running) {
    state.running.controller.abort();
    return;
  }
  const text = $('input').value.trim();
  if (!text && !state.pending.length) return;
  const model = $('model').value;
  if (!model) {
    showNotice('No model to talk to.');
    return;
  }
  let conv = currentConv();
  if (!conv) conv = newConv();
  conv.model = model;
  conv.messages.push({ role: 'user', content: text, attachments: state.pending });
  if (conv.title === 'New chat') conv.title = (text || state.pending[0].name).slice(0, 60);
  const msg = { role: 'assistant', model, content: '', reasoning: '' };
  conv.messages.push(msg);
  conv.updated = Date.now();
  state.pending = [];
  renderPending();
  $('input').value = '';
  showNotice('');
  saveConvs();
  render();
  const controller = new AbortController();
  setRunning({ controller, conv, msg });
  try {
    await stream(conv, msg, controller);
  } catch (e) {
    if (e.name === 'AbortError') msg.stats = { ...(msg.stats || {}), stopped: true };
    else msg.error = `The request failed: ${e.message}`;
  }
  setRunning(null);
  // The last user message's attachments stay in the conversation for later turns.
  conv.updated = Date.now();
  saveConvs();
  state.nodes.get(msg)?.update();
}

async function stream(conv, msg, controller) {
  // The empty assistant message being filled is left out by requestMessages.
  const body = { model: msg.model, messages: requestMessages(conv), stream: true,
    stream_options: { include_usage: true }, ...samplingParams() };
  const res = await api('/v1/chat/completions', { method: 'POST', signal: controller.signal,
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) {
    msg.error = await errorText(res);
    return;
  }
  let firstAt = 0;
  let nChunks = 0;
  let pendingFrame = false;
  const repaint = () => {
    if (pendingFrame) return;
    pendingFrame = true;
    requestAnimationFrame(() => {
      pendingFrame = false;
      state.nodes.get(msg)?.update();
      const box = $('messages');
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
    });
  };
  const onEvent = (event, data) => {
    if (data === '[DONE]') return;
    let j;
    try {
      j = JSON.parse(data);
    } catch {
      return;
    }
    if (event === 'error' || j.error) {
      msg.error = j.error?.message || 'The server ended the answer with an error.';
      return;
    }
    const choice = j.choices?.[0];
    const delta = choice?.delta || {};
    if (delta.content || delta.reasoning_content) {
      if (!firstAt) firstAt = performance.now();
      nChunks++;
    }
    if (delta.content) msg.content += delta.content;
    if (delta.reasoning_content) msg.reasoning += delta.reasoning_content;
    if (choice?.finish_reason) msg.stats = { ...(msg.stats || {}), finish: choice.finish_reason };
    if (j.timings?.predicted_per_second != null)
      msg.stats = { ...(msg.stats || {}), n: j.timings.predicted_n, tps: j.timings.predicted_per_second };
    else if (j.usage && msg.stats?.tps == null)
      msg.stats = { ...(msg.stats || {}), n: j.usage.completion_tokens };
    repaint();
  };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
        let event = 'message';
        const data = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (data.length) onEvent(event, data.join('\n'));
      }
    }
  } finally {
    // Without server timings (a stopped answer), the client's own count: one chunk per token.
    if (msg.stats?.tps == null && firstAt && nChunks > 1) {
      const secs = (performance.now() - firstAt) / 1000;
      msg.stats = { ...(msg.stats || {}), n: nChunks, tps: secs > 0 ? (nChunks - 1) / secs : null };
    }
  }
}

// ---- settings ----

function initSettings() {
  for (const k of SETTINGS) {
    const input = $(`set-${k}`);
    input.value = state.settings[k] ?? '';
    input.addEventListener('input', () => {
      state.settings[k] = input.value;
      localStorage.setItem(STORE.settings, JSON.stringify(state.settings));
    });
  }
  $('forget-key').addEventListener('click', () => {
    state.apiKey = '';
    localStorage.removeItem(STORE.key);
  });
}

// ---- start ----

function init() {
  $('send').addEventListener('click', send);
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('new-chat').addEventListener('click', () => {
    if (state.running) return;
    const conv = currentConv();
    if (!conv || conv.messages.length) newConv();
    render();
    $('input').focus();
  });
  $('model').addEventListener('change', onModelChange);
  $('attach').addEventListener('click', () => $('file').click());
  $('file').addEventListener('change', async () => {
    await addFiles([...$('file').files]);
    $('file').value = '';
  });
  $('key-save').addEventListener('click', submitKey);
  $('key-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') submitKey();
  });
  initSettings();
  render();
  loadModels();
}

init();
