"""The scenario suite (clients/scenarios/*.json) against a real fanoutd.

Uses $FANOUTD_BIN, else builds ./cmd/fanoutd with go (skipped without go)."""

import asyncio
import glob
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
import websockets

import fanoutd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCENARIOS = sorted(glob.glob(os.path.join(ROOT, "clients", "scenarios", "*.json")))

_bin = None


def fanoutd_bin():
    global _bin
    if os.environ.get("FANOUTD_BIN"):
        return os.environ["FANOUTD_BIN"]
    if _bin is None:
        if shutil.which("go") is None:
            pytest.skip("no FANOUTD_BIN and no go to build fanoutd")
        d = tempfile.mkdtemp(prefix="fanoutd-py-")
        _bin = os.path.join(d, "fanoutd")
        subprocess.run(["go", "build", "-o", _bin, "./cmd/fanoutd"], cwd=ROOT, check=True)
    return _bin


def gzip_comment(path):
    with open(path, "rb") as f:
        b = f.read(65536)
    flg, i = b[3], 10
    if flg & 4:
        i += 2 + int.from_bytes(b[i:i + 2], "little")
    if flg & 8:
        i = b.index(b"\0", i) + 1
    if flg & 16:
        return b[i:b.index(b"\0", i)].decode()
    return ""


def write_faulted(src, dst, faults):
    with open(dst + ".meta.json", "w") as f:
        f.write(gzip_comment(src))
    with gzip.open(src, "rt") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for ft in sorted(faults, key=lambda x: -x["line"]):
        i = ft["line"] - 1
        if ft["kind"] == "drop":
            del lines[i]
        elif ft["kind"] == "blank":
            lines.insert(i, "")
        elif ft["kind"] == "regex":
            m = re.search(ft["pattern"], lines[i])
            assert m, f"line {ft['line']}: {ft['pattern']} does not match"
            lines[i] = lines[i][:m.start()] + ft["repl"] + lines[i][m.end():]
        else:
            raise ValueError(ft["kind"])
    with open(dst, "w") as f:
        f.write("\n".join(lines) + "\n")


async def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


def subsequence(got, want):
    i = 0
    for g in got:
        if i < len(want) and g == want[i]:
            i += 1
    return i == len(want)


class Rec:
    """One client and what its handler saw."""

    def __init__(self, token):
        self.token = token
        self.c = None
        self.task = None
        self.states, self.notices, self.gaps, self.events = {}, [], [], {}
        self.epoch = self.connects = self.disconnects = 0
        self.last_read, self.drop_last = {}, {}
        self.pause_until = 0.0
        self.targets, self.captured = {}, {}

    async def handle(self, m):
        d = self.pause_until - time.monotonic()
        if d > 0:
            await asyncio.sleep(d)  # the client stops reading
        if isinstance(m, fanoutd.BookState):
            self.states.setdefault(m.stream, []).append("valid" if m.state == fanoutd.VALID else m.reason)
        elif isinstance(m, fanoutd.Notice):
            self.notices.append(m)
        elif isinstance(m, fanoutd.Gap):
            self.gaps.append((m, self.epoch))
        elif isinstance(m, fanoutd.Connected):
            self.connects += 1
        elif isinstance(m, fanoutd.Disconnected):
            self.disconnects += 1
            self.drop_last, self.last_read = self.last_read, {}
            self.epoch += 1
        elif isinstance(m, fanoutd.BookEvent):
            self.events.setdefault(m.stream, []).append((m.seq, m.snapshot, self.epoch))
            self.last_read[m.stream] = m.seq
            if self.targets.get(m.stream) == m.seq:
                b = self.c.book(m.stream)
                if b is not None and b.seq == m.seq:
                    self.captured[m.stream] = b.snapshot()
                    del self.targets[m.stream]


def free_addr():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return addr


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


