// A Hugging Face-compatible hub on loopback, as the hub client sees it: the tree listing
// (/api/models/{org}/{name}/tree/main), file downloads (/{org}/{name}/resolve/main/{path})
// answered with a 302 to a content URL carrying X-Linked-Etag/X-Linked-Size/x-repo-commit
// (as the real hub redirects LFS files to its CDN), and the content URL with ETag, Range and
// 206. Faults on demand: a connection cut after a fraction of a file, a listing whose oid does
// not match the bytes, private repositories that want a bearer token.
import { createHash } from 'node:crypto';
import http from 'node:http';

export const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');
const COMMIT = 'a'.repeat(40);

// repos: { 'org/name': { files: { path: Buffer }, token?: string, wrongSha?: [path],
//          cutAt?: { path: fraction } (the first download of path is cut there),
//          listedSize?: { path: bytes } (the size the listing claims),
//          noLfs?: [path] (listed without lfs: the client has X-Linked-Etag only),
//          pageSize?: n (listing entries per page, the rest behind Link: rel="next"),
//          slowMs?: ms (file bodies sent in 10 pieces, ms apart, for progress reports) } }
export async function startHub(repos) {
  const log = []; // { method, url, range, auth }
  const cut = new Set();
  const server = http.createServer((req, res) => {
    log.push({ method: req.method, url: req.url, range: req.headers.range ?? null,
      auth: req.headers.authorization ?? null });
    const url = new URL(req.url, 'http://hub');
    const parts = url.pathname.split('/').map(decodeURIComponent);
    const deny = (repo) => {
      if (!repo.token || req.headers.authorization === `Bearer ${repo.token}`) return false;
      res.writeHead(req.headers.authorization ? 403 : 401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: req.headers.authorization ? 'Access denied' : 'Invalid credentials' }));
      return true;
    };
    // As the public hub: a missing repository is 401 RepoNotFound to a request without a token
    // (private ones must not be told apart), 404 to one with a token; a missing file 404.
    const notFound = (what) => {
      const repoMissing = what === 'Repository';
      const status = repoMissing && !req.headers.authorization ? 401 : 404;
      res.writeHead(status, { 'content-type': 'application/json',
        'x-error-code': repoMissing ? 'RepoNotFound' : 'EntryNotFound' });
      res.end(JSON.stringify({ error: `${what} not found` }));
    };
    // /api/models/{org}/{name}/tree/main
    if (parts[1] === 'api' && parts[2] === 'models' && parts[5] === 'tree' && parts[6] === 'main') {
      const name = `${parts[3]}/${parts[4]}`;
      const repo = repos[name];
      if (!repo) return notFound('Repository');
      if (deny(repo)) return undefined;
      const items = [];
      const dirs = new Set();
      for (const [path, buf] of Object.entries(repo.files)) {
        const segs = path.split('/');
        for (let i = 1; i < segs.length; i++) dirs.add(segs.slice(0, i).join('/'));
        const oid = (repo.wrongSha ?? []).includes(path) ? sha256(Buffer.from('other')) : sha256(buf);
        const size = repo.listedSize?.[path] ?? buf.length;
        const item = { type: 'file', oid: createHash('sha1').update(buf).digest('hex'), size, path };
        if (!(repo.noLfs ?? []).includes(path)) item.lfs = { oid, size, pointerSize: 134 };
        items.push(item);
      }
      for (const d of dirs) items.push({ type: 'directory', oid: 'b'.repeat(40), size: 0, path: d });
      for (const extra of repo.extraListing ?? []) items.push(extra);
      const headers = { 'content-type': 'application/json', 'x-repo-commit': COMMIT };
      const from = Number(url.searchParams.get('cursor') ?? 0);
      const size = repo.pageSize ?? items.length;
      if (from + size < items.length) { // as the hub pages long listings: Link rel="next"
        headers.link = `<http://${req.headers.host}/api/models/${name}/tree/main?recursive=true` +
          `&cursor=${from + size}>; rel="next"`;
      }
      res.writeHead(200, headers);
      return res.end(JSON.stringify(items.slice(from, from + size)));
    }
    // /{org}/{name}/resolve/main/{path…} → 302 to /cdn/{org}/{name}/{path…}
    if (parts[3] === 'resolve' && parts[4] === 'main') {
      const name = `${parts[1]}/${parts[2]}`;
      const repo = repos[name];
      if (!repo) return notFound('Repository');
      if (deny(repo)) return undefined;
      const path = parts.slice(5).join('/');
      const buf = repo.files[path];
      if (!buf) return notFound('Entry');
      res.writeHead(302, { location: `/cdn/${name}/${encodeURI(path)}`, 'x-repo-commit': COMMIT,
        'x-linked-etag': `"${(repo.wrongSha ?? []).includes(path) ? sha256(Buffer.from('other')) : sha256(buf)}"`, 'x-linked-size': String(buf.length), etag: '"redirect"' });
      return res.end();
    }
    if (parts[1] === 'cdn') {
      const name = `${parts[2]}/${parts[3]}`;
      const path = parts.slice(4).join('/');
      const buf = repos[name]?.files[path];
      if (!buf) return notFound('Blob');
      const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      const start = m ? Number(m[1]) : 0;
      if (start >= buf.length && buf.length > 0) {
        res.writeHead(416, { 'content-range': `bytes */${buf.length}` });
        return res.end();
      }
      const body = buf.subarray(start);
      const headers = { etag: `"${sha256(buf)}"`, 'accept-ranges': 'bytes',
        'content-length': String(body.length), 'content-type': 'application/octet-stream' };
      if (m) headers['content-range'] = `bytes ${start}-${buf.length - 1}/${buf.length}`;
      res.writeHead(m ? 206 : 200, headers);
      const fraction = repos[name].cutAt?.[path];
      const key = `${name}/${path}`;
      if (fraction !== undefined && !cut.has(key)) {
        cut.add(key);
        const upto = Math.floor(buf.length * fraction) - start;
        res.write(body.subarray(0, Math.max(upto, 0)), () => setTimeout(() => res.socket.destroy(), 50));
        return undefined;
      }
      if (repos[name].slowMs) {
        const piece = Math.ceil(body.length / 10);
        const send = (i) => {
          if (res.destroyed) return;
          if (i * piece >= body.length) { res.end(); return; }
          res.write(body.subarray(i * piece, (i + 1) * piece));
          setTimeout(() => send(i + 1), repos[name].slowMs);
        };
        send(0);
        return undefined;
      }
      return res.end(body);
    }
    return notFound('Route');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
