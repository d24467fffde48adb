"""Open the documentation site in a headless browser, offline, as a reader would meet it.

Builds the site (or takes a built one with ``--html``), opens the front page and the
performance, accuracy and mathematics pages in Chromium with every request that would
leave the machine blocked and recorded, and checks on each page:

- no request leaves the machine: every script, style sheet, font and image is loaded
  from the build (``file:``), none from a CDN;
- the maths is rendered: every ``.math`` element holds MathJax's output (an
  ``mjx-container``), MathJax reported no error (``mjx-merror``), and no raw ``\\(``,
  ``\\[`` or ``\\begin{`` is left in the visible text outside code;
- every image has loaded (``naturalWidth > 0``);
- the page raised no JavaScript error.

It saves two screenshots per page into the folder given on the command line: the first
screen (``PAGE-top.png``, what a reader sees on opening it) and the whole page
(``PAGE.png``). Exit status 0 when every check passes, 1 otherwise::

    python -m pip install ".[docs]" playwright
    apt-get install chromium        # or: python -m playwright install chromium
    python tools/check_docs_site.py screenshots/
    python tools/check_docs_site.py --html docs/_build/html screenshots/

The continuous-integration machines have no browser; ``.ci/run`` builds the site and runs the
``built_docs`` tests of ``tests/test_docs.py`` on it, which check
what needs none (no CDN in the built HTML, the MathJax files present in the build).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("index", "performance", "accuracy", "mathematics")
#: Pages that must hold rendered maths (the check of the renderer itself).
MATH_PAGES = ("index", "accuracy", "mathematics")
#: URL schemes that stay on the machine.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
VIEWPORT = {"width": 1280, "height": 900}
#: Milliseconds a page may take to load and typeset: generous, as a shared
#: machine under load can take tens of seconds.
TIMEOUT_MS = 180_000

# Runs in the page once it has loaded and MathJax has finished typesetting:
# what the checks need, gathered in one pass.
INSPECT_PAGE = r"""() => {
  const maths = [...document.querySelectorAll('.math')];
  const unrendered = maths.filter(m => !m.querySelector('mjx-container'))
                          .map(m => m.textContent.slice(0, 80));
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: n => n.parentElement.closest('pre, code, script, style, mjx-assistive-mml')
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const raw = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    if (/\\\(|\\\[|\\begin\{/.test(t)) raw.push(t.trim().slice(0, 80));
  }
  const images = [...document.images].map(i => ({src: i.getAttribute('src'),
                                                 width: i.complete ? i.naturalWidth : 0}));
  return {maths: maths.length, unrendered, raw,
          errors: document.querySelectorAll('mjx-merror').length,
          rendered: document.querySelectorAll('mjx-container').length, images};
}"""

WAIT_FOR_MATHJAX = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await document.fonts.ready;  // MathJax's fonts load once it has typeset
  return true;
}"""


def build_site(out: Path) -> Path:
    """Build the site into ``out`` as the README's docs command does (warnings are errors)."""
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html"]
    command += ["-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")]
    subprocess.run(command, check=True, cwd=ROOT)
    return out / "html"


def find_browser(given: str | None) -> str | None:
    """The Chromium to drive: ``given``, else one on PATH, else None (playwright's own)."""
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def check_page(browser, html: Path, page: str, shots: Path) -> list[str]:  # type: ignore[no-untyped-def]
    """Open one page offline, save its screenshots, and return what is wrong with it."""
    context = browser.new_context(offline=True, viewport=VIEWPORT)
    left: list[str] = []
    script_errors: list[str] = []

    def route(request_route):  # type: ignore[no-untyped-def]
        url = request_route.request.url
        if url.startswith(LOCAL_SCHEMES):
            request_route.continue_()
        else:
            left.append(url)
            request_route.abort()

    context.set_default_timeout(TIMEOUT_MS)
    context.route("**/*", route)
    tab = context.new_page()
    tab.on("pageerror", lambda error: script_errors.append(str(error)))
    tab.goto((html / f"{page}.html").as_uri(), wait_until="load")
    tab.evaluate(WAIT_FOR_MATHJAX)
    found = tab.evaluate(INSPECT_PAGE)
    tab.screenshot(path=str(shots / f"{page}-top.png"))
    tab.screenshot(path=str(shots / f"{page}.png"), full_page=True)
    context.close()

    problems = [f"request left the machine: {url}" for url in left]
    problems += [f"JavaScript error: {error}" for error in script_errors]
    problems += [f"maths not rendered: {text!r}" for text in found["unrendered"]]
    problems += [f"raw TeX visible: {text!r}" for text in found["raw"]]
    if found["errors"]:
        problems.append(f"{found['errors']} MathJax error element(s) (mjx-merror)")
    if page in MATH_PAGES and found["rendered"] == 0:
        problems.append("no rendered maths on a page that has maths")
    problems += [f"image did not load: {i['src']}" for i in found["images"] if not i["width"]]
    images = sum(1 for i in found["images"] if i["width"])
    print(
        f"{page:12s} maths {found['rendered']:4d}/{found['maths']:<4d} images {images}/"
        f"{len(found['images'])}  requests off the machine {len(left)}  "
        f"{'ok' if not problems else 'FAIL'}"
    )
    return problems


def main(argv: list[str] | None = None) -> int:
    """Check the pages and save the screenshots; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("screenshots", type=Path, help="folder for the screenshots")
    parser.add_argument("--html", type=Path, help="a built site (default: build one)")
    parser.add_argument("--browser", help="the Chromium executable (default: one on PATH)")
    args = parser.parse_args(argv)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        parser.error("needs playwright: python -m pip install playwright")
    args.screenshots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        html = args.html or build_site(Path(scratch))
        if not (html / "index.html").is_file():
            parser.error(f"--html: no index.html in {html}")
        with sync_playwright() as playwright:
            executable = find_browser(args.browser)
            # --no-sandbox: Chromium's sandbox refuses to start as root (containers, CI).
            browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            print(f"{browser.browser_type.name} {browser.version} on {html}")
            problems = {page: check_page(browser, html, page, args.screenshots) for page in PAGES}
            browser.close()
    for page, found in problems.items():
        for problem in found:
            print(f"{page}: {problem}")
    print(f"screenshots in {args.screenshots}")
    return 1 if any(problems.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
