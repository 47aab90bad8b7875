# The interpreter of a PythonPool (pyserver.go): reads one JSON request a
# line on stdin ({"script": text, "args": [...]}), runs the script as
# `python -c script args...` would, and writes one JSON reply a line
# ({"out": its stdout, "error": its traceback or exit message, "code": its
# exit status}). Modules a script imports stay loaded for the next one.
import gc
import io
import json
import os
import sys
import traceback

# The replies go to a copy of the original stdout; file descriptor 1 then
# points at stderr, so that a library writing to it directly (DuckDB's
# progress bar, a C extension's printf) cannot corrupt the replies.
replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
requests = sys.stdin
sys.stdin = open(os.devnull)

for line in requests:
    req = json.loads(line)
    out = io.StringIO()
    error, code = "", 0
    sys.stdout = out
    sys.argv = ["-c"] + req["args"]
    try:
        exec(compile(req["script"], "<script>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            error, code = str(e.code), 1
    except BaseException:
        error, code = traceback.format_exc(), 1
    finally:
        sys.stdout = sys.__stdout__
    # A script's connections (a catalog's database, DuckDB) close with
    # their objects, not at the interpreter's exit as they would alone.
    gc.collect()
    replies.write(json.dumps({"out": out.getvalue(), "error": error, "code": code}) + "\n")
    replies.flush()
