// A small Markdown renderer for the chat page. Two steps, so neither can inject markup:
// parseMarkdown() turns text into a tree of plain objects (block and inline nodes, text kept
// as text), and renderMarkdown() builds DOM nodes from that tree with createElement and
// textContent only (no HTML is ever parsed). Links keep only http:, https: and mailto: targets.
// Supported: paragraphs, line breaks, # headings, fenced code blocks (``` or ~~~, an
// unterminated fence runs to the end, as while an answer streams), indented code, - * + and
// 1. lists, > quotes, --- rules, **strong**, *em* / _em_, `code`, ~~strike~~, [text](url),
// and bare http(s) URLs.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+.#-]*)[^\n]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^( {0,3})([-*+])\s+(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;

export function safeUrl(url) {
  try {
    const u = new URL(url);
    return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
  } catch {
    return null;
  }
}

// Inline spans of one block's text: an array of strings and {t, c} nodes.
export function parseInline(text) {
  const out = [];
  let plain = '';
  const flush = () => {
    if (plain) out.push(plain);
    plain = '';
  };
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    let m;
    if (rest[0] === '\\' && /^\\[\\`*_{}[\]()#+\-.!~>]/.test(rest)) {
      plain += rest[1];
      i += 2;
    } else if ((m = /^(`+)([\s\S]*?[^`])\1(?!`)/.exec(rest))) {
      flush();
      out.push({ t: 'code', text: m[2].replace(/^ (.*) $/, '$1') });
      i += m[0].length;
    } else if ((m = /^\*\*(?=\S)([\s\S]*?\S)\*\*/.exec(rest)) || (m = /^__(?=\S)([\s\S]*?\S)__/.exec(rest))) {
      flush();
      out.push({ t: 'strong', c: parseInline(m[1]) });
      i += m[0].length;
    } else if ((m = /^~~(?=\S)([\s\S]*?\S)~~/.exec(rest))) {
      flush();
      out.push({ t: 'del', c: parseInline(m[1]) });
      i += m[0].length;
    } else if ((m = /^\*(?=[^\s*])([\s\S]*?[^\s*])\*/.exec(rest)) ||
               (/\W|^$/.test(text[i - 1] ?? '') && (m = /^_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/.exec(rest)))) {
      flush();
      out.push({ t: 'em', c: parseInline(m[1]) });
      i += m[0].length;
    } else if ((m = /^\[([^\]\n]*)\]\(\s*<?([^\s)>]*)>?\s*\)/.exec(rest))) {
      flush();
      const href = safeUrl(m[2]);
      out.push(href ? { t: 'a', href, c: parseInline(m[1]) } : m[0]);
      i += m[0].length;
    } else if (/\W|^$/.test(text[i - 1] ?? '') && (m = /^https?:\/\/[^\s<>"'`]+[^\s<>"'`.,;:!?)\]]/.exec(rest))) {
      flush();
      const href = safeUrl(m[0]);
      out.push(href ? { t: 'a', href, c: [m[0]] } : m[0]);
      i += m[0].length;
    } else if (rest[0] === '\n') {
      flush();
      out.push({ t: 'br' });
      i += 1;
    } else {
      plain += rest[0];
      i += 1;
    }
  }
  flush();
  return out;
}

function isBlockStart(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) ||
    ORDERED.test(line) || QUOTE.test(line);
}

// Block nodes of a whole text.
export function parseMarkdown(text) {
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[i]))
        body.push(lines[i++]);
      i++; // the closing fence (or past the end)
      blocks.push({ t: 'pre', lang: m[2], text: body.join('\n') });
    } else if ((m = HEADING.exec(line))) {
      blocks.push({ t: 'h', level: m[1].length, c: parseInline(m[2]) });
      i++;
    } else if (RULE.test(line)) {
      blocks.push({ t: 'hr' });
      i++;
    } else if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || !lines[i].trim())) body.push(lines[i++]);
      while (body.length && !body[body.length - 1].trim()) body.pop();
      blocks.push({ t: 'pre', lang: '', text: body.map((l) => l.replace(/^( {4}|\t)/, '')).join('\n') });
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        body.push(m[1]);
        i++;
      }
      blocks.push({ t: 'quote', c: parseMarkdown(body.join('\n')) });
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      const ordered = !BULLET.test(line);
      const re = ordered ? ORDERED : BULLET;
      const start = ordered ? Number(ORDERED.exec(line)[2]) : 1;
      const items = [];
      while (i < lines.length && (m = re.exec(lines[i]))) {
        const item = [m[3]];
        i++;
        // Continuation lines: indented, not a new item of this list.
        while (i < lines.length && lines[i].trim() && /^\s{2,}/.test(lines[i]) && !re.test(lines[i]))
          item.push(lines[i++].trim());
        items.push(parseInline(item.join('\n')));
      }
      blocks.push({ t: ordered ? 'ol' : 'ul', start, items });
    } else {
      const body = [];
      while (i < lines.length && lines[i].trim() && (body.length === 0 || !isBlockStart(lines[i])))
        body.push(lines[i++]);
      blocks.push({ t: 'p', c: parseInline(body.join('\n')) });
    }
  }
  return blocks;
}

const INLINE_TAGS = { strong: 'strong', em: 'em', del: 'del', code: 'code', a: 'a', br: 'br' };

function renderInline(doc, parent, nodes) {
  for (const n of nodes) {
    if (typeof n === 'string') {
      parent.appendChild(doc.createTextNode(n));
      continue;
    }
    const el = doc.createElement(INLINE_TAGS[n.t]);
    if (n.t === 'code') el.textContent = n.text;
    if (n.t === 'a') {
      el.setAttribute('href', n.href);
      el.setAttribute('target', '_blank');
      el.setAttribute('rel', 'noopener noreferrer');
    }
    if (n.c) renderInline(doc, el, n.c);
    parent.appendChild(el);
  }
}

function renderBlocks(doc, parent, blocks, onCode) {
  for (const b of blocks) {
    let el;
    if (b.t === 'p') {
      el = doc.createElement('p');
      renderInline(doc, el, b.c);
    } else if (b.t === 'h') {
      el = doc.createElement(`h${Math.min(6, Math.max(1, b.level))}`);
      renderInline(doc, el, b.c);
    } else if (b.t === 'hr') {
      el = doc.createElement('hr');
    } else if (b.t === 'pre') {
      el = doc.createElement('pre');
      const code = doc.createElement('code');
      if (b.lang) code.dataset.lang = b.lang;
      code.textContent = b.text;
      el.appendChild(code);
      if (onCode) onCode(el, b);
    } else if (b.t === 'quote') {
      el = doc.createElement('blockquote');
      renderBlocks(doc, el, b.c, onCode);
    } else if (b.t === 'ul' || b.t === 'ol') {
      el = doc.createElement(b.t);
      if (b.t === 'ol' && b.start !== 1) el.setAttribute('start', String(b.start));
      for (const item of b.items) {
        const li = doc.createElement('li');
        renderInline(doc, li, item);
        el.appendChild(li);
      }
    } else {
      continue;
    }
    parent.appendChild(el);
  }
}

// A DocumentFragment for text. onCode(preElement, block) may decorate code blocks.
export function renderMarkdown(doc, text, onCode) {
  const frag = doc.createDocumentFragment();
  renderBlocks(doc, frag, parseMarkdown(text), onCode);
  return frag;
}
