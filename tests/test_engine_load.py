"""The load a collection asks and measures (`conformance.engine.load`, `collect.jobs.run_waves`): every completion
records when it was sent and answered; the candidate's requests go out in waves that reach the server together, a
share of its seeds one request at a time, a background load beside the loaded ones; the measurement from the
client's own intervals agrees with what a server counts.

The server here is a raw asyncio HTTP/1.1 server on 127.0.0.1, in a thread, that answers every completion about
1 ms after reading it (llama.cpp's /completion and the OpenAI /v1/completions shapes) and counts, for each
completion request, the most completion requests it had open at once while that one was open. Budgets are counts;
the margins on "mostly 4 in flight" are wide (a client that sends one request after another scores far below).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("httpx")

from exactspec.conformance.engine import load, samples
from exactspec.conformance.engine.collect import jobs
from exactspec.conformance.engine.collect.client import _close_answered

from exactspec.cli import main as exactspec_main

REPO = Path(__file__).resolve().parents[1]
PROMPTS = [
    {"prompt_id": "a", "prompt_tokens": [1, 2, 3]},
    {"prompt_id": "b", "prompt_tokens": [1, 4]},
]
BACKGROUND = {"temperature": 1.3, "top_k": 5}


class FastEngine:
    """Answers each completion ~1 ms after reading it; per completion request: its body, its peak in flight, and when
    it was read and answered (time.time(), the client's clock)."""

    def __init__(self, delay_s: float = 0.001) -> None:
        # seen: (body, peak in flight, read at, answered at)
        self.delay_s, self.open, self.seen = (
            delay_s,
            {},
            [],
        )

    def _reply(self, method: str, path: str, body: dict) -> tuple[str, str]:
        tokens = [
            random.Random(f"{body.get('seed')}/{body.get('prompt')}/{i}").randrange(6)
            for i in range(3)
        ]
        replies = {
            "/completion": {"content": "x", "tokens": tokens, "stop_type": "limit", "timings": {}},
            "/v1/completions": {
                "choices": [
                    {"text": "x", "token_ids": tokens, "finish_reason": "length", "logprobs": None}
                ]
            },
            "/props": {"build_info": "fast", "model_path": "/models/fast.gguf"},
            "/v1/models": {"data": [{"id": "fast", "max_model_len": 64}]},
            "/version": {"version": "0"},
        }
        if path == "/metrics":
            return "text/plain", (
                "vllm:spec_decode_num_draft_tokens_total 0\n"
                "vllm:spec_decode_num_accepted_tokens_total 0\n"
            )
        return "application/json", json.dumps(replies.get(path, {}))

    async def _completion(self, body: dict, read_at: float) -> None:
        key = object()
        self.open[key] = 0
        for other in self.open:
            self.open[other] = max(self.open[other], len(self.open))
        await asyncio.sleep(self.delay_s)
        self.seen.append((body, self.open.pop(key), read_at, time.time()))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, path = head[0].split(" ")[:2]
                length = next(
                    (
                        int(line.split(":", 1)[1])
                        for line in head[1:]
                        if line.lower().startswith("content-length:")
                    ),
                    0,
                )
                body = json.loads(await reader.readexactly(length)) if length else {}
                if path in ("/completion", "/v1/completions"):
                    await self._completion(body, time.time())
                kind, text = self._reply(method, path, body)
                data = text.encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
                    % (kind.encode(), len(data), data)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve_until_stdin_closes(self) -> None:
        """Serve on a free port (printed), until stdin closes; then print what was seen, as JSON."""
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.close()
        print(json.dumps(self.seen), flush=True)


@contextmanager
def serve(engine: FastEngine):
    """`engine` on a free 127.0.0.1 port in a process of its own (a server sharing this process's GIL would count
    the client's turns, not its requests); yields its URL; `engine.seen` is filled when the block ends."""
    code = (
        "import asyncio, sys; sys.path.insert(0, sys.argv[1]); from tests.test_engine_load import FastEngine; "
        f"asyncio.run(FastEngine({engine.delay_s!r}).serve_until_stdin_closes())"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(REPO)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert port.isdigit(), "the test server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        try:
            out, _ = process.communicate("", timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        engine.seen = [tuple(entry) for entry in json.loads(out.strip() or "[]")]


def collect(
    tmp_path, *extra: str, candidate: str | None = None, reference: str | None = None
) -> int:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    argv = [
        "engine",
        "collect",
        "--prompts",
        str(prompts),
        "--out-dir",
        str(tmp_path / "out"),
        "--max-tokens",
        "3",
        "--temperature",
        "1.0",
        "--retry-wait-s",
        "0.01",
        *extra,
    ]
    argv += ["--candidate-url", candidate] if candidate else []
    argv += ["--reference-url", reference] if reference else []
    return exactspec_main(argv)


def server_peaks(engine: FastEngine) -> dict[tuple[str, int], int]:
    """The server's peak in flight of each sampled request, by (prompt_id, seed) (background requests left out)."""
    ids = {tuple(p["prompt_tokens"]): p["prompt_id"] for p in PROMPTS}
    return {
        (ids[tuple(body["prompt"])], body["seed"]): peak
        for body, peak, _, _ in engine.seen
        if body.get("temperature") != BACKGROUND["temperature"]
    }


def client_peaks(sample_file: samples.SampleFile) -> dict[tuple[str, int], int]:
    """The client's measured peak in flight of each completion, among all the role's requests."""
    records = sample_file.completions
    pool = [(c.sent_at, c.received_at) for c in records] + [
        i for b in sample_file.background for i in b.intervals
    ]
    peaks = load.peak_in_flight([(c.sent_at, c.received_at) for c in records], pool)
    return {(c.prompt_id, c.seed): peak for c, peak in zip(records, peaks)}


@pytest.mark.parametrize("dialect", ["llama.cpp", "vllm", "openai"])
def test_waves_of_four_reach_a_1ms_server_together_and_the_client_measures_what_it_saw(
    tmp_path, dialect
):
    engine = FastEngine()
    with serve(engine) as url:
        assert (
            collect(
                tmp_path, "--dialect", dialect, "--seeds", "48", "--concurrency", "4", candidate=url
            )
            == 0
        )
    cand = samples.read_samples(tmp_path / "out" / "candidate.jsonl")
    assert cand.header.design["load"] == {
        "concurrency": 4,
        "serial_share": 0.25,
        "background": None,
        "reference_concurrency": 4,
    }
    labels = {(c.prompt_id, c.seed): c.load for c in cand.completions}
    assert sorted(c.index for c in cand.completions if c.load == "serial") == sorted(
        list(range(3, 48, 4)) * 2
    )
    server, client = server_peaks(engine), client_peaks(cand)
    assert len(server) == len(client) == 96
    loaded = [key for key, label in labels.items() if label == "loaded"]
    serial = [key for key, label in labels.items() if label == "serial"]
    assert all(server[key] == client[key] == 1 for key in serial), "a serial request had company"
    # Margins for a machine busy with other work (idle, nearly all are at 4; a client sending one request after
    # another, as before waves, gets about a tenth to 4 and a quarter to 3 or more).
    assert sum(server[key] == 4 for key in loaded) >= 0.3 * len(loaded), (
        "the server did not see 4 in flight"
    )
    assert sum(server[key] >= 3 for key in loaded) >= 0.65 * len(loaded), (
        "the server did not see the load"
    )
    assert sum(server[key] == client[key] for key in loaded) >= 0.8 * len(loaded), (
        "client and server disagree"
    )
    measured = load.role_load(cand)
    assert measured["loaded"].share_at_least(3) >= 0.65 and measured["serial"].in_flight == {1: 24}


def test_background_requests_join_the_loaded_waves_and_never_a_serial_request(tmp_path):
    engine = FastEngine()
    with serve(engine) as url:
        assert (
            collect(
                tmp_path,
                "--seeds",
                "16",
                "--concurrency",
                "2",
                "--serial-share",
                "0.5",
                "--background-load",
                "2",
                "--background-sampling",
                "temperature=1.3,top_k=5",
                candidate=url,
            )
            == 0
        )
    cand = samples.read_samples(tmp_path / "out" / "candidate.jsonl")
    assert cand.header.design["load"]["background"] == {"in_flight": 2, "sampling": BACKGROUND}
    background = [body for body, _, _, _ in engine.seen if body["temperature"] == 1.3]
    assert background and all(body["top_k"] == 5 for body in background)
    assert sum(len(record.intervals) for record in cand.background) == len(background)
    assert all(record.sampling == BACKGROUND and record.failed == 0 for record in cand.background)
    server, labels = server_peaks(engine), {(c.prompt_id, c.seed): c.load for c in cand.completions}
    assert all(server[key] == 1 for key, label in labels.items() if label == "serial")
    loaded = [key for key, label in labels.items() if label == "loaded"]
    # 2 sampled + 2 background at once
    assert sum(server[key] >= 3 for key in loaded) >= 0.5 * len(loaded)
    measured = load.role_load(cand)
    assert measured["serial"].in_flight == {1: 16} and measured["background"].requests == len(
        background
    )
    text = load.load_paragraph(cand, cand)
    assert (
        "background 2 in flight at temperature=1.3,top_k=5" in text
        and f"background: {len(background)}" in text
    )


def test_each_record_times_its_request_where_it_meets_the_wire_around_the_servers_own_times(
    tmp_path,
):
    """sent_at is taken as the request's first byte is written, received_at as its answer's first byte is read: the
    server reads the request and answers it in between (one clock: the server runs in this process)."""
    engines = {"reference": FastEngine(), "candidate": FastEngine()}
    with serve(engines["reference"]) as reference, serve(engines["candidate"]) as candidate:
        assert collect(tmp_path, "--seeds", "8", candidate=candidate, reference=reference) == 0
    for role, engine in engines.items():
        served = {
            (tuple(body["prompt"]), body["seed"]): (read_at, answered_at)
            for body, _, read_at, answered_at in engine.seen
        }
        records = samples.read_samples(tmp_path / "out" / f"{role}.jsonl").completions
        assert len(records) == len(served) == 16
        for c in records:
            read_at, answered_at = served[
                (tuple(PROMPTS[c.prompt_id == "b"]["prompt_tokens"]), c.seed)
            ]
            assert c.sent_at <= read_at <= answered_at <= c.received_at


def test_a_run_with_another_load_design_does_not_resume_the_files(tmp_path, capsys):
    with serve(FastEngine()) as url:
        assert collect(tmp_path, "--seeds", "4", candidate=url) == 0
        assert collect(tmp_path, "--seeds", "4", "--serial-share", "0.5", candidate=url) == 2
    assert "cannot resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, flag",
    [
        (
            [
                "--engine-adapter",
                "exactspec.conformance.engine.serve.toy_adapter:ToyEngine",
                "--background-load",
                "2",
            ],
            "--background-load",
        ),
        (
            [
                "--engine-adapter",
                "exactspec.conformance.engine.serve.toy_adapter:ToyEngine",
                "--serial-share",
                "0.5",
            ],
            "--serial-share",
        ),
        (["--candidate-url", "http://127.0.0.1:9", "--serial-share", "1.5"], "--serial-share"),
        (["--candidate-url", "http://127.0.0.1:9", "--background-load", "-1"], "--background-load"),
        (
            [
                "--candidate-url",
                "http://127.0.0.1:9",
                "--background-load",
                "1",
                "--background-sampling",
                "top_q=1",
            ],
            "--background-sampling",
        ),
        (
            [
                "--candidate-url",
                "http://127.0.0.1:9",
                "--background-load",
                "1",
                "--background-sampling",
                "top_k=1.5",
            ],
            "--background-sampling",
        ),
        (
            [
                "--candidate-url",
                "http://127.0.0.1:9",
                "--background-load",
                "1",
                "--background-sampling",
                "temperature=-1",
            ],
            "--background-sampling",
        ),
        (
            ["--candidate-url", "http://127.0.0.1:9", "--background-sampling", "temperature=2"],
            "--background-sampling",
        ),
    ],
)
def test_bad_load_options_are_one_usage_error_naming_the_flag(tmp_path, capsys, extra, flag):
    assert collect(tmp_path, *extra) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], lines


def test_the_load_is_measured_from_the_intervals():
    intervals = [(0.0, 10.0), (1.0, 3.0), (2.0, 4.0), (5.0, 6.0), (10.0, 12.0), (20.0, 21.0)]
    # touching at 10 is not overlapping
    assert load.peak_in_flight(intervals, intervals) == [
        3,
        3,
        3,
        2,
        1,
        1,
    ]
    measured = load.measure(intervals)
    assert measured.in_flight == {1: 2, 2: 1, 3: 3} and measured.overlapped_share == pytest.approx(
        4 / 6
    )
    # 18 request-seconds over 13 busy seconds
    assert measured.mean_in_flight == pytest.approx(18 / 13)
    assert load.mean_in_flight([(20.0, 21.0)], intervals) == pytest.approx(1.0)
    # a subject outside the pool counts what is open
    assert load.peak_in_flight([(4.5, 4.6)], intervals) == [1]


def test_the_serial_seeds_are_a_share_of_every_prefix_of_the_seed_list():
    assert [i for i in range(12) if load.is_serial(i, 0.25)] == [3, 7, 11]
    for share in (0.0, 0.1, 0.25, 1 / 3, 0.7, 1.0):
        for n in (1, 10, 99, 1000):
            assert sum(load.is_serial(i, share) for i in range(n)) == int(n * share + 1e-9)


def test_segments_alternate_loaded_waves_and_serial_requests_block_by_block():
    items = [(pid, index) for pid in "ab" for index in range(80)]
    segments = load.load_segments(items, lambda item: (0, item[1]), 0.25, 4, 2)
    assert [s.label for s in segments] == ["loaded", "serial"] * 3
    assert all(s.wave == (4 if s.label == "loaded" else 1) for s in segments)
    assert sorted(item for s in segments for item in s.jobs) == sorted(items)
    assert all(
        load.is_serial(index, 0.25) == (s.label == "serial")
        for s in segments
        for _, index in s.jobs
    )
    assert (
        max(index for _, index in segments[0].jobs)
        < 32
        <= min(index for _, index in segments[2].jobs)
    )


def _header(
    design: dict | None, version: str = samples.SCHEMA_VERSION, role: str = "candidate"
) -> samples.Header:
    return samples.Header(
        role=role,
        engine={"name": "fast"},
        model={"name": "m"},
        request_defaults={},
        prompts={"a": (1, 2)},
        created="now",
        exactspec_version="0",
        schema_version=version,
        design=design,
    )


def test_the_new_fields_round_trip_and_a_1_1_file_still_reads(tmp_path):
    design = {
        "seeds": {"kind": "consecutive"},
        "concurrency": 4,
        "load": {
            "concurrency": 4,
            "serial_share": 0.25,
            "background": {"in_flight": 2, "sampling": BACKGROUND},
            "reference_concurrency": 2,
        },
    }
    records = [
        samples.Completion("a", 1, (3,), index=0, sent_at=100.0, received_at=100.5, load="loaded"),
        samples.Completion("a", 2, (3,), index=3, sent_at=101.0, received_at=101.2, load="serial"),
        load.Background(((100.1, 100.4), (100.2, 100.3)), failed=1, sampling=BACKGROUND),
    ]
    path = samples.write_samples(tmp_path / "c.jsonl", _header(design), records)
    back = samples.read_samples(path)
    assert (
        back.completions == records[:2]
        and back.background == records[2:]
        and back.header.design == design
    )
    old = samples.write_samples(
        tmp_path / "old.jsonl",
        _header({"seeds": {"kind": "consecutive"}}, "1.1"),
        [samples.Completion("a", 1, (3,), index=0)],
    )
    assert (
        '"sent_at"' not in old.read_text()
        and samples.read_samples(old).completions[0].sent_at is None
    )
    record = load.load_record(samples.read_samples(old), back)
    assert record["candidate"]["asked"]["serial_share"] == 0.25
    assert record["reference"]["measured"]["all"]["unmeasured"] == 1
    assert "not measured" in load.load_paragraph(samples.read_samples(old), back)


@pytest.mark.parametrize(
    "line, field",
    [
        (
            {
                "kind": "completion",
                "prompt_id": "a",
                "seed": 1,
                "tokens": [3],
                "sent_at": 5.0,
                "received_at": 4.0,
            },
            "received_at",
        ),
        (
            {"kind": "completion", "prompt_id": "a", "seed": 1, "tokens": [3], "sent_at": 5.0},
            "received_at",
        ),
        (
            {
                "kind": "completion",
                "prompt_id": "a",
                "seed": 1,
                "tokens": [3],
                "sent_at": "x",
                "received_at": 4.0,
            },
            "sent_at",
        ),
        (
            {"kind": "completion", "prompt_id": "a", "seed": 1, "tokens": [3], "load": "busy"},
            "load",
        ),
        ({"kind": "background", "intervals": [[1.0, 2.0]], "failed": 2}, "failed"),
        ({"kind": "background", "intervals": [[1.0]]}, "intervals[0]"),
        ({"kind": "background", "intervals": [[2.0, 1.0]]}, "intervals[0].received_at"),
    ],
)
def test_bad_new_fields_are_refused_naming_the_file_line_and_field(tmp_path, line, field):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_header(None).to_dict()) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"bad.jsonl: line 2: field '{field}'")):
        samples.read_samples(path)


