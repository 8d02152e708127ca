#!/usr/bin/env python3
"""Checks the man pages against what they describe.

Each page must render with `man -l` without a single groff or mdoc warning,
have a NAME line that whatis can index, a header that names the project
(not groff's default "BSD ... Manual"),
and must name everything a user can type: ejob(1) every command that
`ejob --help` lists and every registry option of `ejob jobs --help`,
ejob-run(1) every option of `ejob run --help`, ejob-console(1) every
option of `ejob console --help` and every key of its settings file (the
keys src/console/web_settings.c compares), and ejob.yaml(5) every key the
daemon file's reader accepts (the job keys of src/config/fields.h, the
section keys of src/config/yaml.c and yaml_alerts.c). A command, option or key added without
its line in the page fails here.

Usage: man_check.py SOURCE_DIR EJOB_BINARY
"""
import os
import re
import subprocess
import sys

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def render(page):
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    r = subprocess.run(["man", "--warnings=all", "-l", page], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"{page}: man -l exited {r.returncode}: {r.stderr.strip()}")
    if r.stderr.strip():
        fail(f"{page}: warnings while rendering:\n{r.stderr.strip()}")
    return r.stdout


def whatis(page, name):
    """mandb files a page under what lexgrog reads from its NAME section:
    one name, no space in it, or whatis and apropos never find the page."""
    r = subprocess.run(["lexgrog", page], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or f'"{name} - ' not in r.stdout:
        fail(f"{page}: lexgrog reads no whatis entry for {name!r}: {r.stdout.strip()}")


def help_text(ejob, *args):
    r = subprocess.run([ejob, *args, "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def commands(ejob):
    text = help_text(ejob)
    block = text.split("Commands:", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def run_options(ejob, command="run"):
    """Options given in the usage lines or opening a line of the option list."""
    text = help_text(ejob, command)
    usage = text.split("\n\n", 1)[0]
    opts = set(re.findall(r"--([a-z][a-z-]+)", usage))
    opts |= set(re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]+)", text, re.M))
    return sorted(opts - {"help"})


def settings_keys(text):
    """The keys of the console's settings file: strcmp(key, "...")."""
    return set(re.findall(r'strcmp\(key, "([^"]+)"\)', text))


def c_string_arrays(text):
    """Every string of every `keys[] = {...}` array and RC_KEY("...") row."""
    keys = set(re.findall(r'RC_KEY\("([^"]+)"', text))
    for body in re.findall(r"keys\[\]\s*=\s*\{([^}]*)\}", text):
        keys.update(re.findall(r'"([^"]+)"', body))
    return keys


def field_yaml_keys(text):
    """The yaml column (7th argument) of each X(...) row of fields.h."""
    text = text.replace("\\\n", " ")
    keys = set()
    for row in re.findall(r"\bX\(([^()]*(?:\([^()]*\))?[^()]*)\)", text):
        args = [a.strip() for a in re.findall(r'"[^"]*"|[^,]+', row)]
        if len(args) >= 7 and args[6].startswith('"'):
            keys.add(args[6].strip('"').removeprefix("props."))
    return keys


def page_names(src, page):
    """What the page marks up as a command, flag or key."""
    with open(src) as f:
        text = f.read()
    cm = set(re.findall(r"^\.It Cm (\S+)", text, re.M))
    cm |= set(re.findall(r"\bCm ([a-z-]+)", text))
    fl = set(re.findall(r"\bFl -([a-z][a-z-]*)", text))
    ic = set(re.findall(r"\bIc ([A-Za-z.]+)", text))
    sh = {h.lower() for h in re.findall(r"^\.Sh (\S+)", text, re.M)}
    return cm, fl, ic, sh


def main():
    src, ejob = sys.argv[1], sys.argv[2]
    man = os.path.join(src, "man")
    pages = {"ejob.1": "EJOB(1)", "ejob-run.1": "EJOB-RUN(1)", "ejob-console.1": "EJOB-CONSOLE(1)",
             "ejob.yaml.5": "EJOB.YAML(5)"}
    for page, title in pages.items():
        out = render(os.path.join(man, page))
        header = out.lstrip("\n").split("\n", 1)[0]
        if "BSD" in header or "ejob" not in header.split(title)[1]:
            fail(f"{page}: the header does not name the project: {header.strip()!r}")
        whatis(os.path.join(man, page), page.rsplit(".", 1)[0])
        for want in (title, "NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
            if want not in out:
                fail(f"{page}: rendered page lacks {want!r}")

    cm, _, _, _ = page_names(os.path.join(man, "ejob.1"), "ejob.1")
    cmds = commands(ejob)
    if len(cmds) < 10:
        fail(f"ejob --help listed only {cmds}")
    for c in cmds:
        if c not in cm:
            fail(f"ejob.1: command {c!r} of `ejob --help` is not described")
    _, fl, _, _ = page_names(os.path.join(man, "ejob.1"), "ejob.1")
    common = run_options(ejob, "jobs")
    for o in common:
        if o not in fl:
            fail(f"ejob.1: option --{o} of `ejob jobs --help` is not described")

    _, fl, ic, _ = page_names(os.path.join(man, "ejob-console.1"), "ejob-console.1")
    console_opts = run_options(ejob, "console")
    with open(os.path.join(src, "src/console/web_settings.c")) as f:
        console_keys = settings_keys(f.read())
    if len(console_keys) < 10:
        fail(f"web_settings.c: only {sorted(console_keys)} found as settings keys")
    for o in console_opts:
        if o not in fl and o not in common:
            fail(f"ejob-console.1: option --{o} of `ejob console --help` is not described")
    for k in sorted(console_keys):
        if k not in ic:
            fail(f"ejob-console.1: settings key {k!r} (src/console/web_settings.c) is not described")

    _, fl, _, _ = page_names(os.path.join(man, "ejob-run.1"), "ejob-run.1")
    opts = run_options(ejob)
    for o in opts:
        if o not in fl:
            fail(f"ejob-run.1: option --{o} of `ejob run --help` is not described")

    yaml_c = ""
    for name in ("yaml.c", "yaml_alerts.c"):
        with open(os.path.join(src, "src/config", name)) as f:
            yaml_c += f.read()
    with open(os.path.join(src, "src/config/fields.h")) as f:
        fields_h = f.read()
    keys = c_string_arrays(yaml_c) | field_yaml_keys(fields_h)
    _, _, ic, sh = page_names(os.path.join(man, "ejob.yaml.5"), "ejob.yaml.5")
    for k in sorted(keys):
        if k not in ic and k.lower() not in sh:
            fail(f"ejob.yaml.5: key {k!r} of the daemon file is not described")

    print(f"checked {len(pages)} pages: {len(cmds)} commands, {len(common)} registry options, "
          f"{len(opts)} run options, {len(console_opts)} console options, "
          f"{len(console_keys)} console settings keys, {len(keys)} file keys")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("OK")


main()
