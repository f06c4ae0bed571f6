"""A serving engine's process on 127.0.0.1, started on a free port and stopped by its PID.

`LocalServer` is what `llama_server.LlamaServer` and `vllm_server.VllmServer` share: the command line comes
from the subclass (`command`), the process's output goes to a log file whose tail is in every start-up error,
readiness is a 200 from the subclass's `health_path` within a bounded time, and `stop` sends SIGTERM, then
SIGKILL. Servers a process started and never stopped are killed at exit, by PID. Torch-free.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

_RUNNING: dict[int, subprocess.Popen] = {}


class ServerStartError(RuntimeError):
    """The server did not start or did not become ready in time."""


def log_tail(path: str | os.PathLike, lines: int = 40) -> str:
    """The last `lines` lines of a text file ("" when it does not exist)."""
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on `host` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class LocalServer:
    """One server process (a context manager). Subclasses set `name`, `health_path`, `error` and `command()`."""

    name = "server"
    health_path = "/health"
    error: type[RuntimeError] = ServerStartError

    def __init__(
        self,
        log_path: Path,
        startup_timeout_s: float,
        stop_timeout_s: float,
        env: dict[str, str] | None = None,
        port: int = 0,
    ) -> None:
        if startup_timeout_s <= 0 or stop_timeout_s <= 0:
            raise ValueError("startup_timeout_s and stop_timeout_s must be > 0")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535 (0: a free one), got {port!r}")
        self.log_path = Path(log_path)
        self.startup_timeout_s, self.stop_timeout_s = startup_timeout_s, stop_timeout_s
        self.env = env
        self.host, self.port, self.fixed_port = "127.0.0.1", port, port
        self.pid: int | None = None
        self._process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        """The command line, with `self.host` and `self.port` already chosen."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Any:
        """Start the process on a free port and wait until `health_path` answers 200 (`error` if not)."""
        if self._process is not None:
            raise self.error(f"{self.name} is already running (PID {self.pid})")
        self.port = self.fixed_port or free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with open(self.log_path, "w") as log:
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            env = None if self.env is None else {**os.environ, **self.env}
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        self._process, self.pid = process, process.pid
        _RUNNING[process.pid] = process
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        process = self._process
        assert process is not None, "start() sets the process before waiting"
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    raise self.error(
                        f"{self.name} (PID {self.pid}) exited with {process.returncode} before it was "
                        f"ready; last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                try:
                    if client.get(f"{self.base_url}{self.health_path}").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.25)
        raise self.error(
            f"{self.name} (PID {self.pid}) not ready after {self.startup_timeout_s} s; "
            f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def stop(self) -> int | None:
        """Stop the process by its PID: SIGTERM, SIGKILL after `stop_timeout_s`; -> its exit status."""
        process, self._process = self._process, None
        if process is None:
            return None
        _RUNNING.pop(process.pid, None)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(self.stop_timeout_s)
        return process.returncode

    def serve_in_foreground(self) -> int:
        """Start, print where the server is, run until it exits or Ctrl-C, stop it: a `serve` command; -> 0."""
        with self:
            print(f"{self.base_url} PID {self.pid} log {self.log_path}", flush=True)
            try:
                if self._process is not None:
                    self._process.wait()
            except KeyboardInterrupt:
                pass
        return 0

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_leftovers() -> None:
    """Kill servers this process started and never stopped (a crashed test session), by their PIDs."""
    for process in list(_RUNNING.values()):
        if process.poll() is None:
            process.kill()


__all__ = ["LocalServer", "ServerStartError", "free_port", "log_tail"]
