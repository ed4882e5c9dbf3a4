#!/usr/bin/env python3
"""crossover report as a reader gets it (ctest report.page and report.chromium).

  report_check.py page CROSSOVER OUT.html   runs `crossover report --data mnist-10k --epochs 1`
                                            and checks the page: nothing loaded from outside, both
                                            models named, every SVG well-formed and drawn.
  report_check.py chromium OUT.html         renders the page in headless Chromium (a desktop and
                                            a phone width), checks the screenshots show the
                                            charts, and prints it to PDF; exits 77 (skipped)
                                            when Chromium is not installed.
"""
import html.parser
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

SKIP = 77
SVG = "{http://www.w3.org/2000/svg}"
# The colours the page's charts draw with (src/perf/report.cpp, src/perf/plot.cpp): the GEMM
# phase's blue (every step has GEMMs) and the sweep's first series (the CPU's line).
GEMM_BLUE = (0x2B, 0x6C, 0xB0)
SWEEP_BLUE = (0x1F, 0x77, 0xB4)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Loads(html.parser.HTMLParser):
    """Every tag and every attribute that could make a browser fetch something."""

    FETCHING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "video", "audio",
                     "source", "image", "use", "frame", "base"}
    FETCHING_ATTRS = {"src", "href", "xlink:href", "data", "poster", "srcset", "action",
                      "background", "formaction"}

    def __init__(self):
        super().__init__()
        self.problems = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        if tag in self.FETCHING_TAGS:
            self.problems.append("<%s> loads or runs something" % tag)
        for name, value in attrs:
            if name in self.FETCHING_ATTRS:
                self.problems.append("<%s %s=%r>" % (tag, name, value))
            if name == "style" or name.startswith("on"):
                if name.startswith("on"):
                    self.problems.append("<%s %s=...> is script" % (tag, name))
                self.check_css(value or "")
            if name in ("fill", "stroke", "filter", "mask", "clip-path"):
                self.check_css(value or "")

    def check_css(self, css):
        for target in re.findall(r"url\(\s*['\"]?([^'\")]*)", css):
            if not target.startswith("#"):
                self.problems.append("url(%s)" % target)
        if "@import" in css:
            self.problems.append("@import in CSS")

    def handle_data(self, data):
        self.text.append(data)
        if self.lasttag == "style":
            self.check_css(data)


def check_page(crossover, out):
    if os.path.exists(out):
        os.remove(out)
    cmd = [crossover, "report", "--data", "mnist-10k", "--epochs", "1", "--out", out]
    print("running: " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    print(r.stdout[-3000:])
    if r.returncode != 0:
        fail("crossover report exited %d: %s" % (r.returncode, r.stderr[-2000:]))
    if not out in r.stdout:
        fail("the report's path is not on stdout")
    page = open(out, encoding="utf-8").read()
    if not page.startswith("<!DOCTYPE html>"):
        fail("not an HTML5 document")
    p = Loads()
    p.feed(page)
    p.close()
    if p.problems:
        fail("the page loads from outside or runs script: " + "; ".join(p.problems))
    # No address outside the page at all, but the SVG namespace (a name, never fetched).
    for url in re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"'<>]*", page):
        if url != "http://www.w3.org/2000/svg":
            fail("an address outside the page: " + url)
    text = " ".join(p.text)
    for name in ("SMALL", "BIG"):
        if name not in text:
            fail("the page does not name " + name)
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    if len(svgs) < 5:
        fail("expected at least 5 charts (epochs and steps of each model, the sweep), got %d"
             % len(svgs))
    for i, s in enumerate(svgs):
        try:
            root = ET.fromstring(s)
        except ET.ParseError as e:
            fail("chart %d is not well-formed XML: %s" % (i, e))
        if root.tag != SVG + "svg" or not root.get("viewBox"):
            fail("chart %d is not an SVG with a viewBox" % i)
        marks = [e for e in root.iter() if e.tag in (SVG + "rect", SVG + "polyline")]
        drawn = [e for e in marks
                 if e.tag == SVG + "polyline" or float(e.get("width", "0")) > 0.5]
        if len(drawn) < 3:
            fail("chart %d draws nothing (%d marks)" % (i, len(drawn)))
    steps = [s for s in svgs if "one step, by phase" in s]
    if len(steps) != 2 or not all("GEMM" in s for s in steps):
        fail("expected the step's phases of SMALL and BIG, each with its GEMMs")
    if "crossover" not in page.lower() or "<polyline" not in page:
        fail("no crossover curve")
    print("page OK: %d bytes, %d charts, nothing loaded from outside" % (len(page), len(svgs)))


def png_pixels(path):
    """(width, height, rows of RGB tuples' bytes, bytes per pixel): a plain PNG decoder (8-bit
    RGB or RGBA, as Chromium writes)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + " is not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if depth != 8 or color not in (2, 6):
        fail("unexpected PNG format (depth %d, colour type %d)" % (depth, color))
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append(line)
        prev = line
    return w, h, rows, bpp


def count_colour(rows, bpp, rgb, tolerance=6):
    n = 0
    for line in rows:
        for i in range(0, len(line), bpp):
            if (abs(line[i] - rgb[0]) <= tolerance and abs(line[i + 1] - rgb[1]) <= tolerance
                    and abs(line[i + 2] - rgb[2]) <= tolerance):
                n += 1
    return n


def check_chromium(out):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIPPED: chromium is not installed (scripts/install-deps installs it): the page "
              "was not rendered")
        sys.exit(SKIP)
    if not os.path.exists(out):
        fail(out + " is missing (ctest report.page writes it)")
    url = "file://" + os.path.abspath(out)
    with tempfile.TemporaryDirectory() as tmp:
        base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--no-first-run", "--user-data-dir=" + tmp]
        for label, size in (("desktop", "1000,3200"), ("phone", "400,6000")):
            png = os.path.join(tmp, label + ".png")
            r = subprocess.run(base + ["--window-size=" + size, "--screenshot=" + png, url],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0 or not os.path.exists(png):
                fail("chromium's %s screenshot failed (%d): %s" % (label, r.returncode,
                                                                  r.stderr[-2000:]))
            w, h, rows, bpp = png_pixels(png)
            gemm = count_colour(rows, bpp, GEMM_BLUE)
            sweep = count_colour(rows, bpp, SWEEP_BLUE)
            print("%s screenshot %dx%d: %d GEMM-blue pixels, %d sweep-blue pixels"
                  % (label, w, h, gemm, sweep))
            if gemm < 1000:
                fail("the %s screenshot shows no bars (GEMM blue)" % label)
            if sweep < 40:
                fail("the %s screenshot shows no sweep curve" % label)
            if len(set(bytes(r) for r in rows[::8])) < 20:
                fail("the %s screenshot is nearly blank" % label)
        pdf = os.path.join(tmp, "report.pdf")
        r = subprocess.run(base + ["--print-to-pdf=" + pdf, "--no-pdf-header-footer", url],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not os.path.exists(pdf):
            fail("chromium could not print the page: " + r.stderr[-2000:])
        pdf_bytes = open(pdf, "rb").read()
        pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf_bytes))
        if not pdf_bytes.startswith(b"%PDF") or pages < 1:
            fail("the printed page is not a PDF with pages")
        print("printed: %d pages of PDF" % pages)
    print("chromium OK")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "page":
        check_page(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "chromium":
        check_chromium(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
