# Test images for the Qwen2.5-VL projector goldens (run in tests/data/mtmd/ by
# scripts/gen-mtmd-goldens.sh): a 224x224 square (four 112-pixel attention windows at patch 14)
# a 196x140 one taken as it is (partial windows) and a 200x150 one the preprocessor fits into
# 196x140, and a large 840x616 one for chat (fed to the decoder over two batches).
import zlib, struct
def png(path, w, h, fn):
    raw = b''.join(b'\x00' + bytes(sum((list(fn(x, y)) for x in range(w)), [])) for y in range(h))
    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    open(path, 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
png('qa.png', 224, 224, lambda x, y: (x, y, (x * y) // 200 % 256))
def tiles(x, y): return (255, 240, 20) if (x // 25 + y // 25) % 2 else ((x * 3) % 256, 30, 255 - y)
png('qb.png', 200, 150, tiles)
png('qz.png', 196, 140, tiles)
# a large one for image chat: 840x616 is a 30x22 grid, 660 positions, more than one batch
png('qc.png', 840, 616, lambda x, y: (x * 255 // 839, y * 255 // 615, 200 if (x // 56 + y // 44) % 2 else 40))
