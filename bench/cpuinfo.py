"""cpuinfo: what the benchmarks record of the machine's processor, read from /proc/cpuinfo
(bench/run, bench/ddp-hooks, bench/resume-matrix); "?" where it cannot be read."""


def _fields():
    """The first processor's "model name" and its set of flags."""
    name, flags = "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name" and name == "?":
                    name = v.strip()
                elif k == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    return name, flags


def model():
    """The CPU's model name."""
    return _fields()[0]


def with_vector_unit():
    """The model name and, in parentheses, its widest vector unit (AVX-512 or AVX2):
    torch's float kernels, and so a training run's losses, differ between them."""
    name, flags = _fields()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    return name + (f" ({isa})" if isa else "")
