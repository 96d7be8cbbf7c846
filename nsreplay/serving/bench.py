"""``nsreplay bench serve``: how fast the serving shim answers, against baselines measured in the same run.

1. Index: build time and the bytes it holds (in this process), then ``nsreplay serve`` is started as
   its own process (HTTP, plus remoting when the remoting endpoint is installed) and its resident
   memory is read from ``/proc`` after start-up and again at the end.
2. HTTP, first pass: every pre-generated lookup once (16 in flight), so every distinct answer is
   rendered once (the cache starts cold); then throughput with ``wrk`` (one thread; the server has the other core) on a trivial endpoint
   (``/v1/namesrvs``, the baseline) and on random historical routes (a pre-generated, shuffled list
   of random NameServer × topic × covered instant, cycled by a Lua script that also counts 5xx).
3. HTTP latency at a fixed rate (default 500 req/s): an open-loop asyncio generator over keep-alive
   connections; latency counts from the scheduled send time, so queueing is not hidden.
4. Remoting: GET_ROUTEINFO_BY_TOPIC (105) at random instants (extField ``asOf``) over pipelined
   connections — closed-loop throughput and fixed-rate latency — against an unsupported request code
   (answered without touching the index) as the baseline.

The machine is shared: compare the ratios, not the absolute numbers, between runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Awaitable, Callable
from urllib.parse import quote, urlencode

__all__ = ["ServeBench", "bench_serve"]


@dataclass(frozen=True)
class Latency:
    rate: float
    achieved: float
    count: int
    errors: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass
class ServeBench:
    warehouse: str
    run_id: str
    namesrvs: int
    interval_rows: int
    index_build_seconds: float
    index_mb: float
    server_rss_start_mb: float = 0.0
    server_rss_end_mb: float = 0.0
    server_rss_peak_mb: float = 0.0
    http_cold_pass_rps: float = 0.0
    http_cold_pass_requests: int = 0
    http_baseline_rps: float | None = None  # None: not measured (wrk not installed)
    http_route_rps: float | None = None
    http_route_5xx: int | None = None
    http_latency_baseline: Latency | None = None
    http_latency_route: Latency | None = None
    http_paced: dict[str, object] = field(default_factory=dict)
    remoting: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def _throughput(self) -> str:
        if self.http_baseline_rps is None or self.http_route_rps is None:
            return "HTTP throughput (wrk): not measured, wrk is not installed"
        return (
            f"HTTP throughput (wrk): baseline /v1/namesrvs {self.http_baseline_rps:,.0f} req/s; random historical routes {self.http_route_rps:,.0f} req/s "
            f"({_ratio(self.http_route_rps, self.http_baseline_rps)} of baseline; goal >= 3,000 req/s); 5xx: {self.http_route_5xx}"
        )

    def report(self) -> str:
        lines = [
            f"warehouse {self.warehouse}: run {self.run_id}, {self.namesrvs} NameServers, {self.interval_rows:,} interval rows held (the broker-live table is read per request)",
            f"index: built in {self.index_build_seconds:.2f} s, {self.index_mb:.1f} MB of arrays; server RSS {self.server_rss_start_mb:.0f} MB after start, "
            f"{self.server_rss_end_mb:.0f} MB at the end (peak {self.server_rss_peak_mb:.0f} MB)",
            f"HTTP first pass over the {self.http_cold_pass_requests:,} random lookups (answers rendered, cache cold): {self.http_cold_pass_rps:,.0f} req/s",
            self._throughput(),
        ]
        for name, lat in (("baseline /v1/namesrvs", self.http_latency_baseline), ("random routes", self.http_latency_route)):
            if lat:
                lines.append(f"HTTP latency at {lat.rate:.0f} req/s, {name}: p50 {lat.p50_ms:.2f} ms, p99 {lat.p99_ms:.2f} ms, max {lat.max_ms:.1f} ms "
                             f"({lat.count} requests, achieved {lat.achieved:.0f} req/s, {lat.errors} errors)")
        if self.http_paced:
            p = self.http_paced
            lines.append(f"HTTP latency, wrk paced to ~{p['route_rps']:.0f} req/s ({p['connections']} connections): baseline p50 {p['baseline'].get('p50_ms', 0):.2f} ms, "
                         f"p99 {p['baseline'].get('p99_ms', 0):.2f} ms; random routes p50 {p['route'].get('p50_ms', 0):.2f} ms, p99 {p['route'].get('p99_ms', 0):.2f} ms "
                         f"(ratio p99 {_ratio(p['route'].get('p99_ms', 0), p['baseline'].get('p99_ms', 0))})")
        if self.http_latency_baseline and self.http_latency_route:
            lines.append(f"HTTP route p99 / baseline p99: {_ratio(self.http_latency_route.p99_ms, self.http_latency_baseline.p99_ms)} (goal: route p99 <= 5 ms)")
        if self.remoting:
            r = self.remoting
            lines.append(f"remoting throughput: baseline (unsupported code) {r['baseline_rps']:,.0f} req/s; code 105 at random instants {r['route_rps']:,.0f} req/s "
                         f"({_ratio(r['route_rps'], r['baseline_rps'])} of baseline)")
            for name in ("latency_baseline", "latency_route"):
                lat = r[name]
                lines.append(f"remoting latency at {lat['rate']:.0f} req/s, {name.split('_')[1]}: p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, "
                             f"max {lat['max_ms']:.1f} ms ({lat['errors']} errors)")
        lines += [f"note: {n}" for n in self.notes]
        lines.append("json: " + json.dumps(asdict(self), default=str))
        return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def _rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB (0 when unreadable)."""
    values = {"VmRSS:": 0.0, "VmHWM:": 0.0}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key = line.split(" ", 1)[0].split("\t", 1)[0]
                if key in values:
                    values[key] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return values["VmRSS:"], values["VmHWM:"]


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# ------------------------------------------------------------------------------------------ server


