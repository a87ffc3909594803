// Copies a GGUF file with tokenizer.chat_template set to a test-only template (GGUF v3 layout:
// header, key/values, tensor infos, aligned data; the data bytes are copied unchanged since
// tensor offsets are relative to the data section).
import { readFileSync, writeFileSync } from 'node:fs';

const SCALAR_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const TYPE_STRING = 8, TYPE_ARRAY = 9, TYPE_U32 = 4;

function skipValue(buf, pos, type) {
  if (type === TYPE_STRING) return pos + 8 + Number(buf.readBigUInt64LE(pos));
  if (type === TYPE_ARRAY) {
    const elem = buf.readUInt32LE(pos);
    const n = Number(buf.readBigUInt64LE(pos + 4));
    pos += 12;
    if (elem in SCALAR_SIZE) return pos + n * SCALAR_SIZE[elem];
    for (let i = 0; i < n; i++) pos = skipValue(buf, pos, elem);
    return pos;
  }
  if (!(type in SCALAR_SIZE)) throw new Error(`unknown GGUF type ${type}`);
  return pos + SCALAR_SIZE[type];
}

function ggufString(s) {
  const bytes = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(bytes.length));
  return Buffer.concat([len, bytes]);
}

export function withChatTemplate(src, template, out) {
  const buf = readFileSync(src);
  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${src}: not a GGUF file`);
  const nTensors = buf.readBigUInt64LE(8);
  const nKv = Number(buf.readBigUInt64LE(16));
  let pos = 24, alignment = 32;
  const kept = [];
  for (let i = 0; i < nKv; i++) {
    const start = pos;
    const keyLen = Number(buf.readBigUInt64LE(pos));
    const key = buf.toString('utf8', pos + 8, pos + 8 + keyLen);
    pos += 8 + keyLen;
    const type = buf.readUInt32LE(pos);
    pos += 4;
    if (key === 'general.alignment' && type === TYPE_U32) alignment = buf.readUInt32LE(pos);
    pos = skipValue(buf, pos, type);
    if (key !== 'tokenizer.chat_template') kept.push(buf.subarray(start, pos));
  }
  const infoStart = pos;
  for (let i = 0n; i < nTensors; i++) {
    pos += 8 + Number(buf.readBigUInt64LE(pos)); // name
    const nDims = buf.readUInt32LE(pos);
    pos += 4 + 8 * nDims + 4 + 8; // dims, type, offset
  }
  const infos = buf.subarray(infoStart, pos);
  const dataStart = Math.ceil(pos / alignment) * alignment;
  const type = Buffer.alloc(4);
  type.writeUInt32LE(TYPE_STRING);
  const kv = Buffer.concat([ggufString('tokenizer.chat_template'), type, ggufString(template)]);
  const head = Buffer.alloc(24);
  buf.copy(head, 0, 0, 16);
  head.writeBigUInt64LE(BigInt(kept.length + 1), 16);
  const meta = Buffer.concat([head, ...kept, kv, infos]);
  const pad = Buffer.alloc((alignment - (meta.length % alignment)) % alignment);
  writeFileSync(out, Buffer.concat([meta, pad, buf.subarray(dataStart)]));
  return out;
}
