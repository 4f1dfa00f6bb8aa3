"""Every place that states ckpz's version states CMakeLists.txt's.

CMakeLists.txt's project() line is the source: pyproject.toml reads it with a regex
(scikit-build-core's regex provider), include/ckpz.h states it for C users, the Python
package for its release check (_loader.PACKAGE_VERSION), and the built library and CLI
report it. This reads each (the header and the package as text, the library through
ctypes, the CLI through -V) and fails naming every one that differs. The ABI's number
too: CMakeLists.txt's CKPZ_SOVERSION is the one the package loads (_loader.SONAME) and
the one the built library's file name carries.

    versions.py SOURCE_DIR LIBCKPZ_SO CKPZ_CLI
"""

import ctypes
import os
import re
import subprocess
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def one(pattern, text, where):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit("FAIL: %s: no match for %r" % (where, pattern))
    return m.group(1)


def main():
    src, lib, cli = sys.argv[1:4]
    cmake = one(r"^project\(ckpz VERSION ([0-9.]+)", read(src + "/CMakeLists.txt"), "CMakeLists.txt")

    # pyproject's own regex, applied as scikit-build-core applies it
    pyproject = read(src + "/pyproject.toml")
    regex = one(r"^regex = '(.*)'$", pyproject, "pyproject.toml [tool.scikit-build.metadata.version]")
    if not re.search(r'^dynamic = \["version"\]', pyproject, re.M):
        sys.exit("FAIL: pyproject.toml does not take its version from CMakeLists.txt (dynamic)")
    found = {"pyproject.toml (its regex over CMakeLists.txt)": one(regex, read(src + "/CMakeLists.txt"), "pyproject regex")}

    header = read(src + "/include/ckpz.h")
    found["include/ckpz.h CKPZ_VERSION_STRING"] = one(r'^#define CKPZ_VERSION_STRING "([^"]*)"', header, "ckpz.h")
    found["include/ckpz.h CKPZ_VERSION_MAJOR.MINOR.PATCH"] = ".".join(
        one(r"^#define CKPZ_VERSION_%s (\d+)" % part, header, "ckpz.h") for part in ("MAJOR", "MINOR", "PATCH"))
    found["python/ckpz/_loader.py PACKAGE_VERSION"] = one(
        r'^PACKAGE_VERSION = "([^"]*)"', read(src + "/python/ckpz/_loader.py"), "_loader.py")

    so = ctypes.CDLL(lib)
    so.ckpz_version_string.restype = ctypes.c_char_p
    found["libckpz ckpz_version_string()"] = so.ckpz_version_string().decode()
    so.ckpz_version_number.restype = ctypes.c_uint
    n = so.ckpz_version_number()
    found["libckpz ckpz_version_number()"] = "%d.%d.%d" % (n // 10000, n // 100 % 100, n % 100)

    out = subprocess.run([cli, "-V"], capture_output=True, text=True, check=True).stdout
    m = re.match(r"ckpz (\S+) \(libckpz (\S+),", out)
    if not m:
        sys.exit("FAIL: ckpz -V printed %r" % out)
    found["ckpz -V (the CLI)"], found["ckpz -V (libckpz)"] = m.group(1), m.group(2)

    soversion = one(r"^set\(CKPZ_SOVERSION (\d+)\)", read(src + "/CMakeLists.txt"), "CMakeLists.txt CKPZ_SOVERSION")
    soname = one(r'^SONAME = "libckpz\.so\.(\d+)"', read(src + "/python/ckpz/_loader.py"), "_loader.py SONAME")
    built = os.path.basename(os.path.realpath(lib))  # libckpz.so.0.4.0: VERSION, not SOVERSION
    link = os.path.join(os.path.dirname(lib), "libckpz.so." + soversion)
    for what, v in (("python/ckpz/_loader.py SONAME", soname),
                    ("the built library's libckpz.so.N", soversion if os.path.exists(link) else "missing")):
        print("%-50s %s" % (what, v))
        if v != soversion:
            sys.exit("FAIL: CMakeLists.txt's CKPZ_SOVERSION is %s, %s is %s (%s)" % (soversion, what, v, built))

    bad = ["%s is %s" % (k, v) for k, v in found.items() if v != cmake]
    for k, v in found.items():
        print("%-50s %s" % (k, v))
    if bad:
        sys.exit("FAIL: CMakeLists.txt says %s, but:\n  %s" % (cmake, "\n  ".join(bad)))
    print("all agree: %s" % cmake)


if __name__ == "__main__":
    main()
