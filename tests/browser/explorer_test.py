#!/usr/bin/env python3
"""The explorer page (`dtsim serve`) driven for real in Debian's headless Chromium (issue 31).

  explorer_test.py --dtsim BUILD/dtsim lesson NAME   load a lesson, guess, reveal, change each control
                                                     it offers to try; the figure and its picture move
                                                     as it says, the breakdown shown sums to the step
  explorer_test.py --dtsim BUILD/dtsim url           the address carries the whole set-up
  explorer_test.py --dtsim BUILD/dtsim phone         412 px wide: no sideways scrolling, every control labelled
  explorer_test.py --dtsim BUILD/dtsim screenshots DIR   docs/img's three pictures

Each run starts its own `dtsim serve --port 0` and its own Chromium (a fresh profile), and ends both
however it ends. Every wait is bounded and says what it waited for. Exit 77 (ctest: skipped) only
when there is no chromium; a missing chromedriver or selenium is a failure, since CI installs them.
"""
import argparse
import base64
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
WAIT_S = 90      # for one simulation's answer on the page (they take well under a second each)
WHOLE_S = 420    # for the whole run, however it goes


class Failure(Exception):
    pass


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class Server:
    """`dtsim serve --port 0` in its own process group; its URL read from its first line."""

    def __init__(self, dtsim):
        self.proc = subprocess.Popen([dtsim, "serve", "--port", "0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        try:
            sel = selectors.DefaultSelector()
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=30):
                raise Failure("dtsim serve printed no address within 30 s")
            line = self.proc.stdout.readline().decode()
            m = re.search(r"http://[^ ]+/", line)
            if not m:
                self.stop()
                raise Failure("dtsim serve did not start: " + line + self.proc.stderr.read().decode())
            self.url = m.group(0)
        except BaseException:
            self.stop()
            raise

    def lessons(self):
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(self.url + "api/lessons", timeout=30) as r:
            return json.load(r)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def browser(profile, width=1280, height=1000):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium_path()
    # Without the background-networking flags Chromium reaches out on start and, on a closed
    # network, its connections are refused.
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", "--user-data-dir=" + profile, f"--window-size={width},{height}"):
        opts.add_argument(a)
    driver_path = shutil.which("chromedriver") or "/usr/lib/chromium/chromedriver"
    d = webdriver.Chrome(service=Service(driver_path), options=opts)
    d.set_page_load_timeout(60)
    d.set_script_timeout(60)
    return d


def js_value(v):
    """A value as the page's <select> carries it (JavaScript's String())."""
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return json.dumps(v)


def wait_for(d, script, what, timeout=WAIT_S):
    end = time.time() + timeout
    while time.time() < end:
        if d.execute_script(script):
            return
        time.sleep(0.1)
    errors = d.execute_script("return [...document.querySelectorAll('.err')].map(e=>e.textContent).join(' | ')")
    raise Failure(f"waited {timeout} s for {what}; the page's messages: {errors!r}")


def done_counts(d):
    return d.execute_script("return ['A','B'].map(id=>{const p=document.getElementById('panel'+id);"
                            "return p?+(p.dataset.done||0):0;})")


def wait_results(d, before=(0, 0), sides="AB"):
    """Both panels answered, each side in `sides` with a newer answer than `before`."""
    idx = {"A": 0, "B": 1}
    cond = " && ".join(f"(p=document.getElementById('panel{s}'))&&+(p.dataset.done||0)>{before[idx[s]]}"
                       f"&&p.dataset.state!=='running'" for s in sides)
    wait_for(d, f"let p; return {cond};", f"the answer of side(s) {sides}")
    states = d.execute_script("return ['A','B'].map(id=>document.getElementById('panel'+id).dataset.state)")
    if states != ["done", "done"]:
        raise Failure(f"a side has no result: {states}: " +
                      d.execute_script("return [...document.querySelectorAll('.err')].map(e=>e.textContent).join(' | ')"))


def figure(d, at):
    """The lesson's figure for A and B as the page shows it, and its picture: the two bars' widths."""
    return d.execute_script("""
      const g=[...document.querySelectorAll('#compare .fig')].find(g=>g.dataset.at===arguments[0]);
      if(!g)return null;
      const w=[...g.querySelectorAll('.bar')].map(b=>[b.getBoundingClientRect().width,b.parentElement.getBoundingClientRect().width]);
      return {a:+g.dataset.a,b:+g.dataset.b,wa:w[0][0],wb:w[1][0],ta:w[0][1],tb:w[1][1]};""", at)


def check_breakdown_sums(d):
    """What each panel shows adds up: its parts' seconds to its step, its bar segments to its bar."""
    for side in "AB":
        got = d.execute_script("""
          const p=document.getElementById('panel'+arguments[0]);
          const step=+p.querySelector('[name=step]').textContent.match(/([0-9.]+) s/)[1];
          const rows=[...p.querySelectorAll('[name=breakdown] .brow')].map(r=>+r.querySelector('.bval').textContent.match(/^([0-9.]+) s/)[1]);
          const stack=p.querySelector('.stack'),segs=[...stack.children].map(s=>s.getBoundingClientRect().width);
          return {step:step,rows:rows,stack:stack.getBoundingClientRect().width,segs:segs,
                  track:p.querySelector('.stacktrack').getBoundingClientRect().width,exact:+p.dataset.step};""", side)
        tol = 0.00005 * (len(got["rows"]) + 1) + 1e-9
        if not got["rows"] or abs(sum(got["rows"]) - got["step"]) > tol:
            raise Failure(f"{side}: the breakdown shown sums to {sum(got['rows']):.4f} s, the step shown is {got['step']:.4f} s")
        if abs(sum(got["segs"]) - got["stack"]) > 1.0 + 0.02 * len(got["segs"]):
            raise Failure(f"{side}: the bar's parts are {sum(got['segs']):.1f} px long, the bar {got['stack']:.1f} px")
    steps = [d.execute_script(f"return +document.getElementById('panel{s}').dataset.step") for s in "AB"]
    widths = [d.execute_script(f"return document.querySelector('#panel{s} .stack').getBoundingClientRect().width") for s in "AB"]
    track = d.execute_script("return document.querySelector('#panelA .stacktrack').getBoundingClientRect().width")
    for s, w, step in zip("AB", widths, steps):  # one scale: the longer step fills the track
        if abs(w - track * step / max(steps)) > 1.5:
            raise Failure(f"{s}'s step bar is {w:.1f} px; on one scale with the longer step at {track:.1f} px it would be "
                          f"{track * step / max(steps):.1f} px")


def check_labels(d):
    unlabelled = d.execute_script("""
      return [...document.querySelectorAll('select,input')].filter(c=>c.offsetParent!==null)
        .filter(c=>!c.id||!document.querySelector('label[for="'+c.id+'"]')).map(c=>c.name||c.id||c.outerHTML);""")
    if unlabelled:
        raise Failure(f"controls without a <label for>: {unlabelled}")


def check_picture(f, what):
    """The figure's two bars are on one scale: the larger fills the track, the other in proportion."""
    top = max(f["a"], f["b"]) or 1
    if abs(f["ta"] - f["tb"]) > 0.5:
        raise Failure(f"{what}: A's bar is drawn on a {f['ta']:.1f} px track, B's on {f['tb']:.1f} px")
    for v, w, s in ((f["a"], f["wa"], "A"), (f["b"], f["wb"], "B")):
        if abs(w - f["ta"] * v / top) > 1.5:
            raise Failure(f"{what}: {s}'s bar is {w:.1f} px for {v:g}; on one scale it would be {f['ta'] * v / top:.1f} px")


def better(lesson, a, b, within):
    if abs(a - b) <= within * max(abs(a), abs(b)):
        return "same"
    return "A" if (a < b) == (lesson["figure"]["better"] == "lower") else "B"


def choose(d, element_id, value):
    """Picks an option as a user does (an <option> without a value attribute is picked by its text)."""
    from selenium.common.exceptions import NoSuchElementException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    select = Select(d.find_element(By.ID, element_id))
    try:
        select.select_by_value(js_value(value))
    except NoSuchElementException:
        select.select_by_visible_text(js_value(value))


def click(d, element_id):
    from selenium.webdriver.common.by import By
    d.find_element(By.ID, element_id).click()


def guess_and_reveal(d, lesson):
    """Predict-then-reveal: nothing shown before the guess; the answer is the simulated one."""
    hidden = d.execute_script("return document.body.classList.contains('guessing')"
                              "&&getComputedStyle(document.querySelector('#panelA .results')).display==='none'"
                              "&&getComputedStyle(document.getElementById('compare')).display==='none'")
    if not hidden:
        raise Failure("the figures are shown before the student has guessed")
    expect = lesson["expect"]
    which = "same" if "same_within" in expect else expect["better"]
    click(d, "g-" + which)
    click(d, "g-big")
    click(d, "reveal")
    wait_for(d, "return !!document.getElementById('answer').dataset.which", "the revealed answer")
    shown = d.execute_script("return document.getElementById('answer').dataset.which")
    if shown != which:
        raise Failure(f"the page's answer is {shown!r}; the lesson says {which!r}")
    if d.execute_script("return document.body.classList.contains('guessing')"):
        raise Failure("the figures are still hidden after the answer was revealed")


def check_claim(lesson, f):
    expect = lesson["expect"]
    if "same_within" in expect:
        if better(lesson, f["a"], f["b"], expect["same_within"]) != "same":
            raise Failure(f"the lesson says A and B are about the same; the page shows A {f['a']:g}, B {f['b']:g}")
        return
    if better(lesson, f["a"], f["b"], 0.05) != expect["better"] or max(f["a"], f["b"]) / min(f["a"], f["b"]) < expect["by_at_least"]:
        raise Failure(f"the lesson says {expect['better']} is better by {expect['by_at_least']}x or more; "
                      f"the page shows A {f['a']:g}, B {f['b']:g}")


def try_each(d, lesson):
    """Each thing the lesson offers to try, done on its controls: the figure and its picture move as it says."""
    at = lesson["figure"]["at"]
    for t in lesson["tries"]:
        what = f"{t['side']}: {t['control']} = {t['value']}"
        sides = "AB" if t["side"] == "both" else t["side"]
        before, f0 = done_counts(d), figure(d, at)
        for s in sides:
            choose(d, f"{s}-{t['control']}", t["value"])
        wait_results(d, before, sides)
        f1 = figure(d, at)
        check_picture(f1, what)
        if "then_better" in t:
            if better(lesson, f1["a"], f1["b"], 0.0) != t["then_better"]:
                raise Failure(f"{what}: the lesson says {t['then_better']} is then better; A {f1['a']:g}, B {f1['b']:g}")
        else:
            key = "a" if t["side"] == "A" else "b"
            old, new = f0[key], f1[key]
            moved = "same" if abs(new - old) <= 0.05 * abs(old) else ("up" if new > old else "down")
            if moved != t["moves"]:
                raise Failure(f"{what}: the lesson says the figure goes {t['moves']}; it went from {old:g} to {new:g}")
            if moved != "same" and max(abs(f1["wa"] - f0["wa"]), abs(f1["wb"] - f0["wb"])) < 0.5:
                raise Failure(f"{what}: the figure moved but its bars did not")
        check_breakdown_sums(d)
        search = d.execute_script("return location.search")
        for s in sides:
            if f"{s}.{t['control']}={js_value(t['value'])}" not in urllib.request.unquote(search):
                raise Failure(f"{what}: the address does not carry it: {search}")
        print(f"  {what}: {lesson['figure']['label']} A {f0['a']:g} -> {f1['a']:g}, B {f0['b']:g} -> {f1['b']:g}: ok")


def check_timelines(d, zoom=None):
    """Each side's timeline (report.html's picture) is there for its latest set-up, A's and B's to one time scale."""
    wait_for(d, "return ['A','B'].every(id=>{const p=document.getElementById('panel'+id);"
                "return p.dataset.timeline===p.dataset.done&&p.querySelector('[name=timeline] svg rect');})",
             "both sides' timelines of their latest set-ups")
    got = d.execute_script("""return ['A','B'].map(id=>{const p=document.getElementById('panel'+id),
        svg=p.querySelector('[name=timeline] svg');return {w:svg.getBoundingClientRect().width,
        box:p.querySelector('[name=timeline]').clientWidth,step:+p.dataset.step,zoom:+p.querySelector('[name=zoom]').value,
        rects:svg.querySelectorAll('rect').length};});""")
    top = max(g["step"] for g in got)
    for side, g in zip("AB", got):
        want = g["box"] * g["zoom"] * g["step"] / top
        if abs(g["w"] - want) > 2:
            raise Failure(f"{side}'s timeline is {g['w']:.1f} px wide; at {g['zoom']}x on one time scale it would be {want:.1f} px")
    over = d.execute_script("return document.documentElement.scrollWidth-document.documentElement.clientWidth")
    if over > 0:
        raise Failure(f"the timelines make the page {over} px wider than the window; their box should scroll")
    return got


def run_lesson(d, server, name):
    lessons = {l["name"]: l for l in server.lessons()}
    if name not in lessons:
        raise Failure(f"no lesson {name!r}; the server has {sorted(lessons)}")
    lesson = lessons[name]
    d.get(server.url + "?lesson=" + name)
    wait_results(d)
    check_labels(d)
    guess_and_reveal(d, lesson)
    f = figure(d, lesson["figure"]["at"])
    if f is None:
        raise Failure("the page shows no comparison of the lesson's figure")
    check_claim(lesson, f)
    check_picture(f, "A against B")
    check_breakdown_sums(d)
    print(f"{name}: {lesson['figure']['label']} A {f['a']:g}, B {f['b']:g}: ok")
    for side in "AB":  # open both timelines, then zoom A's
        d.find_element("css selector", f"#panel{side} .tlbox summary").click()
    check_timelines(d)
    choose(d, "A-zoom", 4)
    got = check_timelines(d)
    print(f"  timelines: {got[0]['rects']} and {got[1]['rects']} shapes, one time scale, A zoomed 4x inside its box: ok")
    try_each(d, lesson)
    check_timelines(d)


def controls(d):
    return d.execute_script("const o={};document.querySelectorAll('.controls [name]').forEach(c=>{if(c.id)o[c.id]=c.value;});return o;")


def reload_same(d, what):
    """Opens the page's own address afresh: the same controls and the same figures come back."""
    url, before, steps = d.current_url, controls(d), [figure(d, "/step_time_s")]
    d.get("about:blank")
    d.get(url)
    wait_results(d)
    after, again = controls(d), [figure(d, "/step_time_s")]
    if after != before:
        diff = {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}
        raise Failure(f"{what}: reloading {url} changed the controls: {diff}")
    if again != steps:
        raise Failure(f"{what}: reloading {url} changed the figures: {steps} -> {again}")
    print(f"{what}: {url}: the same {len(after)} controls and figures: ok")


def run_url(d, server):
    lesson = next(l for l in server.lessons() if len(l["controls"]) > 1)
    d.get(server.url + "?lesson=" + lesson["name"] + "&predict=0")
    wait_results(d)
    # One control changed on each side, to an option other than the lesson's.
    for side, c in (("A", lesson["controls"][0]), ("B", lesson["controls"][-1])):
        values = [js_value(o["value"] if isinstance(o, dict) else o) for o in c["options"]]
        current = js_value(lesson[side]["values"][c["id"]])
        before = done_counts(d)
        choose(d, f"{side}-{c['id']}", next(v for v in values if v != current))
        wait_results(d, before, side)
    reload_same(d, "lesson " + lesson["name"])
    d.get(server.url + "?explore=1&B.nodes=1&B.tensor=4")
    wait_results(d)
    before = done_counts(d)
    choose(d, "A-schedule", "interleaved-1f1b")
    wait_results(d, before, "A")
    reload_same(d, "the free explorer")


def run_phone(d, server):
    """At 412 px (a phone) nothing scrolls sideways, on the list, a lesson before and after the answer, the explorer."""
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 412, "height": 915, "deviceScaleFactor": 1, "mobile": True})
    first = server.lessons()[0]["name"]
    for query, wait in (("", False), ("?lesson=" + first, True), ("?lesson=" + first + "&predict=0", True), ("?explore=1", True)):
        d.get(server.url + query)
        if wait:
            wait_results(d)
        else:
            wait_for(d, "return document.querySelectorAll('#lesson-list li').length>0", "the lesson list")
        over = d.execute_script("""const w=document.documentElement.clientWidth;
          return {over:document.documentElement.scrollWidth-w,width:w,wide:[...document.querySelectorAll('body *')]
            .filter(e=>e.getBoundingClientRect().right>w+0.5).slice(0,5).map(e=>e.tagName+'.'+e.className+' '+(e.id||e.getAttribute('name')||''))};""")
        if over["width"] != 412 or over["over"] > 0:
            raise Failure(f"{query or '/'}: {over['over']} px wider than the {over['width']} px screen; too wide: {over['wide']}")
        check_labels(d)
        print(f"412 px, {query or '/'}: no sideways scrolling, every control labelled: ok")