def test_a_bad_load_design_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    header = _header(
        {"seeds": {"kind": "consecutive"}, "load": {"concurrency": 4, "serial_share": 2}}
    )
    path.write_text(json.dumps(header.to_dict()) + "\n")
    with pytest.raises(ValueError, match="line 1: field 'design.load.serial_share'"):
        samples.read_samples(path)


def test_a_wave_member_that_never_comes_holds_the_others_only_so_long(monkeypatch):
    monkeypatch.setattr(jobs, "WAVE_WAIT_S", 0.05)

    async def main() -> list[str]:
        wave, sent = jobs.Wave(2), []

        async def write() -> None:
            sent.append("written")

        await asyncio.wait_for(wave.send(write), 5.0)  # the other member never sends nor leaves
        await wave.send(write)  # once the wave has gone, a member sends at once
        return sent

    assert asyncio.run(main()) == ["written", "written"]


def test_a_wave_whose_earlier_connection_closed_times_the_open_ones_and_fails_no_request():
    """A long run's keep-alive connection can close between its answer and the wave's next write: its socket's fileno
    is -1 then. Timing the wave's answered requests skips it (select on it raised ValueError, which stopped a
    4,096-completion run as a failed request)."""
    answered, quiet, closed = socket.socketpair(), socket.socketpair(), socket.socketpair()
    answered[1].sendall(b"HTTP/1.1 200 OK\r\n")
    closed[0].close()
    stream = lambda sock: SimpleNamespace(inner=SimpleNamespace(get_extra_info=lambda _: sock))  # noqa: E731
    wires = [[1.0], [1.0], [1.0]]
    _close_answered(
        [
            (stream(answered[0]), wires[0]),
            (stream(quiet[0]), wires[1]),
            (stream(closed[0]), wires[2]),
        ]
    )
    assert len(wires[0]) == 2 and wires[1] == [1.0] and wires[2] == [1.0]
    for sock in (*answered, *quiet, closed[1]):
        sock.close()