class Run:
    def __init__(self, sc, tmp):
        self.sc, self.dir = sc, tmp
        self.addr = free_addr()
        self.proc = None
        # A cluster's (daemon.cluster): the ingest's embedded NATS URL and
        # each edge's address and process, edge1 first.
        cl = sc["daemon"].get("cluster")
        self.nats_url = "nats://" + free_addr() if cl else None
        self.edges = [{"addr": free_addr(), "proc": None} for _ in range(cl["edges"])] if cl else []
        self.clients = {}
        self.holds = []
        self.log = open(os.path.join(tmp, "daemon.log"), "wb")
        d = sc["daemon"]
        cfg = os.path.join(tmp, "fanoutd.yaml")
        config, role = d.get("config") or "", []
        if cl:
            # The ingest: the venues, the embedded NATS server, and its
            # generated credentials in the scenario's directory.
            role = ["--role", "ingest", "--embedded-nats", "--nats", self.nats_url]
            config += "cluster:\n  nats_dir: %s\n  node: ingest\n" % os.path.join(tmp, "nats")
        with open(cfg, "w") as f:
            f.write(config or "{}\n")
        self.args = [fanoutd_bin(), d["command"], "--listen", self.addr, "--config", cfg] + role + d.get("args", [])
        for i, c in enumerate(d["captures"]):
            src = os.path.join(ROOT, c["path"])
            if not c.get("faults"):
                self.args.append(src)
                continue
            dst = os.path.join(tmp, "fault%d-%s" % (i, os.path.basename(src)[:-3]))
            write_faulted(src, dst, c["faults"])
            self.args.append(dst)

    @property
    def url(self):
        return self.urls[0]

    @property
    def urls(self):
        """What a client connects to: the daemon, or every edge."""
        if self.edges:
            return [f"ws://{e['addr']}/v1/stream" for e in self.edges]
        return [f"ws://{self.addr}/v1/stream"]

    async def start_edges(self):
        """Start every edge with the ingest's generated edge token; wait until each is ready."""
        path = os.path.join(self.dir, "nats", "edge.token")
        await wait_for(lambda: os.path.exists(path) and open(path).read().strip(), 30, "the ingest's edge token")
        token = open(path).read().strip()
        cfg = os.path.join(self.dir, "edge.yaml")
        with open(cfg, "w") as f:
            f.write(self.sc["daemon"]["cluster"]["edge_config"])
        env = dict(os.environ, FANOUTD_NATS_TOKEN=token)
        for e in self.edges:
            e["proc"] = subprocess.Popen([fanoutd_bin(), "serve", "--role", "edge", "--nats", self.nats_url, "--listen", e["addr"],
                                          "--config", cfg], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        for e in self.edges:
            await wait_for(lambda: http_ok(f"http://{e['addr']}/readyz"), 30, "the edge's /readyz")

    def kill_edge(self, name):
        assert name.startswith("edge") and 1 <= int(name[4:]) <= len(self.edges), f"no node {name}"
        e = self.edges[int(name[4:]) - 1]
        if e["proc"] is not None:
            e["proc"].send_signal(signal.SIGKILL)
            e["proc"].wait()
            e["proc"] = None

    async def start(self):
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

        await wait_for(lambda: http_ok(f"http://{self.addr}/healthz"), 30, "/healthz")
        if self.edges:
            await self.start_edges()

    def kill(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    async def close(self):
        for c in self.clients.values():
            await c.c.close()
        for h in self.holds:
            h.transport.abort()  # it does not read: no close handshake
        self.kill()
        for i in range(len(self.edges)):
            self.kill_edge("edge%d" % (i + 1))

    def http_book(self, stream, token):
        v, _, sym = stream.split(":", 2)
        req = urllib.request.Request(f"http://{self.addr}/v1/books/{v}/{sym}")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    async def match(self, c, stream, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = await asyncio.get_running_loop().run_in_executor(None, self.http_book, stream, c.token)
            b = c.c.book(stream)
            got = None
            if b.seq == d["seq"]:
                got = b.snapshot()
            elif b.seq < d["seq"]:
                c.targets[stream] = d["seq"]
                c.captured.pop(stream, None)
                try:
                    await wait_for(lambda: stream in c.captured, 5, "the client at the daemon's seq")
                    got = c.captured[stream]
                except AssertionError:
                    pass
            if got is None:
                continue
            if got.state != fanoutd.VALID and got.reason in (fanoutd.REASON_DROPPING, fanoutd.REASON_GAP):
                continue  # a fresh loss, announced and marked: read again once it is repaired
            assert got.state == fanoutd.VALID or got.reason == fanoutd.REASON_LINK_DOWN, \
                f"{stream}: book at seq {got.seq} is {got.state} ({got.reason})"
            assert got.bids == [tuple(x) for x in d["bids"]] and got.asks == [tuple(x) for x in d["asks"]], \
                f"{stream}: book at seq {d['seq']} differs from /v1/books"
            return
        raise AssertionError(f"{stream}: never caught the client's book at the daemon's seq")

    async def step(self, s):
        op = s["op"]
        name = s.get("client", "main")
        timeout = s.get("timeout_s", 60)
        c = self.clients.get(name)
        if op == "start":
            await self.start()
        elif op == "kill":
            if s.get("node", "").startswith("edge"):
                before = {n: r.disconnects for n, r in self.clients.items()}
                self.kill_edge(s["node"])
                for n, r in self.clients.items():
                    await wait_for(lambda: r.disconnects > before[n], timeout, f"{n} to lose its connection")
            else:
                self.kill()
        elif op == "hold":
            h = {"Authorization": "Bearer " + s["token"]} if s.get("token") else None
            ws = await websockets.connect(self.url, extra_headers=h, max_size=None, ping_interval=None)
            await ws.send(json.dumps({"op": "subscribe", "id": "hold", "streams": s["streams"]}))
            ws.transport.pause_reading()  # never read
            self.holds.append(ws)
        elif op == "connect":
            r = Rec(s.get("token"))
            r.c = fanoutd.Client(self.urls, token=s.get("token"), name=s.get("name"), on_message=r.handle,
                                 min_backoff=0.05, max_backoff=1)
            r.task = r.c.start()
            self.clients[name] = r
        elif op == "subscribe":
            for st in s["streams"]:
                c.states.setdefault(st, ["subscribing"])
            if s.get("error"):
                with pytest.raises(fanoutd.FanoutdError) as e:
                    await asyncio.wait_for(c.c.subscribe(*s["streams"]), timeout)
                assert e.value.code == s["error"]
            else:
                await asyncio.wait_for(c.c.subscribe(*s["streams"]), timeout)
        elif op == "notice":
            def seen():
                if not s.get("streams"):
                    return sum(1 for x in c.notices if x.kind == s["kind"] and (not s.get("venue") or x.venue == s["venue"])) >= s.get("count", 1)
                return all(any(x.kind == s["kind"] and x.stream == st for x in c.notices) for st in s["streams"])
            await wait_for(seen, timeout, f"notice {s['kind']}")
        elif op == "valid":
            await wait_for(lambda: all(c.c.book(st) is not None and c.c.book(st).valid for st in s["streams"]), timeout, "valid books")
        elif op == "states":
            try:
                await wait_for(lambda: subsequence(c.states.get(s["stream"], []), s["sequence"]), timeout, f"states {s['sequence']}")
            except AssertionError as e:
                raise AssertionError(f"{e} (went through {c.states.get(s['stream'], [])[-30:]})") from None
        elif op == "pause":
            c.pause_until = time.monotonic() + s["seconds"]
        elif op == "match_daemon":
            for _ in range(s.get("times", 1)):
                for st in s["streams"]:
                    await self.match(c, st, timeout)
        elif op == "no_duplicates":
            for st, evs in c.events.items():
                last = 0
                for seq, snap, _ in evs:
                    if snap:
                        if seq < last:
                            last = 0
                        last = max(last, seq)
                        continue
                    assert seq > last, f"{st}: seq {seq} handed out after {last}"
                    last = seq
        elif op == "drop":
            n = c.disconnects
            c.c.reconnect()
            await wait_for(lambda: c.disconnects > n, timeout, "the drop")
        elif op == "gap_exact":
            stream = s["stream"]
            info = {}

            def repaired():
                ep = c.epoch
                evs = [(seq, snap) for seq, snap, e in c.events.get(stream, []) if e == ep]
                if evs and c.c.book(stream).valid:
                    info["epoch"], info["first"] = ep, evs[0]
                    return True
                return False
            await wait_for(repaired, timeout, "the book valid after the reattach")
            last = c.drop_last.get(stream, 0)
            got = [(g.first, g.last) for g, e in c.gaps if e == info["epoch"] and g.stream == stream]
            seq, snap = info["first"]
            end = seq if snap else seq - 1  # a snapshot stands for the seqs up to its own
            want = [(last + 1, end)] if end > last else []
            assert got == want, f"gaps {got} after the reattach, want {want} (last read {last}, first event {info['first']}; " \
                f"{c.connects} connections, {c.disconnects} disconnects, gaps {[(g.first, g.last, e) for g, e in c.gaps]})"
        elif op == "fatal":
            await asyncio.wait_for(c.c.wait_closed(), timeout)
            e = c.c.error
            assert isinstance(e, fanoutd.FanoutdError) and e.code == s["code"], f"run ended with {e!r}"
            if s.get("http"):
                assert e.http_status == s["http"]
            assert c.connects == 0 and c.disconnects == 1, f"{c.connects} connections, {c.disconnects} attempts"
        elif op == "connected":
            assert c.connects == 1 and c.disconnects == 0, f"{c.connects} connections, {c.disconnects} disconnects"
        else:
            raise AssertionError(f"unknown op {op}")


@pytest.mark.parametrize("path", SCENARIOS, ids=[os.path.basename(p)[:-5] for p in SCENARIOS])
def test_scenario(path, tmp_path):
    with open(path) as f:
        sc = json.load(f)

    async def main():
        run = Run(sc, str(tmp_path))
        try:
            for i, s in enumerate(sc["steps"]):
                try:
                    await run.step(s)
                except AssertionError as e:
                    with open(os.path.join(str(tmp_path), "daemon.log")) as lf:
                        log = lf.read()[-3000:]
                    raise AssertionError(f"step {i + 1} ({s['op']}): {e}\ndaemon log:\n{log}") from None
        finally:
            await run.close()
    asyncio.run(main())


def test_suite_is_complete():
    assert len(SCENARIOS) >= 6