def full_page(d, path, width, height=None):
    """A PNG of the page `width` px wide, down to `height` px (the whole page when None)."""
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
    h = height or d.execute_script("return document.documentElement.scrollHeight")
    shot = d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                        "clip": {"x": 0, "y": 0, "width": width, "height": h, "scale": 1}})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    print(f"{path}: {width} x {h}")


def run_screenshots(d, server, out):
    os.makedirs(out, exist_ok=True)
    d.get(server.url + "?lesson=pipeline-bubble&predict=0")
    wait_results(d)
    for side in "AB":
        d.find_element("css selector", f"#panel{side} .tlbox summary").click()
    check_timelines(d)
    full_page(d, os.path.join(out, "explorer-lesson.png"), 1100)
    d.get(server.url + "?lesson=all-reduce-vs-parameter-server")
    wait_results(d)
    click(d, "g-B")
    click(d, "g-mid")
    click(d, "reveal")
    wait_for(d, "return !!document.getElementById('answer').dataset.which", "the revealed answer")
    full_page(d, os.path.join(out, "explorer-reveal.png"), 1100, 900)
    d.get(server.url + "?lesson=zero-and-offload&predict=0")
    wait_results(d)
    full_page(d, os.path.join(out, "explorer-phone.png"), 412, 1500)


