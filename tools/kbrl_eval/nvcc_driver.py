"""nvcc with its two front ends run side by side.

nvcc compiles a .cu file as a chain of tools, one after another: the host preprocessor and
cudafe++ (the host front end), then the device preprocessor, cicc, ptxas and fatbinary (the
device side), then the host compiler. With torch's headers cudafe++ and cicc each take about a
third of the build, and the only thing the device side takes from cudafe++ is the unit's
module id (the name of its anonymous namespaces), which cudafe++ makes up and writes to a file.
This driver asks nvcc for its plan (`-dryrun`), writes a module id itself, and runs the host
front end and the device side at the same time, then the host compile, with nvcc's own
commands. A build's output is replayed in nvcc's order and stops where nvcc would stop, so
its warnings and errors read as nvcc's do. Whatever it does not recognise (other options, a
plan of another shape) it leaves to nvcc itself.

It does so when the machine has a core to spare (side_by_side); on a busy builder it runs the
same plan one step after the other (KBRL_EVAL_SIDE_BY_SIDE=1: at once whatever the load, for
tests and measurements). install_parallel_nvcc puts it into torch's builds;
KBRL_EVAL_SERIAL_NVCC=1 runs nvcc itself.
The module id differs from nvcc's own (nvcc's depends on the file's path, so a build in
another folder differs in the same way); it is made from the source's path and contents and
the arguments, so two sources never share one.

    python3 nvcc_driver.py REAL_NVCC [nvcc arguments...]"""

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# options after which the plan is something else (or nothing to run): left to nvcc
_LEFT_TO_NVCC = {"-dryrun", "--dryrun", "-keep", "--keep", "-E", "--preprocess", "-M", "-MM",
                 "--generate-dependencies", "-time", "--time", "-V", "--version", "-h",
                 "--help", "-lib", "-dlink", "--device-link", "-rdc", "--relocatable-device-code",
                 "-dc", "--device-c", "-cubin", "-ptx", "-fatbin", "-link", "-run",
                 "--list-gpu-arch", "--list-gpu-code", "-MMD", "-MP", "-MT", "-MQ"}

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class Plan:
    """nvcc's commands, split into what can run side by side.

    env: the variable assignments the commands need (shell lines); host, device, after:
    command lines (shell syntax, as nvcc prints them), run as host and device side by side,
    then after. module_id_file: where cudafe++ would have written the module id."""

    def __init__(self, env, host, device, after, module_id_file):
        self.env, self.host = env, host
        self.device, self.after, self.module_id_file = device, after, module_id_file


def _one_word(line):
    try:
        return len(shlex.split(line)) == 1
    except ValueError:
        return False


def _output_of(command):
    m = re.search(r'(?:^|\s)-o\s+"([^"]+)"', command)
    return m.group(1) if m else None


def make_plan(dryrun_text):
    """The Plan for nvcc's -dryrun text (its lines start with '#$ '), or None when the plan is
    not the one this driver knows: exactly one cudafe++ that makes the module id, its input
    made by one preprocessor command, and a last command that compiles cudafe++'s output."""
    lines = [l[3:] for l in dryrun_text.splitlines() if l.startswith("#$ ")]
    # the assignments that are one shell word (nvcc also prints lists, such as
    # SYSTEM_INCLUDES="-isystem" "DIR", that its commands do not use and a shell cannot run)
    env = [l for l in lines if _ASSIGNMENT.match(l) and _one_word(l)]
    commands = [l for l in lines if not _ASSIGNMENT.match(l)]
    if any(c.startswith("--") for c in commands):
        return None  # nvcc's internal steps (dependency filtering): not a shell command
    fronts = [i for i, c in enumerate(commands) if c.startswith("cudafe++ ")]
    if len(fronts) != 1 or len(commands) < 4:
        return None
    front = commands[fronts[0]]
    made = re.search(r'--module_id_file_name\s+"([^"]+)"', front)
    host_input = re.search(r'"([^"]+\.cpp4\.ii)"\s*$', front)
    host_output = re.search(r'--gen_c_file_name\s+"([^"]+)"', front)
    if not ("--gen_module_id_file" in front.split() and made and host_input and host_output):
        return None
    preps = [i for i, c in enumerate(commands) if _output_of(c) == host_input.group(1)]
    if len(preps) != 1 or preps[0] > fronts[0] or host_output.group(1) not in commands[-1]:
        return None
    prep = preps[0]
    device = [c for i, c in enumerate(commands[:-1]) if i not in (prep, fronts[0])]
    if any(host_input.group(1) in c or host_output.group(1) in c for c in device):
        return None  # something else reads the host side's files: keep nvcc's order
    host = [commands[prep], front.replace("--gen_module_id_file", "", 1)]
    return Plan(env, host, device, commands[-1:], made.group(1))


def module_id(source, args):
    """A module id in nvcc's shape (_HASH_LEN_NAME_HASH), from the source's path, contents
    and the arguments."""
    path = os.path.abspath(source)
    h = hashlib.sha256(path.encode("utf-8", "surrogateescape"))
    with open(source, "rb") as f:
        content = hashlib.sha256(f.read() + "\0".join(args).encode("utf-8", "surrogateescape"))
    base = os.path.basename(source)
    return "_%s_%d_%s_%s" % (h.hexdigest()[:8], len(base), re.sub(r"\W", "_", base),
                             content.hexdigest()[:8])