class _Server:
    """``nsreplay serve`` in a child process, on free ports."""

    def __init__(self, warehouse: str, namesrv: str, remoting: bool) -> None:
        args = [sys.executable, "-m", "nsreplay.cli", "serve", "--warehouse", warehouse, "--http-port", "0", "--reload-interval", "0"]
        if remoting:
            args += ["--remoting-port", "0", "--namesrv", namesrv]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = self.process.stdout.readline() if self.process.stdout else ""
        match = re.search(r"HTTP (http://[^/\s]+)/v1/", line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"nsreplay serve did not start: {line.strip() or (self.process.stderr.read() if self.process.stderr else '')[-500:]}")
        self.url = match.group(1)
        self.host, self.port = self.url.removeprefix("http://").rsplit(":", 1)
        remote = re.search(r"remoting (\S+):(\d+) as", line)
        self.remoting = (remote.group(1), int(remote.group(2))) if remote else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()


# ------------------------------------------------------------------------------------------ HTTP


_LUA = """
pacing_ms = %s
local paths = {%s}
local counter = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) server_errors = 0 end
function request()
  counter = counter + 1
  return wrk.format("GET", paths[(counter %% #paths) + 1])
end
function response(status, headers, body)
  if status >= 500 then server_errors = server_errors + 1 end
end
if pacing_ms > 0 then
  function delay() return pacing_ms end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("server_errors") end
  io.write(string.format("SERVER_ERRORS %%d\\n", total))
end
"""