def our_chromium_pids(profile):
    """Processes whose command line names our fresh profile: the browser this run started, and nothing else."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if ("--user-data-dir=" + profile).encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtsim", required=True)
    ap.add_argument("what", choices=["lesson", "url", "phone", "screenshots"])
    ap.add_argument("arg", nargs="?")
    args = ap.parse_args()
    if not chromium_path():
        print("SKIPPED: no chromium here (Debian: apt-get install chromium chromium-driver python3-selenium)")
        return SKIP
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("FAIL: chromium is here but python3-selenium is not (scripts/packages.sh installs both)")
        return 1

    def too_long(*_):
        raise Failure(f"the whole run took more than {WHOLE_S} s")
    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(WHOLE_S)
    server = d = None
    profile = tempfile.mkdtemp(prefix="dtsim-chromium-")
    try:
        server = Server(args.dtsim)
        d = browser(profile)
        {"lesson": lambda: run_lesson(d, server, args.arg), "url": lambda: run_url(d, server),
         "phone": lambda: run_phone(d, server), "screenshots": lambda: run_screenshots(d, server, args.arg or "docs/img")}[args.what]()
        print("1 passed, 0 failed")
        return 0
    except Exception as e:  # a Failure, a WebDriver error, a timeout: all end the same way
        print(f"FAIL: {type(e).__name__}: {e}")
        print("0 passed, 1 failed")
        return 1
    finally:
        signal.alarm(0)
        if d is not None:
            try:
                d.quit()
            except Exception:
                pass
        for pid in our_chromium_pids(profile):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if server is not None:
            server.stop()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
