"""The study's figures as PNG, with the standard library only (zlib for the
image data): a raster canvas, a 5x7 bitmap font, and the two charts the
study draws -- lines (speedup against threads) and grouped bars (time per
policy, normalised). matplotlib is not a dependency of the project
(DESIGN.md lists it for tools/, and this machine has none), and the study
must run on any node it is copied to; the charts need no more than lines,
rectangles and short labels."""

import struct
import zlib

# 5x7 glyphs, one number per row, bit 4 the leftmost column. Lower case is
# drawn as upper case; an unknown character as '?'.
_GLYPHS = {
    " ": (0, 0, 0, 0, 0, 0, 0),
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14),
    "2": (14, 17, 1, 2, 4, 8, 31), "3": (31, 2, 4, 2, 1, 17, 14),
    "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8),
    "8": (14, 17, 17, 14, 17, 17, 14), "9": (14, 17, 17, 15, 1, 2, 12),
    "A": (14, 17, 17, 31, 17, 17, 17), "B": (30, 17, 17, 30, 17, 17, 30),
    "C": (14, 17, 16, 16, 16, 17, 14), "D": (28, 18, 17, 17, 17, 18, 28),
    "E": (31, 16, 16, 30, 16, 16, 31), "F": (31, 16, 16, 30, 16, 16, 16),
    "G": (14, 17, 16, 23, 17, 17, 15), "H": (17, 17, 17, 31, 17, 17, 17),
    "I": (14, 4, 4, 4, 4, 4, 14), "J": (7, 2, 2, 2, 2, 18, 12),
    "K": (17, 18, 20, 24, 20, 18, 17), "L": (16, 16, 16, 16, 16, 16, 31),
    "M": (17, 27, 21, 21, 17, 17, 17), "N": (17, 17, 25, 21, 19, 17, 17),
    "O": (14, 17, 17, 17, 17, 17, 14), "P": (30, 17, 17, 30, 16, 16, 16),
    "Q": (14, 17, 17, 17, 21, 18, 13), "R": (30, 17, 17, 30, 20, 18, 17),
    "S": (15, 16, 16, 14, 1, 1, 30), "T": (31, 4, 4, 4, 4, 4, 4),
    "U": (17, 17, 17, 17, 17, 17, 14), "V": (17, 17, 17, 17, 17, 10, 4),
    "W": (17, 17, 17, 21, 21, 21, 10), "X": (17, 17, 10, 4, 10, 17, 17),
    "Y": (17, 17, 17, 10, 4, 4, 4), "Z": (31, 1, 2, 4, 8, 16, 31),
    ".": (0, 0, 0, 0, 0, 12, 12), ",": (0, 0, 0, 0, 12, 4, 8),
    ":": (0, 12, 12, 0, 12, 12, 0), ";": (0, 12, 12, 0, 12, 4, 8), "-": (0, 0, 0, 31, 0, 0, 0),
    "_": (0, 0, 0, 0, 0, 0, 31), "(": (2, 4, 8, 8, 8, 4, 2),
    ")": (8, 4, 2, 2, 2, 4, 8), "/": (0, 1, 2, 4, 8, 16, 0),
    "=": (0, 0, 31, 0, 31, 0, 0), "+": (0, 4, 4, 31, 4, 4, 0),
    "%": (24, 25, 2, 4, 8, 19, 3), "^": (4, 10, 17, 0, 0, 0, 0),
    "*": (0, 4, 21, 14, 21, 4, 0), "<": (2, 4, 8, 16, 8, 4, 2),
    ">": (8, 4, 2, 1, 2, 4, 8), "?": (14, 17, 1, 2, 4, 0, 4),
    "|": (4, 4, 4, 4, 4, 4, 4), "'": (4, 4, 8, 0, 0, 0, 0),
}

WHITE, BLACK, GREY, LIGHT = (255, 255, 255), (0, 0, 0), (128, 128, 128), (225, 225, 225)
# Distinguishable series colours (also in grey scale, by lightness).
PALETTE = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14),
           (23, 190, 207), (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34),
           (0, 0, 128), (128, 0, 0)]