def _wrk(url: str, duration: float, connections: int, script: str | None = None) -> tuple[float, int, dict[str, float]]:
    """(requests/s, 5xx count, latency percentiles in ms) of one wrk run (one thread)."""
    args = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, int(duration))}s", "--latency"]
    if script:
        args += ["-s", script]
    out = subprocess.run(args + [url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"SERVER_ERRORS (\d+)", out)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}
    percentiles = {f"p{m.group(1)}_ms": float(m.group(2)) * scale[m.group(3)] for m in re.finditer(r"^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)}
    return rps, int(errors.group(1)) if errors else 0, percentiles


def _lua(scratch: str, name: str, paths: list[str], pacing_ms: float) -> str:
    """A wrk script cycling through ``paths``; each connection waits ``pacing_ms`` between requests."""
    script = os.path.join(scratch, name)
    with open(script, "w") as f:
        f.write(_LUA % (repr(pacing_ms), ",".join(json.dumps(p) for p in paths)))
    return script


class _HttpPool:
    """Keep-alive HTTP/1.1 connections with a minimal client (status + Content-Length body)."""

    def __init__(self, host: str, port: int, size: int) -> None:
        self.host, self.port, self.size = host, port, size
        self.free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def open(self) -> None:
        for _ in range(self.size):
            self.free.put_nowait(await asyncio.open_connection(self.host, self.port))

    async def get(self, path: str) -> int:
        reader, writer = await self.free.get()
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = re.search(rb"(?i)content-length:\s*(\d+)", head)
            await reader.readexactly(int(length.group(1)) if length else 0)
            return status
        finally:
            self.free.put_nowait((reader, writer))

    async def close(self) -> None:
        while not self.free.empty():
            _, writer = self.free.get_nowait()
            writer.close()


async def _open_loop(rate: float, duration: float, call: Callable[[int], Awaitable[bool]]) -> Latency:
    """Send ``rate`` requests/s for ``duration`` s regardless of answers; latency from schedule."""
    loop = asyncio.get_running_loop()
    count = max(1, int(rate * duration))
    start = loop.time() + 0.05
    latencies: list[float] = []
    errors = 0

    async def one(i: int, scheduled: float) -> None:
        nonlocal errors
        try:
            ok = await call(i)
        except Exception:  # noqa: BLE001 - counted, the run goes on
            ok = False
        latencies.append(loop.time() - scheduled)
        errors += not ok

    tasks = []
    for i in range(count):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, scheduled)))
    await asyncio.gather(*tasks)
    elapsed = loop.time() - start
    ordered = sorted(latencies)
    return Latency(rate, count / elapsed if elapsed > 0 else 0.0, count, errors, _percentile(ordered, 0.5) * 1e3, _percentile(ordered, 0.99) * 1e3, ordered[-1] * 1e3)


async def _http_latency(host: str, port: int, rate: float, duration: float, paths: list[str]) -> Latency:
    pool = _HttpPool(host, port, 32)
    await pool.open()
    try:
        await asyncio.gather(*(pool.get(paths[i % len(paths)]) for i in range(64)))  # warm-up
        return await _open_loop(rate, duration, lambda i: _ok_status(pool.get(paths[i % len(paths)])))
    finally:
        await pool.close()


async def _cold_pass(host: str, port: int, paths: list[str]) -> float:
    """Requests/s answering every path once (16 in flight): each distinct answer rendered once."""
    pool = _HttpPool(host, port, 16)
    await pool.open()
    try:
        started = time.perf_counter()
        queue = iter(paths)

        async def worker() -> None:
            for path in queue:
                await pool.get(path)

        await asyncio.gather(*(worker() for _ in range(16)))
        return len(paths) / (time.perf_counter() - started)
    finally:
        await pool.close()


async def _ok_status(status: Awaitable[int]) -> bool:
    return await status < 500


# ------------------------------------------------------------------------------------------ remoting


