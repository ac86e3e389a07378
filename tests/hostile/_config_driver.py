"""Load hostile graph files in one process under an address-space limit; one JSON line per file.

Run by ``test_config_limits.py`` as ``python _config_driver.py LIMIT_MIB FILE...``. Each file is
loaded twice: by the Python API (``load_yaml_file``) and by ``flowplex check`` (the typer app,
in-process, its stderr captured). Whatever happens, even ``MemoryError``, is reported, not raised.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import time
import traceback


def _rss_mib() -> float:
    """This program's peak resident memory (VmHWM: ``ru_maxrss`` keeps the peak of the process
    that forked this one across the exec, a test process's hundreds of MiB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    limit = int(sys.argv[1]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from flowplex.cli import app
    from flowplex.config import load_yaml_file
    from flowplex.errors import ConfigError

    baseline = _rss_mib()
    for path in sys.argv[2:]:
        result: dict[str, object] = {"path": path}
        start = time.perf_counter()
        try:
            load_yaml_file(path)
            result["api"] = "ok"
        except ConfigError as exc:
            result["api"], result["api_message"] = "ConfigError", str(exc)
        except BaseException as exc:
            result["api"], result["api_message"] = type(exc).__name__, traceback.format_exc()
        result["api_s"] = time.perf_counter() - start
        err = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                app(["check", path], prog_name="flowplex")
                code: object = 0
            except SystemExit as exc:
                code = exc.code
            except BaseException:
                code = "raised"
                err.write(traceback.format_exc())
        result.update(cli_code=code, cli_stderr=err.getvalue(), cli_s=time.perf_counter() - start,
                      rss_growth_mib=_rss_mib() - baseline)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