def _script(env, commands):
    lines = ["set -a"] + env + ["set +a"]
    # nvcc's own removal of a temporary ignores one that a tool did not write
    lines += ["%s || exit $?" % (re.sub(r"^rm ", "rm -f ", c)) for c in commands]
    return "\n".join(lines) + "\n"


def _start(env, commands):
    return subprocess.Popen(["bash", "-c", _script(env, commands)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _replay(proc_output):
    out, err = proc_output
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    sys.stderr.buffer.write(err)
    sys.stderr.flush()


def side_by_side(load, cpus):
    """Whether to run the two sides at once: when the machine has a core to spare (the last
    minute's load average leaves one of the cpus this process may use idle). On a builder
    that already runs a build per core the second side would only take a core from another
    build: the two sides together do no less work than one after the other."""
    return load + 1 <= cpus


def run(real_nvcc, args):
    """The build as nvcc would do it, its two sides side by side; the exit status."""
    sources = [a for a in args if a.endswith(".cu")]
    if len(sources) != 1 or "-c" not in args or any(a.split("=")[0] in _LEFT_TO_NVCC
                                                     for a in args):
        return None
    depfile = None
    if "-MD" in args or "-MF" in args:
        if args.count("-MD") != 1 or args.count("-MF") != 1:
            return None
        at = args.index("-MF")
        if at + 1 >= len(args):
            return None
        depfile = args[at + 1]
        args = [a for i, a in enumerate(args) if a != "-MD" and i not in (at, at + 1)]
    out = args[args.index("-o") + 1] if "-o" in args and args.index("-o") + 1 < len(args) \
        else None
    if out is None:
        return None
    scratch = tempfile.mkdtemp(prefix="kbrl-nvcc-")
    try:
        env = dict(os.environ, TMPDIR=scratch)
        dry = subprocess.run([real_nvcc] + args + ["-dryrun"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        plan = make_plan(dry.stderr.decode("utf-8", "surrogateescape"))
        if dry.returncode != 0 or plan is None:
            return None
        if depfile is not None:
            # the host preprocessor writes the dependencies nvcc would have filtered from it
            plan.host[0] += " -MD -MF %s -MT %s" % (shlex.quote(depfile), shlex.quote(out))
        with open(plan.module_id_file, "w") as f:
            f.write(module_id(sources[0], args))
        forced = os.environ.get("KBRL_EVAL_SIDE_BY_SIDE", "") not in ("", "0")
        if not forced and not side_by_side(os.getloadavg()[0], len(os.sched_getaffinity(0))):
            # one after the other, as nvcc would, but still with the plan's module id
            proc = subprocess.run(["bash", "-c", _script(plan.env, plan.host + plan.device
                                                         + plan.after)])
            return proc.returncode
        host = _start(plan.env, plan.host)
        device = _start(plan.env, plan.device)
        host_output = host.communicate()
        if host.returncode != 0:
            device.kill()
            device.communicate()
            _replay(host_output)
            return host.returncode
        device_output = device.communicate()
        _replay(host_output)
        _replay(device_output)
        if device.returncode != 0:
            return device.returncode
        return subprocess.run(["bash", "-c", _script(plan.env, plan.after)]).returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def install_parallel_nvcc(cpp_extension):
    """Makes torch's ninja files run nvcc through this driver: after torch writes build.ninja,
    its `nvcc = PATH` line becomes `nvcc = PYTHON nvcc_driver.py PATH`."""
    original = getattr(cpp_extension, "_write_ninja_file", None)
    if original is None or getattr(original, "_kbrl_parallel_nvcc", False) or os.name != "posix":
        return
    import functools
    import inspect
    signature = inspect.signature(original)
    driver = " ".join(shlex.quote(p) for p in (sys.executable, os.path.abspath(__file__)))

    # wraps: the wrapper installed around this one (install_torch_pch) binds torch's arguments
    # by name through inspect.signature, which follows __wrapped__
    @functools.wraps(original)
    def write_ninja_file(*args, **kwargs):
        result = original(*args, **kwargs)
        try:
            path = signature.bind(*args, **kwargs).arguments["path"]
            with open(path) as f:
                text = f.read()
            edited = re.sub(r"^nvcc = (\S.*)$", lambda m: "nvcc = %s %s" % (driver, m.group(1)),
                            text, count=1, flags=re.M)
            if edited != text:
                with open(path, "w") as f:
                    f.write(edited)
        except BaseException:  # noqa: BLE001 - a missing speed-up is not an error
            pass
        return result

    write_ninja_file._kbrl_parallel_nvcc = True
    cpp_extension._write_ninja_file = write_ninja_file


def main(argv):
    real_nvcc, args = argv[1], argv[2:]
    if os.environ.get("KBRL_EVAL_SERIAL_NVCC", "") in ("", "0"):
        try:
            code = run(real_nvcc, args)
        except Exception:  # noqa: BLE001 - nvcc itself then builds as it would
            code = None
        if code is not None:
            return code
    os.execv(real_nvcc, [real_nvcc] + args)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