async def _remoting(host: str, port: int, rate: float, duration: float, connections: int, questions: list[tuple[str, int]]) -> dict[str, object]:
    from nsreplay.serving.remoting_client import AsyncRemotingClient, question

    clients = [await AsyncRemotingClient.connect(host, port) for _ in range(max(1, connections // 8))]
    routes = [question(105, topic=topic, as_of=t, version=401) for topic, t in questions]
    trivial = question(34)  # HEART_BEAT: not supported by a read-only NameServer, answered at once

    async def ask(i: int, cmd) -> bool:
        response = await clients[i % len(clients)].request(cmd)
        return response.code != 1  # SYSTEM_ERROR would mean a failed lookup

    async def closed_loop(make: Callable[[int], object]) -> float:
        loop = asyncio.get_running_loop()
        done = 0
        end = loop.time() + duration

        async def worker(w: int) -> None:
            nonlocal done
            i = w
            while loop.time() < end:
                await ask(i, make(i))
                i += 8
                done += 1

        started = loop.time()
        await asyncio.gather(*(worker(w) for w in range(8 * len(clients))))
        return done / (loop.time() - started)

    try:
        await asyncio.gather(*(ask(i, routes[i % len(routes)]) for i in range(64)))  # warm-up
        baseline_rps = await closed_loop(lambda i: trivial)
        route_rps = await closed_loop(lambda i: routes[i % len(routes)])
        lat_base = await _open_loop(rate, duration, lambda i: ask(i, trivial))
        lat_route = await _open_loop(rate, duration, lambda i: ask(i, routes[i % len(routes)]))
    finally:
        for client in clients:
            await client.close()
    return {"baseline_rps": baseline_rps, "route_rps": route_rps, "latency_baseline": asdict(lat_base), "latency_route": asdict(lat_route)}


# ------------------------------------------------------------------------------------------ driver


def bench_serve(warehouse: str, *, duration: float = 10.0, rate: int = 500, connections: int = 32, requests: int = 20000, seed: int = 7) -> ServeBench:
    """Measure the shim on the latest published run of ``warehouse`` (see module docstring)."""
    from nsreplay.serving.index import RouteIndex

    started = time.perf_counter()
    index = RouteIndex.load(warehouse)
    build = time.perf_counter() - started
    coverage = index.coverage()
    rnd = random.Random(seed)
    topics = {c.namesrv: index.topic_names(c.namesrv) or ["TBW102"] for c in coverage}
    picks = []
    for _ in range(requests):
        cov = rnd.choice(coverage)
        picks.append((cov.namesrv, rnd.choice(topics[cov.namesrv]), rnd.randint(cov.from_ts, cov.to_ts)))
    paths = [f"/v1/route/{quote(topic, safe='')}?{urlencode({'namesrv': ns, 'at': t})}" for ns, topic, t in picks]
    remoting_ns = coverage[0].namesrv
    remoting_questions = [(rnd.choice(topics[remoting_ns]), rnd.randint(coverage[0].from_ts, coverage[0].to_ts)) for _ in range(requests)]
    result = ServeBench(warehouse, index.run_id, len(coverage), sum(t.n for t in index._tables.values()), build, index.memory_bytes() / 1e6)
    del index

    try:
        import nsreplay.serving.remoting_client  # noqa: F401
        import nsreplay.serving.remoting_server  # noqa: F401
        remoting = True
    except ImportError:
        remoting = False
        result.notes.append("remoting endpoint not installed: remoting not measured")
    server = _Server(warehouse, remoting_ns, remoting)
    scratch = tempfile.mkdtemp(prefix="nsreplay-bench-serve-")
    try:
        result.server_rss_start_mb = _rss_mb(server.process.pid)[0]
        result.http_cold_pass_rps = asyncio.run(_cold_pass(server.host, int(server.port), paths))
        result.http_cold_pass_requests = len(paths)
        if shutil.which("wrk"):
            routes = _lua(scratch, "routes.lua", paths, 0)
            result.http_baseline_rps, _, _ = _wrk(server.url + "/v1/namesrvs", duration, connections)
            result.http_route_rps, result.http_route_5xx, _ = _wrk(server.url + "/", duration, connections, routes)
            paced = 10  # connections, each sending one request every paced/rate s: ~rate req/s in all
            pacing = 1000.0 * paced / rate
            base_rps, _, base = _wrk(server.url + "/", duration, paced, _lua(scratch, "paced-base.lua", ["/v1/namesrvs"], pacing))
            route_rps, errors, route = _wrk(server.url + "/", duration, paced, _lua(scratch, "paced-routes.lua", paths, pacing))
            result.http_paced = {"connections": paced, "baseline_rps": base_rps, "route_rps": route_rps, "route_5xx": errors,
                                 "baseline": base, "route": route}
        else:
            result.notes.append("wrk not found (Debian: apt-get install wrk): HTTP throughput not measured")
        result.http_latency_baseline = asyncio.run(_http_latency(server.host, int(server.port), rate, duration, ["/v1/namesrvs"]))
        result.http_latency_route = asyncio.run(_http_latency(server.host, int(server.port), rate, duration, paths))
        if server.remoting:
            result.remoting = asyncio.run(_remoting(*server.remoting, rate, duration, connections, remoting_questions))
        result.server_rss_end_mb, result.server_rss_peak_mb = _rss_mb(server.process.pid)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return result


if __name__ == "__main__":  # pragma: no cover
    print(bench_serve(sys.argv[1]).report())