class Canvas:
    def __init__(self, width, height):
        self.w, self.h = width, height
        self.px = bytearray(WHITE * (width * height))

    def set(self, x, y, c):
        x, y = int(round(x)), int(round(y))
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(c)

    def rect(self, x0, y0, x1, y1, c):
        """Fills [x0, x1] x [y0, y1]."""
        x0, x1 = sorted((int(round(x0)), int(round(x1))))
        y0, y1 = sorted((int(round(y0)), int(round(y1))))
        for y in range(max(y0, 0), min(y1, self.h - 1) + 1):
            for x in range(max(x0, 0), min(x1, self.w - 1) + 1):
                self.set(x, y, c)

    def line(self, x0, y0, x1, y1, c, width=1, dash=0):
        x0, y0, x1, y1 = (int(round(v)) for v in (x0, y0, x1, y1))
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, step = dx + dy, 0
        while True:
            if not dash or (step // dash) % 2 == 0:
                for ox in range(-(width // 2), width - width // 2):
                    for oy in range(-(width // 2), width - width // 2):
                        self.set(x0 + ox, y0 + oy, c)
            if x0 == x1 and y0 == y1:
                return
            step += 1
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, c=BLACK, scale=1, anchor="left", vertical=False):
        """Draws s with its top-left at (x, y) (anchor "center"/"right" shift
        it); vertical text runs bottom to top, (x, y) its bottom-left."""
        advance = 6 * scale
        length = len(s) * advance - scale
        if anchor == "center":
            offset = length // 2
        elif anchor == "right":
            offset = length
        else:
            offset = 0
        for k, ch in enumerate(s):
            rows = _GLYPHS.get(ch.upper(), _GLYPHS["?"])
            for r, bits in enumerate(rows):
                for col in range(5):
                    if bits & (16 >> col):
                        for a in range(scale):
                            for b in range(scale):
                                u = k * advance - offset + col * scale + a
                                v = r * scale + b
                                if vertical:
                                    self.set(x + v, y - u, c)
                                else:
                                    self.set(x + u, y + v, c)

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[3 * self.w * y:3 * self.w * (y + 1)])
                       for y in range(self.h))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data +
                    struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

        return (b"\x89PNG\r\n\x1a\n" +
                chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.png())


def nice_ticks(lo, hi, count=5):
    """About `count` round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    while mag > raw:
        mag /= 10
    while mag * 10 <= raw:
        mag *= 10
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = step * int(lo / step)
    if first > lo:
        first -= step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def fmt_tick(v):
    return ("%g" % v) if abs(v) < 1e5 else ("%.0e" % v)


class Panel:
    """A plotting area of the canvas with its axes, value to pixel."""

    def __init__(self, cv, x, y, w, h, xlim, ylim, title, xlabel, ylabel, xticks=None):
        self.cv, self.x, self.y, self.w, self.h = cv, x, y, w, h
        self.yt = nice_ticks(*ylim)
        self.ylo, self.yhi = self.yt[0], self.yt[-1]
        self.xlo, self.xhi = xlim
        if self.xhi <= self.xlo:
            self.xlo, self.xhi = self.xlo - 1, self.xhi + 1
        for t in self.yt:
            py = self.py(t)
            cv.line(x, py, x + w, py, LIGHT)
            cv.text(x - 4, py - 3, fmt_tick(t), anchor="right")
        cv.line(x, y, x, y + h, BLACK)
        cv.line(x, y + h, x + w, y + h, BLACK)
        for t in xticks or []:
            label, value = t if isinstance(t, tuple) else (fmt_tick(t), t)
            px = self.px(value)
            cv.line(px, y + h, px, y + h + 3, BLACK)
            cv.text(px, y + h + 6, label, anchor="center")
        cv.text(x + w // 2, y - 14, title, anchor="center")
        cv.text(x + w // 2, y + h + 20, xlabel, anchor="center")
        cv.text(x - 44, y + h // 2 + len(ylabel) * 3, ylabel, vertical=True)

    def px(self, v):
        return self.x + (v - self.xlo) / (self.xhi - self.xlo) * self.w

    def py(self, v):
        return self.y + self.h - (v - self.ylo) / (self.yhi - self.ylo) * self.h


def legend(cv, x, y, entries):
    """entries: (label, colour, dashed) rows, from (x, y) down."""
    for k, (label, colour, dashed) in enumerate(entries):
        yy = y + 12 * k
        cv.line(x, yy + 3, x + 16, yy + 3, colour, width=2, dash=3 if dashed else 0)
        cv.text(x + 22, yy, label)
