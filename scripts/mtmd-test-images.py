import zlib, struct, sys
def png(path, w, h, fn):
    raw = b''.join(b'\x00' + bytes(sum((list(fn(x, y)) for x in range(w)), [])) for y in range(h))
    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    open(path, 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
png('a.png', 32, 32, lambda x, y: (x * 8, y * 8, 128))
png('b.png', 32, 32, lambda x, y: (255, 255, 255) if (x // 4 + y // 4) % 2 else (0, 0, 40))
png('c.png', 48, 20, lambda x, y: (x * 5 % 256, 200 - y * 7, (x * y) % 256))
