"""cleave_pattern.py - the byte pattern cleave-tcp sends, for Python peers.

The pattern (cleave-tcp --help says the same) is the byte stream of xorshift64*, in 64-bit
unsigned arithmetic:
    x = seed, or 0x9E3779B97F4A7C15 if seed is 0
    for each 8 bytes: x ^= x >> 12; x ^= x << 25; x ^= x >> 27
                      emit (x * 0x2545F4914F6CDD1D mod 2^64) as 8 bytes, little-endian
and n bytes of it are the stream's first n bytes.

pattern(seed, n) yields those bytes in chunks. A word at a time Python makes about 13 MB/s,
too slow for the 1 GiB runs, so whole chunks are made in lanes: the chunk is cut into 256
segments, each segment's first state is found by jumping ahead (xorshift is linear over GF(2),
so k steps are one 64x64 bit matrix), and all segments then step together as 64-bit lanes of
one big integer, 128 bits apart so that shifts and the multiplication never cross lanes.
reference(seed, n) is the plain loop, and `python3 cleave_pattern.py CLEAVE_TCP` checks both
against `cleave-tcp --pattern`.
"""

import array
import subprocess
import sys

MASK = (1 << 64) - 1
MULT = 0x2545F4914F6CDD1D
ZERO_SEED = 0x9E3779B97F4A7C15
LANES = 256
CHUNK = 1 << 20  # bytes per yielded chunk (a multiple of 8 * LANES)


def _state(seed):
    seed &= MASK
    return seed if seed else ZERO_SEED


def _step(x):
    x ^= x >> 12
    x ^= (x << 25) & MASK
    x ^= x >> 27
    return x


def _words(x, count):
    """count words the plain way; returns (bytes, state after them)."""
    out = array.array("Q")
    for _ in range(count):
        x ^= x >> 12
        x ^= (x << 25) & MASK
        x ^= x >> 27
        out.append((x * MULT) & MASK)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes(), x


def reference(seed, n):
    """n bytes of the pattern, one word at a time: slow, and obviously the definition."""
    data, _ = _words(_state(seed), (n + 7) // 8)
    return data[:n]


# ---- jumping ahead: a linear map on 64-bit vectors is the list of its columns' images

def _apply(cols, x):
    r = 0
    i = 0
    while x:
        if x & 1:
            r ^= cols[i]
        x >>= 1
        i += 1
    return r


def _compose(a, b):
    """The map x -> a(b(x))."""
    return [_apply(a, c) for c in b]


_jumps = {}


def _jump(steps):
    """The map of `steps` xorshift steps."""
    if steps not in _jumps:
        result = [1 << i for i in range(64)]
        power = [_step(1 << i) for i in range(64)]
        k = steps
        while k:
            if k & 1:
                result = _compose(power, result)
            power = _compose(power, power)
            k >>= 1
        _jumps[steps] = result
    return _jumps[steps]


_lane_mask = int.from_bytes((b"\xff" * 8 + b"\0" * 8) * LANES, "little")


def _block(x, steps):
    """LANES * steps words from state x, lane by lane; returns (bytes, state after them)."""
    jump = _jump(steps)
    starts = [x]
    for _ in range(LANES - 1):
        starts.append(_apply(jump, starts[-1]))
    p = int.from_bytes(b"".join(s.to_bytes(16, "little") for s in starts), "little")
    out = array.array("Q", bytes(8 * LANES * steps))
    m = _lane_mask
    for t in range(steps):
        p ^= (p >> 12) & m
        p ^= (p << 25) & m
        p ^= (p >> 27) & m
        w = array.array("Q", (p * MULT).to_bytes(16 * LANES + 8, "little"))
        out[t::steps] = w[0:2 * LANES:2]  # the low 8 bytes of each 16-byte lane
    # The lanes only move 8-byte groups around: the bytes stay little-endian on any host.
    return out.tobytes(), (p >> (128 * (LANES - 1))) & MASK


def pattern(seed, n, chunk=CHUNK):
    """Yields n bytes of the pattern for `seed`, in chunks of `chunk` bytes (the last shorter)."""
    chunk = max(8 * LANES, chunk // (8 * LANES) * (8 * LANES))
    x = _state(seed)
    left = n
    while left > 0:
        if left >= chunk:
            data, x = _block(x, chunk // (8 * LANES))
        else:
            words = (left + 7) // 8
            lanes = words // LANES
            data = b""
            if lanes:
                data, x = _block(x, lanes)
            rest, x = _words(x, words - lanes * LANES)
            data = (data + rest)[:left]
        yield data
        left -= len(data)


def sha256(seed, n):
    import hashlib
    h = hashlib.sha256()
    for c in pattern(seed, n):
        h.update(c)
    return h.hexdigest()


def _check(tool):
    """pattern() == reference() == cleave-tcp --pattern, over seeds and lengths that cut the
    stream everywhere: inside a word, at a lane, at a chunk."""
    bad = 0
    for seed in (1, 0, 2, 0xFFFFFFFFFFFFFFFF, 12345678901234567):
        for n in (0, 1, 7, 8, 9, 2047, 2048, 2049, 8 * LANES * 3 + 5, CHUNK - 1, CHUNK + 13):
            fast = b"".join(pattern(seed, n))
            ref = reference(seed, n) if n < 70000 else None
            c = subprocess.run([tool, "--pattern", str(n), "--seed", str(seed)],
                               capture_output=True, check=True).stdout
            ok = fast == c and len(c) == n and (ref is None or ref == fast)
            if not ok:
                print(f"seed {seed} n {n}: pattern() and cleave-tcp --pattern differ")
                bad += 1
    # Chunks of another size give the same stream.
    whole = b"".join(pattern(7, 3 * CHUNK + 100))
    if b"".join(pattern(7, 3 * CHUNK + 100, chunk=8 * LANES * 5)) != whole:
        print("the stream depends on the chunk size")
        bad += 1
    print("ok" if bad == 0 else f"{bad} mismatch(es)")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: cleave_pattern.py CLEAVE_TCP   (compares with cleave-tcp --pattern)")
        sys.exit(2)
    sys.exit(_check(sys.argv[1]))
