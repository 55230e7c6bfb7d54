"""`make test-local-model`: worldsim against a real small model served by upstream llama-server.

Starts ``llama-server`` (built by build_llama_server.sh) with the SmolLM2-135M GGUF on
127.0.0.1 and runs, through the command line with the settings docs/models.md gives for slow
local routes: a direct forecast, a two-tick run, a kill-and-resume, a run whose server is
killed mid-way and restarted, and a small study. Each must finish with a trace that verifies,
whatever the model says; repairs and failures must be recorded; a resumed run must pay for no
call twice. Each scenario has its own response cache, so none is answered from another's.
Prints the figures docs/models.md reports. Not part of `make test`: it needs minutes and the
build.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARD = ROOT / "scenarios" / "merger-review.yaml"
ROUTE = "local/smollm2"
ROUTES_YAML = """routes:
  local/smollm2:
    timeout_s: 120
    max_attempts: 3
    max_connections: 1
    output_mode: [json_schema, text]
"""


ROUTE_SETTINGS = {
    "timeout_s": 120,
    "max_attempts": 3,
    "max_connections": 1,
    "output_mode": ["json_schema", "text"],
}


def study_manifest() -> str:
    """A small study on the local route (JSON, which the manifest reader takes as YAML)."""
    routes = {ROUTE: ROUTE_SETTINGS}
    return json.dumps(
        {
            "name": "local-study",
            "cards": [str(CARD)],
            "seeds": [0, 1],
            "methods": [
                {
                    "label": "local-run",
                    "run": {"policy": "no_branch", "ticks": 1, "model": ROUTE, "routes": routes},
                },
                {"label": "local-direct", "forecast": {"model": ROUTE, "routes": routes}},
            ],
        }
    )


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, cache: Path, port: int) -> None:
        self.cache, self.port, self.proc = cache, port, None

    def start(self) -> None:
        env = {**os.environ, "LD_LIBRARY_PATH": str(self.cache / "bin")}
        self.proc = subprocess.Popen(  # type: ignore[assignment]
            [str(self.cache / "bin" / "llama-server"), "-m", str(self.cache / "model.gguf"),
             "--host", "127.0.0.1", "--port", str(self.port), "-c", "8192", "--parallel", "1",
             "-t", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise SystemExit("llama-server did not come up")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def worldsim(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from worldsim.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)


def calls_of(trace: Path) -> list[dict[str, object]]:
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    return [r["data"] for r in records if r["type"] == "llm_call"]


def check(trace: Path, env: dict[str, str], figures: dict[str, object], name: str) -> None:
    verified = worldsim("verify", str(trace), env=env)
    assert verified.returncode == 0, verified.stderr
    calls = calls_of(trace)
    paid = [c["request_hash"] for c in calls if c.get("cache") != "hit" and not c.get("error")]
    doubled = [h for h, n in Counter(paid).items() if n > 1]
    assert not doubled, f"{name}: calls paid twice: {doubled}"
    kinds = Counter(e["kind"] for c in calls for e in c.get("errors", []))
    figures[name] = {
        "calls": len(calls),
        "failed": sum(1 for c in calls if c.get("error")),
        "repairs": kinds.get("invalid_output", 0),
        "errors": dict(kinds),
        "output_tokens": sum(c["usage"]["output_tokens"] for c in calls),
        "latency_s": round(sum(c["latency_s"] for c in calls), 1),
    }


def main() -> None:
    cache = Path(sys.argv[1])
    server = Server(cache, _port())
    server.start()
    work = Path(tempfile.mkdtemp(prefix="worldsim-local-"))
    routes = work / "routes.yaml"
    routes.write_text(ROUTES_YAML)
    base = {**os.environ, "LOCAL_BASE_URL": f"http://127.0.0.1:{server.port}/v1"}

    def scenario(name: str) -> dict[str, str]:
        return {**base, "WORLDSIM_CACHE_DIR": str(work / "cache" / name.replace(" ", "-"))}

    env = scenario("models check")
    common = ["--model", ROUTE, "--routes", str(routes), "--no-preflight"]
    figures: dict[str, object] = {}
    try:
        started = time.perf_counter()
        check_cmd = worldsim("models", "check", ROUTE, "--routes", str(routes), "--card",
                             str(CARD), "--ticks", "2", "--json", env=env)  # fmt: skip
        assert check_cmd.returncode == 0, check_cmd.stderr
        figures["models check"] = json.loads(check_cmd.stdout)
        figures["models check"]["wall_s"] = round(time.perf_counter() - started, 1)  # type: ignore[index]

        for name, args in (
            ("forecast", ["forecast", str(CARD), *common, "--out", str(work / "f")]),
            ("run 2 ticks", ["run", str(CARD), "--ticks", "2", *common, "--out", str(work / "r")]),
        ):
            started = time.perf_counter()
            env = scenario(name)
            done = worldsim(*args, "--json", env=env)
            assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
            trace = Path(json.loads(done.stdout.splitlines()[-1])["trace"])
            check(trace, env, figures, name)
            figures[name]["wall_s"] = round(time.perf_counter() - started, 1)  # type: ignore[index]

        # kill-and-resume: interrupt a run once it has paid for calls, then resume it
        env = scenario("kill and resume")
        out = work / "k"
        cmd = [sys.executable, "-c", "from worldsim.cli import main; main()", "run", str(CARD),
               "--ticks", "2", "--policy", "no_branch", *common, "--out", str(out)]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        trace = out / "merger-review__no_branch__ticks2__s0.jsonl"
        while proc.poll() is None and (not trace.exists() or not calls_of(trace)):
            time.sleep(1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = len(calls_of(trace))
        resumed = worldsim("run", "--resume", str(trace), "--routes", str(routes), env=env)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        check(trace, env, figures, "kill and resume")
        figures["kill and resume"]["calls before kill"] = before  # type: ignore[index]

        # the server dies mid-run and comes back: retries carry the run through
        env = scenario("server restarted")
        out = work / "s"
        proc = subprocess.Popen([*cmd[:-1], str(out)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        trace = out / "merger-review__no_branch__ticks2__s0.jsonl"
        while proc.poll() is None and (not trace.exists() or not calls_of(trace)):
            time.sleep(1)
        server.kill()
        time.sleep(3)
        server.start()
        _, err = proc.communicate()
        assert proc.returncode == 0, err[-2000:]
        check(trace, env, figures, "server restarted")

        # a small study: a one-tick run and the direct baseline, two seeds each
        env = scenario("study")
        manifest = work / "study.yaml"
        manifest.write_text(study_manifest())
        started = time.perf_counter()
        study = worldsim("batch", str(manifest), "--out", str(work / "study"), "--json", env=env)
        assert study.returncode == 0, study.stderr[-2000:]
        rows = [json.loads(line) for line in study.stdout.splitlines()[:-1]]
        assert len(rows) == 4, rows
        for row in rows:
            check(work / "study" / row["trace"], env, figures, f"study {row['trace']}")
        figures["study"] = {
            "jobs": len(rows),
            "complete": sum(r["status"] == "complete" for r in rows),
            "wall_s": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(figures, indent=1))
    finally:
        server.kill()


if __name__ == "__main__":
    main()
