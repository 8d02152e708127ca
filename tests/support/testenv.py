#!/usr/bin/env python3
"""The per-test environment of cmake/testenv.cmake: setup and check.

  testenv.py setup CTEST BUILD_DIR ROOT   make ROOT/TEST/{home,run,state} afresh
  testenv.py check CTEST BUILD_DIR ROOT   after the tests: fail when a test
      has no per-test HOME, XDG_RUNTIME_DIR, XDG_STATE_HOME, EJOB_STATE_DIR
      under ROOT/TEST (it would run with the user's, and its daemons would
      write the user's default state directory), or when a test wrote into
      its default state directory (EJOB_STATE_DIR, $XDG_RUNTIME_DIR/ejob,
      $XDG_STATE_HOME/ejob): its daemons and commands must use a directory
      of its own (--state-dir or EJOB_STATE_DIR in the test's temp dir).

The tests and their environment come from `ctest --show-only=json-v1`.
"""
import json
import os
import shutil
import subprocess
import sys

VARS = ("HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "EJOB_STATE_DIR")


def tests(ctest, build):
    out = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    for t in json.loads(out).get("tests", []):
        env = {}
        for prop in t.get("properties", []):
            if prop.get("name") == "ENVIRONMENT":
                for kv in prop.get("value", []):
                    k, _, v = kv.partition("=")
                    env[k] = v
        yield t["name"], env


def isolated(name, env, root):
    want = os.path.join(root, name)
    return all(env.get(v, "").startswith(want + "/") for v in VARS)


def written(env):
    """Files under the test's default state directories."""
    found = []
    for d in (env["EJOB_STATE_DIR"], os.path.join(env["XDG_RUNTIME_DIR"], "ejob"),
              os.path.join(env["XDG_STATE_HOME"], "ejob")):
        for top, _, files in os.walk(d):
            found += [os.path.join(top, f) for f in files]
    return found


def main():
    step, ctest, build, root = sys.argv[1:5]
    failures = 0
    checked = 0
    if step == "setup":
        shutil.rmtree(root, ignore_errors=True)
    for name, env in tests(ctest, build):
        if name.startswith("testenv."):
            continue
        if not isolated(name, env, root):
            if step == "check":
                print(f"FAIL: {name} runs with the user's HOME/XDG_RUNTIME_DIR/EJOB_STATE_DIR: "
                      "register it in a directory that calls ej_isolate_tests() "
                      "(cmake/testenv.cmake)")
                failures += 1
            continue
        checked += 1
        if step == "setup":
            for v in ("HOME", "XDG_RUNTIME_DIR", "EJOB_STATE_DIR"):
                os.makedirs(env[v], mode=0o700, exist_ok=True)
            continue
        files = written(env)
        if files:
            print(f"FAIL: {name} wrote into its default state directory "
                  f"(the user's, outside ctest): {', '.join(sorted(files)[:5])}; give its "
                  "daemons and commands a directory in its temp dir (--state-dir or "
                  "EJOB_STATE_DIR)")
            failures += 1
    print(f"testenv {step}: {checked} test(s) with their own state directories, "
          f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


main()
